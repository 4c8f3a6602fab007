"""The way back in: "Forgot your password?" mails a link through the transactional stream (the
real worker, the real SMTP server), the link works once and for an hour, an unknown address
gets the same answer and nothing, and a new password signs every other session out."""

from __future__ import annotations

import re
import time

import pytest
from sqlalchemy import func, select

from broadside.core import accounts
from broadside.core.logs import RedactFilter
from broadside.core.models import Owner, TransactionalMessage
from broadside.mail import password_reset
from broadside.mail.password_reset import ResetLinks
from tests.helpers import OWNER_EMAIL, OWNER_PASSWORD, csrf_token_from
from webapp.extensions import db

NEW_PASSWORD = "a brand new passphrase"
SAME_ANSWER = "a link is on its way"


def get(client, path: str, **kwargs):
    """One request in an app context of its own, as each request has when served: the test's
    own context would carry `g` (Flask-Login's user, Flask-WTF's token) from one client's
    request into another's."""
    with client.application.app_context():
        return client.get(path, **kwargs)


def post(client, path: str, data: dict, **kwargs):
    with client.application.app_context():
        return client.post(path, data=data, **kwargs)


def fresh_token(client, path: str) -> str:
    """A CSRF token of this client's own session."""
    return csrf_token_from(get(client, path).text)


def ask_for_link(client, email: str, ip: str = "198.51.100.7"):
    token = fresh_token(client, "/password/forgot")
    return post(client, "/password/forgot", {"email": email, "csrf_token": token},
                environ_base={"REMOTE_ADDR": ip})


def set_password(client, path: str, password: str, confirm: str | None = None):
    token = fresh_token(client, "/password/forgot")  # (a refused link's page has no form)
    return post(client, path, {"password": password, "confirm": confirm or password,
                               "csrf_token": token})


def sign_in(client, password: str, email: str = OWNER_EMAIL):
    token = fresh_token(client, "/login")
    return post(client, "/login", {"email": email, "password": password, "csrf_token": token})


def signed_in(client) -> bool:
    response = get(client, "/")
    assert response.status_code in (200, 302)
    return response.status_code == 200


def link_path(app, text: str) -> str:
    base = re.escape(app.config["BASE_URL"].rstrip("/"))
    return re.search(base + r"(/password/reset/\S+)", text).group(1)


def links(app, clock=time.time) -> ResetLinks:
    return ResetLinks(app.config["SECRET_KEY"], app.config["BASE_URL"], clock)


def password_hash() -> str:
    db.session.expire_all()
    return db.session.scalar(select(Owner.password_hash))


def test_the_emailed_link_sets_a_new_password_once(app, client, owner, smtp_server,
                                                   run_worker_burst):
    assert 'href="/password/forgot"' in get(client, "/login").text
    response = ask_for_link(client, "  Owner@Example.COM ")
    assert (response.status_code, response.headers["Location"]) == (302, "/password/forgot/sent")
    sent = get(client, "/password/forgot/sent")
    assert f"If <strong>{OWNER_EMAIL}</strong> belongs to an account, {SAME_ANSWER}" in sent.text

    run_worker_burst()  # the transactional stream, to the real SMTP server
    [received] = smtp_server.messages
    assert received.rcpt_tos == [OWNER_EMAIL]
    email = received.message
    assert email["Subject"] == password_reset.SUBJECT
    assert email["X-Broadside-Kind"] == "password_reset"
    text = email.get_body(("plain",)).get_content()
    assert "works once, for one hour" in text
    path = link_path(app, text)
    assert path in email.get_body(("html",)).get_content()

    page = get(client, path)
    assert page.status_code == 200 and "Choose a new password" in page.text
    assert password_hash() == owner.password_hash  # opening the link changes nothing
    response = set_password(client, path, NEW_PASSWORD)
    assert (response.status_code, response.headers["Location"]) == (302, "/")
    home = get(client, "/")  # this browser is signed in afresh
    assert home.status_code == 200 and "Your new password is set" in home.text

    post(client, "/logout", {"csrf_token": fresh_token(client, "/settings/")})
    assert not signed_in(client)
    assert sign_in(client, OWNER_PASSWORD).status_code == 401
    assert sign_in(client, NEW_PASSWORD).status_code == 302
    assert signed_in(client)

    # The link has done its work: it shows why, changes nothing, and offers a new one.
    changed = password_hash()
    for again in (get(client, path), set_password(client, path, "yet another passphrase")):
        assert again.status_code == 410
        assert "already been used" in again.text and 'href="/password/forgot"' in again.text
    assert password_hash() == changed


