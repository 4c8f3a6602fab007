"""The bounce mailbox on Settings → Sending identities: saved from the form, shown masked on
the list and the edit page (the password never), kept when left blank, removed by its box; a
bad URL refused beside its field; the System page's part for each mailbox."""

from __future__ import annotations

from datetime import datetime

from broadside.core.models import BounceMailbox, Identity
from tests.helpers import csrf_token_from
from webapp.extensions import db

PASSWORD = "mailbox-pw-5e1c9a7d"
URL = f"imaps://bounces%40acme.example:{PASSWORD}@imap.acme.example:993/INBOX"


def post(client, path, data, page="/settings/identities/"):
    token = csrf_token_from(client.get(page).text)
    return client.post(path, data={"csrf_token": token, **data})


def form(**fields) -> dict[str, str]:
    return {"name": "Product", "from": "Acme <product@acme.example>",
            "transport": "smtp://mailer:pw@smtp.acme.example:587", "delay_ms": "200",
            "hourly_limit": "0", "postal_address": "", "webhook_secret": "", **fields}


def test_the_mailbox_is_saved_shown_masked_kept_and_removed(logged_in_client):
    saved = post(logged_in_client, "/settings/identities/", form(bounce_mailbox=URL))
    assert saved.status_code == 303, saved.text
    row = db.session.query(Identity).one()
    assert row.bounce_mailbox_url == URL
    listing = logged_in_client.get("/settings/identities/").text
    assert PASSWORD not in listing
    assert "imaps://boun…:•••@imap.acme.example:993/INBOX" in listing
    assert "bounces+…@acme.example" in listing  # the Return-Path it sends with
    path = f"/settings/identities/{row.id}/edit"
    page = logged_in_client.get(path).text
    assert PASSWORD not in page and 'name="bounce_mailbox" value=""' in page
    assert post(logged_in_client, path, form(transport="", verp_domain="bounces.acme.example"),
                page=path).status_code == 303
    db.session.expire_all()
    assert (row.bounce_mailbox_url, row.verp_domain) == (URL, "bounces.acme.example")
    assert "bounces+…@bounces.acme.example" in logged_in_client.get("/settings/identities/").text
    post(logged_in_client, path, form(transport="", clear_bounce_mailbox="1"), page=path)
    db.session.expire_all()
    assert row.bounce_mailbox_url == ""


def test_a_bad_mailbox_url_is_refused_beside_its_field(logged_in_client):
    response = post(logged_in_client, "/settings/identities/",
                    form(bounce_mailbox="imaps://imap.acme.example/INBOX"))
    assert response.status_code == 422
    assert 'id="identity-bounce_mailbox-error"' in response.text
    assert "needs the login and its password" in response.text
    assert db.session.query(Identity).count() == 0


def test_the_system_page_shows_each_mailbox_standing(app, logged_in_client):
    app.config["BOUNCE_MAILBOX_URL"] = URL
    from broadside.core.mailbox_urls import parse
    key = parse(URL).key
    db.session.add(BounceMailbox(key=key, label="imaps://boun…:•••@imap.acme.example:993/INBOX",
                                 last_uid=12, processed_count=12, unrecognised_count=2,
                                 last_read_at=datetime(2026, 11, 3, 9, 0),
                                 last_error="The mailbox at imap.acme.example refused the login: "
                                            "check the user name and password in the bounce mailbox URL."))
    db.session.commit()
    page = logged_in_client.get("/system/").text
    assert PASSWORD not in page
    assert 'id="bounce-mailboxes"' in page
    assert "imaps://boun…:•••@imap.acme.example:993/INBOX" in page
    assert "refused the login" in page
    assert ">12<" in page and ">2<" in page


def test_doctor_logs_in_to_each_bounce_mailbox_and_says_so(app, dovecot):
    from webapp.doctor.report import run_checks

    app.config["BOUNCE_MAILBOX_URL"] = dovecot.url
    dovecot.append([b"From: x@example.org\r\nSubject: hi\r\n\r\nhello\r\n"])
    [check] = [c for c in run_checks(app) if c.name == "bounce mailbox"]
    assert check.ok and "logged in to 127.0.0.1; INBOX holds 1 message(s)" in check.summary
    app.config["BOUNCE_MAILBOX_URL"] = dovecot.url.replace("s3cret", "wrong")
    [check] = [c for c in run_checks(app) if c.name == "bounce mailbox"]
    assert not check.ok and "refused the login" in check.summary
    assert "wrong" not in check.summary and "BOUNCE_MAILBOX_URL" in check.advice


def test_checking_an_identity_also_logs_in_to_its_mailbox(app, dovecot):
    from broadside.delivery.identities import service as identities
    from webapp.doctor.identities import check_identity

    data = identities.parse_input({"name": "Product", "from": "Acme <product@acme.example>",
                                   "transport": "outbox://", "bounce_mailbox": dovecot.url})
    identity = identities.resolve(db.session, app.config, identities.create(db.session, data).id)
    check = check_identity(app, identity, store=False)
    assert check.ok and "bounce mailbox: logged in to 127.0.0.1" in check.summary
    broken = identities.resolve(db.session, app.config, identity.id)
    from dataclasses import replace

    refused = check_identity(app, replace(broken, bounce_mailbox_url=dovecot.url.replace("s3cret", "nope")),
                             store=False)
    assert not refused.ok and "refused the login" in refused.summary
    assert "bounce mailbox URL" in refused.advice