def test_an_unknown_address_gets_the_same_answer_and_nothing_is_sent(app, client, owner,
                                                                     smtp_server, run_worker_burst):
    answers = {}
    for address in ("nobody@example.com", OWNER_EMAIL):
        response = ask_for_link(client, address, ip="203.0.113.5")
        assert (response.status_code, response.headers["Location"]) == (302, "/password/forgot/sent")
        page = get(client, "/password/forgot/sent").text
        answers[address] = re.sub(r'name="csrf_token" value="[^"]*"', "", page.replace(address, "ADDRESS"))
        if address != OWNER_EMAIL:
            assert db.session.scalar(select(func.count()).select_from(TransactionalMessage)) == 0
            run_worker_burst()
            assert smtp_server.messages == []
    assert answers["nobody@example.com"] == answers[OWNER_EMAIL]
    run_worker_burst()
    assert smtp_server.recipients() == [OWNER_EMAIL]


def test_before_anyone_is_set_up_the_way_back_in_leads_to_setup(client):
    response = get(client, "/password/forgot")
    assert (response.status_code, response.headers["Location"]) == (302, "/setup")


@pytest.fixture
def slow_answer(app_config):
    app_config["PASSWORD_RESET_ANSWER_SECONDS"] = 0.5


def test_every_answer_takes_the_same_least_time_whoever_is_asked_for(slow_answer, app, client,
                                                                     owner):
    for address in (OWNER_EMAIL, "nobody@example.com"):
        token = fresh_token(client, "/password/forgot")
        began = time.monotonic()
        response = post(client, "/password/forgot", {"email": address, "csrf_token": token})
        assert response.status_code == 302 and time.monotonic() - began >= 0.5, address


def test_an_hour_old_link_has_expired(app, client, owner):
    now = time.time()
    fresh = links(app, clock=lambda: now - 3540).make(owner)  # 59 minutes ago
    assert get(client, f"/password/reset/{fresh}").status_code == 200
    stale = links(app, clock=lambda: now - 3601).make(owner)
    for response in (get(client, f"/password/reset/{stale}"),
                     set_password(client, f"/password/reset/{stale}", NEW_PASSWORD)):
        assert response.status_code == 410
        assert "This link has expired" in response.text and "one hour" in response.text
        assert 'href="/password/forgot"' in response.text
    assert password_hash() == owner.password_hash


def test_a_newer_password_change_ends_older_links(app, client, owner):
    first, second = links(app).make(owner), links(app).make(owner)
    accounts.set_password(db.session, owner.id, NEW_PASSWORD)  # as `owner reset-password` does
    for token in (first, second):
        response = get(client, f"/password/reset/{token}")
        assert response.status_code == 410 and "already been used" in response.text


def test_two_uses_of_one_link_at_once_change_the_password_once(app, owner):
    token = links(app).make(owner)
    seen = links(app).owner_of(db.session, token)  # both requests read the link ...
    epoch, old_hash = seen.session_epoch, seen.password_hash
    accounts.set_password(db.session, owner.id, NEW_PASSWORD, if_epoch=epoch, if_hash=old_hash)
    won = password_hash()
    with pytest.raises(accounts.PasswordChangedSince):  # ... only the first one's write lands
        accounts.set_password(db.session, owner.id, "the other passphrase", if_epoch=epoch,
                              if_hash=old_hash)
    assert password_hash() == won


def test_malformed_and_tampered_links_get_a_clear_page_never_a_500(app, client, owner):
    genuine = links(app).make(owner)
    other_salt = password_reset.URLSafeTimedSerializer(app.config["SECRET_KEY"],
                                                       salt="broadside.signup-confirm.v1")
    ours = password_reset.URLSafeTimedSerializer(app.config["SECRET_KEY"], salt=password_reset.SALT)
    tokens = [
        "x", "this-link-was-cut-in-half", "a.b.c", "." * 40, "a" * 600, "%00%ff", "é" * 20,
        genuine[:-3], ("X" if genuine[0] != "X" else "Y") + genuine[1:], genuine + "x",
        other_salt.dumps([owner.id, 0, "0" * 16]),  # a confirmation link's signature
        ours.dumps({"owner": owner.id}), ours.dumps([True, 0, "x"]), ours.dumps([owner.id, 0]),
        ours.dumps([owner.id, "0", "x"]), ours.dumps([2**40, 0, "x"]), ours.dumps([-1, 0, "x"]),
    ]
    for token in tokens:
        for response in (get(client, f"/password/reset/{token}"),
                         set_password(client, f"/password/reset/{token}", NEW_PASSWORD)):
            assert response.status_code in (400, 410), (token, response.status_code)
            assert "Ask for a new link" in response.text, token
    # Signed by us over an owner that does not exist, or an epoch that is not theirs: used up.
    for token in (ours.dumps([owner.id + 1, 0, "x"]), ours.dumps([owner.id, 7, "x"])):
        assert get(client, f"/password/reset/{token}").status_code == 410
    assert password_hash() == owner.password_hash


def test_the_new_password_is_checked_as_at_setup_and_the_link_survives_a_mistake(app, client, owner):
    path = f"/password/reset/{links(app).make(owner)}"
    for password, confirm, says in (("short", "short", "10 to 200 characters"),
                                    (NEW_PASSWORD, NEW_PASSWORD + "!", "The passwords differ"),
                                    ("x" * 201, "x" * 201, "10 to 200 characters")):
        response = set_password(client, path, password, confirm)
        assert response.status_code == 422 and says in response.text
        assert 'class="error"' in response.text
    assert password_hash() == owner.password_hash
    assert set_password(client, path, NEW_PASSWORD).status_code == 302


def test_a_new_password_signs_every_other_session_out(app, owner):
    laptop, phone, lost = app.test_client(), app.test_client(), app.test_client()
    for browser in (laptop, phone):
        assert sign_in(browser, OWNER_PASSWORD).status_code == 302
        assert signed_in(browser)
    path = f"/password/reset/{links(app).make(owner)}"
    assert set_password(lost, path, NEW_PASSWORD).status_code == 302
    assert signed_in(lost)
    for browser in (laptop, phone):
        response = get(browser, "/lists/")
        assert response.status_code == 302 and response.headers["Location"].startswith("/login")
    assert sign_in(laptop, NEW_PASSWORD).status_code == 302 and signed_in(laptop)


def test_a_session_from_before_epochs_or_server_side_sessions_counts_no_more(app, client, owner):
    """Such a session holds no browser token (tests/webapp/test_sign_out.py): it could never
    be ended by signing out, so it ends now; the owner signs in once more."""
    with client.session_transaction() as stored:
        stored["_user_id"] = str(owner.id)  # what a session held before epochs
        stored["_fresh"] = True
    assert not signed_in(client)
    for forged in ("1:x", "x", "1:2:3", "99999999999:0", "1:99999999999", "١"):
        with client.session_transaction() as stored:
            stored["_user_id"] = forged
        assert not signed_in(client), forged


def test_asking_for_links_is_throttled_alike_for_every_address(app, owner):
    statuses = {}
    for n, address in enumerate((OWNER_EMAIL, "nobody@example.com")):
        browser = app.test_client()
        statuses[address] = [ask_for_link(browser, address, ip=f"198.51.100.{n + 1}").status_code
                             for _ in range(4)]
    assert statuses[OWNER_EMAIL] == statuses["nobody@example.com"] == [302, 302, 302, 429]
    refused = ask_for_link(app.test_client(), "nobody@example.com", ip="198.51.100.2")
    assert refused.status_code == 429 and "Too many reset links" in refused.text
    assert db.session.scalar(select(func.count()).select_from(TransactionalMessage)) == 3


def test_one_address_gets_a_handful_of_links_however_many_networks_ask(app, owner):
    answers = [ask_for_link(app.test_client(), OWNER_EMAIL, ip=f"203.0.113.{n + 1}").status_code
               for n in range(7)]
    assert answers == [302] * 5 + [429] * 2
    assert db.session.scalar(select(func.count()).select_from(TransactionalMessage)) == 5


def test_a_reset_link_never_reaches_the_logs(app, owner):
    token = links(app).make(owner)
    line = f'"GET /password/reset/{token} HTTP/1.1" 200'
    redacted = RedactFilter().redact(line)
    assert token not in redacted and "/password/reset/[redacted]" in redacted


def test_an_invitation_link_never_reaches_the_logs():
    token = "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTAxMjM0NTY3ODk"
    redacted = RedactFilter().redact(f'"GET /invitation/{token} HTTP/1.1" 200')
    assert token not in redacted and "/invitation/[redacted]" in redacted
