"""Settings → Sending identities on SQLite and PostgreSQL, driven as a browser without
JavaScript would (and htmx where it swaps a line): the list with the default first, create,
edit (blank secrets keep the stored ones), delete (refused in words while used), "Check
connection" against a real SMTP server, resume; and the identity's place on the other pages:
the broadcast editor's and the automation editor's "Send from", the send confirmation, the
System page's streams, caps and checks, and `doctor`. A stored secret never reaches a page."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts import drafts
from broadside.core.models import Automation, Broadcast, Event, Identity
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.identities import lifecycle
from broadside.delivery.identities import service as identities
from broadside.delivery.lease import Lease
from broadside.delivery.streams import record_rate
from tests.helpers import csrf_token_from, make_list
from tests.smtp_server import SmtpServer, free_port
from webapp.doctor.report import run_checks
from webapp.extensions import db, get_jobs

TOKEN = "pm-server-token-7f3a9c1e5b"  # a Postmark server token: a secret
PASSWORD = "smtp-password-e8d1b2"
HOOK_SECRET = "whsec-signing-4c2e9a77"
SECRETS = (TOKEN, PASSWORD, HOOK_SECRET)
HX = {"HX-Request": "true"}

pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def make_identity(name="Product updates", transport=f"postmark://{TOKEN}@", **extra) -> int:
    data = identities.parse_input({"name": name, "from": "Acme Product <product@acme.example>",
                                   "transport": transport, "webhook_secret": HOOK_SECRET, **extra})
    return identities.create(db.session, data).id


def post(client, path, data=None, page="/settings/identities/", **kwargs):
    token = csrf_token_from(client.get(page).text)
    return client.post(path, data={"csrf_token": token, **(data or {})}, **kwargs)


def form(**fields) -> dict[str, str]:
    return {"name": "Product updates", "from": "Acme Product <product@acme.example>",
            "transport": f"postmark://{TOKEN}@", "delay_ms": "500", "hourly_limit": "100",
            "postal_address": "", "webhook_secret": HOOK_SECRET, **fields}


def assert_no_secret(html: str) -> None:
    for secret in SECRETS:
        assert secret not in html


# ---------------------------------------------------------------- the list and the form

def test_the_page_is_for_the_owner_only(client, owner):
    response = client.get("/settings/identities/")
    assert response.status_code == 302 and "/login" in response.headers["Location"]
    assert client.post("/settings/identities/1/resume").status_code in (302, 400)


def test_the_default_comes_first_from_the_environment_and_links_where_it_is_set(app, logged_in_client):
    app.config["SMTP_URL"] = f"smtp+starttls://mailer:{PASSWORD}@smtp.example.com:587"
    app.config["SEND_HOURLY_LIMIT"] = 3000
    make_identity()
    page = logged_in_client.get("/settings/identities/").text
    text = text_of(page)
    places = [page.index(f'id="{anchor}"') for anchor in ("identity-default", "identity-1", "new-identity")]
    assert places == sorted(places)
    assert "smtp+starttls://•••:•••@smtp.example.com:587" in text
    assert "3,000 sends an hour" in text and "200 ms after each request" in text
    for variable in ("SMTP_URL", "SEND_DELAY_MS", "SEND_HOURLY_LIMIT", "MAIL_FROM"):
        assert f"<code>{variable}</code>" in page
    assert 'href="/settings/#sender"' in page
    assert 'href="/settings/identities/1/edit"' in page and "/settings/identities/default/edit" not in page
    # The identity: its transport masked, the webhook to configure at the provider.
    assert "postmark://pm-s…@" in text and "Acme Product &lt;product@acme.example&gt;" in page
    assert "http://localhost:5000/webhooks/postmark/1" in text and "webhook secret set" in text
    assert_no_secret(page)
    settings = logged_in_client.get("/settings/").text
    assert 'href="/settings/identities/"' in settings


def test_a_new_identity_is_saved_with_its_secrets_and_never_shows_them(logged_in_client):
    response = post(logged_in_client, "/settings/identities/", form())
    assert response.status_code == 303 and response.headers["Location"].endswith("#identity-1")
    row = db.session.scalars(select(Identity)).one()
    assert (row.transport_url, row.webhook_secret) == (f"postmark://{TOKEN}@", HOOK_SECRET)
    assert (row.delay_ms, row.hourly_limit, row.from_name) == (500, 100, "Acme Product")
    for path in ("/settings/identities/", "/settings/identities/1/edit", "/settings/identities/1/delete",
                 "/system/", "/system/live", "/system/checks", "/settings/"):
        page = logged_in_client.get(path)
        assert page.status_code == 200, path
        assert_no_secret(page.text)


@pytest.mark.parametrize(("fields", "field", "said"), [
    ({"from": "nobody"}, "from", "has no email address"),
    ({"transport": "ftp://files.example.com"}, "transport", "Unknown transport"),
    ({"transport": "ses://KEY:SECRET@mars-1"}, "transport", "is not an AWS region"),
    ({"delay_ms": "fast"}, "delay_ms", "delay_ms must be a whole number"),
    ({"hourly_limit": "-1"}, "hourly_limit", "hourly_limit must be a whole number"),
    ({"name": "default"}, "name", "“default” is the identity the environment defines"),
    ({"name": ""}, "name", "The name is required"),
    ({"webhook_secret": "x" * 201}, "webhook_secret", "webhook secret is too long"),
    ({"account_rate": "ten"}, "account_rate", "account_rate must be a number"),
    ({"account_rate": "0"}, "account_rate", "account_rate must be a number"),
    ({"account_rate": "nan"}, "account_rate", "account_rate must be a number"),
])
def test_a_refusal_is_422_beside_its_field_keeping_all_but_the_secrets(logged_in_client, fields, field, said):
    typed = form(postal_address="1 Main St\nSpringfield", **fields)
    response = post(logged_in_client, "/settings/identities/", typed)
    assert response.status_code == 422
    page = response.text
    assert said in page
    assert f'id="identity-{field}-error"' in page and 'aria-invalid="true"' in page
    assert f'value="{typed["name"]}"' in page and "1 Main St\nSpringfield" in page
    assert_no_secret(page)
    assert 'id="secrets-dropped"' in page  # and the owner is told to type them again
    assert db.session.scalars(select(Identity)).all() == []


def test_a_taken_name_is_409_in_words(logged_in_client):
    make_identity()
    response = post(logged_in_client, "/settings/identities/", form(name="PRODUCT UPDATES"))
    assert response.status_code == 409
    assert "There is already an identity called “PRODUCT UPDATES”" in response.text
    assert 'id="identity-name-error"' in response.text


def test_edit_keeps_blank_secrets_replaces_typed_ones_and_never_shows_them(logged_in_client):
    identity_id = make_identity(transport=f"smtp://mailer:{PASSWORD}@127.0.0.1:2525")
    page = logged_in_client.get(f"/settings/identities/{identity_id}/edit").text
    assert page.count('placeholder="unchanged (leave blank to keep)"') == 2
    assert 'name="transport" value=""' in page and 'name="webhook_secret" value=""' in page
    assert "smtp://•••:•••@127.0.0.1:2525" in page and 'value="Product updates"' in page
    assert_no_secret(page)

    path = f"/settings/identities/{identity_id}/edit"
    response = post(logged_in_client, path, form(name="Product news", transport="", webhook_secret="",
                                                 delay_ms="50"), page=path)
    assert response.status_code == 303
    db.session.expire_all()
    row = db.session.get(Identity, identity_id)
    assert (row.name, row.delay_ms) == ("Product news", 50)
    assert (row.transport_url, row.webhook_secret) == (f"smtp://mailer:{PASSWORD}@127.0.0.1:2525",
                                                       HOOK_SECRET)

    refused = post(logged_in_client, path,
                   form(name="Product news", transport="resend://", webhook_secret=""), page=path)
    assert refused.status_code == 422 and "needs its API key" in refused.text
    assert 'id="identity-transport-error"' in refused.text

    post(logged_in_client, path, form(name="Product news", transport="outbox://", webhook_secret="",
                                      clear_webhook_secret="1"), page=path)
    db.session.expire_all()
    assert (row.transport_url, row.webhook_secret) == ("outbox://", "")
    assert logged_in_client.get("/settings/identities/999/edit").status_code == 404


def test_a_used_identity_cannot_be_deleted_and_the_page_says_why(logged_in_client):
    identity_id = make_identity()
    weekly = make_list(db.session, 1)
    draft = drafts.create_draft(db.session, list_id=weekly.id, subject="Hi", identity_id=identity_id)
    page = text_of(logged_in_client.get("/settings/identities/").text)
    assert "Used by 1 broadcast not yet sent: choose another identity for them first." in page
    confirm = logged_in_client.get(f"/settings/identities/{identity_id}/delete")
    assert "Used by 1 broadcast not yet sent" in confirm.text and "Delete the identity" not in confirm.text
    path = f"/settings/identities/{identity_id}/delete"
    refused = post(logged_in_client, path, page=path)
    assert refused.status_code == 409
    assert "“Product updates” is still used by 1 broadcast not yet sent" in refused.text

    drafts.update_draft(db.session, draft.id, list_id=weekly.id, subject="Hi", preheader="", body="",
                        identity_id=None)
    response = post(logged_in_client, path, page=path)
    assert response.status_code == 302
    assert 'id="identity-1"' not in logged_in_client.get("/settings/identities/").text
    assert db.session.get(Identity, identity_id).status == "deleted"
    assert logged_in_client.get(path).status_code == 404


# ---------------------------------------------------------------- check and resume

def test_check_connection_swaps_in_a_tick_or_a_cross_and_the_system_page_shows_it(app, logged_in_client):
    server = SmtpServer(auth=("mailer", PASSWORD)).start()
    try:
        good = make_identity("Good", transport=f"smtp://mailer:{PASSWORD}@127.0.0.1:{server.port}")
        wrong = make_identity("Wrong", transport=f"smtp://mailer:not-{PASSWORD}@127.0.0.1:{server.port}")
        closed = make_identity("Closed", transport=f"smtp://127.0.0.1:{free_port()}")
        headers = {**HX, "X-CSRFToken": csrf_token_from(logged_in_client.get("/settings/identities/").text)}
        ok = logged_in_client.post(f"/settings/identities/{good}/check", headers=headers)
        assert ok.status_code == 200
        assert ok.text.lstrip().startswith(f'<p class="check-result check-ok" id="check-identity-{good}"')
        assert "✓" in ok.text and "nothing sent" in ok.text
        refused = logged_in_client.post(f"/settings/identities/{wrong}/check", headers=headers)
        assert refused.status_code == 200 and "✗" in refused.text and "auth: 535" in refused.text
        assert "user name and password in its transport URL" in refused.text
        unreachable = logged_in_client.post(f"/settings/identities/{closed}/check", headers=headers)
        assert "connect:" in unreachable.text and "host and port" in unreachable.text
        for answer in (ok, refused, unreachable):
            assert_no_secret(answer.text)
        assert server.messages == []
    finally:
        server.stop()
    checks = text_of(logged_in_client.get("/system/checks").text)
    assert "✓ passed: identity Good: smtp://•••:•••@127.0.0.1" in checks
    assert "✗ failed: identity Wrong:" in checks and "✗ failed: identity Closed:" in checks
    assert "Check connections now" in checks
    # Without JavaScript: a redirect and the answer in words. The default's is the SMTP check.
    response = post(logged_in_client, "/settings/identities/default/check")
    assert response.status_code == 302 and response.headers["Location"].endswith("#identity-default")
    flashed = logged_in_client.get("/settings/identities/").text
    assert "Default: no SMTP_URL: messages are written to" in flashed


def test_a_saved_check_is_forgotten_once_the_transport_url_changes(app, logged_in_client, smtp_server):
    identity_id = make_identity(transport=smtp_server.url)
    headers = {**HX, "X-CSRFToken": csrf_token_from(logged_in_client.get("/settings/identities/").text)}
    logged_in_client.post(f"/settings/identities/{identity_id}/check", headers=headers)
    assert "✓ passed: identity Product updates" in text_of(logged_in_client.get("/system/checks").text)
    identities.update(db.session, identity_id, identities.parse_input(
        {"name": "Product updates", "from": "p@acme.example", "transport": f"smtp://127.0.0.1:{free_port()}"},
        updating=True))
    assert "? not checked: identity Product updates: not checked yet" in text_of(
        logged_in_client.get("/system/checks").text)


def test_doctor_checks_each_identity_transport(app, smtp_server):
    make_identity("Reachable", transport=smtp_server.url)
    make_identity("Closed", transport=f"smtp://127.0.0.1:{free_port()}")
    lines = {check.name: check for check in run_checks(app)}
    assert lines["identity Reachable"].ok and "nothing sent" in lines["identity Reachable"].summary
    closed = lines["identity Closed"]
    assert closed.ok is False and "Sending identities → Closed → Edit" in closed.advice
    names = list(lines)
    assert names.index("outbox") < names.index("identity Closed") < names.index("BASE_URL")


def test_a_paused_identity_says_why_and_resumes_from_its_page_and_the_system_page(logged_in_client):
    identity_id = make_identity()
    lifecycle.pause(db.session, identity_id, "Postmark refused the server token (401).", label="x")
    lifecycle.pause(db.session, None, "The mail server refused the login (535).")
    db.session.commit()
    page = text_of(logged_in_client.get("/settings/identities/").text)
    assert "Paused: Postmark refused the server token (401)." in page
    assert "Paused: The mail server refused the login (535)." in page
    live = text_of(logged_in_client.get("/system/live").text)
    assert "Product updates — paused: Postmark refused the server token (401)." in live
    assert "Default — paused: The mail server refused the login (535)." in live

    response = post(logged_in_client, f"/settings/identities/{identity_id}/resume")
    assert response.status_code == 302 and response.headers["Location"].endswith(f"#identity-{identity_id}")
    response = post(logged_in_client, "/settings/identities/default/resume", {"back": "system"})
    assert response.headers["Location"].endswith("/system/#sender")
    db.session.expire_all()
    assert identities.resolve(db.session, {}, identity_id).status == "active"
    assert "paused" not in text_of(logged_in_client.get("/system/live").text)
    assert {e.kind for e in db.session.scalars(select(Event))} >= {"identity paused", "identity resumed"}


# ---------------------------------------------------------------- where identities are chosen

def test_compose_offers_send_from_only_beside_another_identity_and_saves_it(app, logged_in_client):
    weekly = make_list(db.session, 2)
    draft = drafts.create_draft(db.session, list_id=weekly.id, subject="News", body="Hello")
    path = f"/broadcasts/{draft.id}/edit"
    assert 'name="identity"' not in logged_in_client.get(path).text  # one identity: nothing new
    identity_id = make_identity()
    page = logged_in_client.get(path).text
    select = page[page.index('name="identity"'):page.index("</select>", page.index('name="identity"'))]
    options = re.findall(r'<option (?:selected )?value="([^"]*)">([^<]*)</option>', select)
    assert options == [("", "Default — Broadside &lt;newsletter@localhost&gt;"),
                       (str(identity_id), "Product updates — Acme Product &lt;product@acme.example&gt;")]
    fields = {"audience": f"list:{weekly.id}", "subject": "News", "preheader": "", "body": "Hello",
              "skip_hours": ""}
    saved = post(logged_in_client, path, {**fields, "identity": str(identity_id)}, page=path)
    assert saved.status_code == 303
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).identity_id == identity_id
    # Autosave (htmx) chooses too; the preview's From follows.
    headers = {**HX, "X-CSRFToken": csrf_token_from(page)}
    preview = logged_in_client.post(f"/broadcasts/{draft.id}/autosave", data={**fields, "identity": ""},
                                    headers=headers)
    assert preview.status_code == 200 and "newsletter@localhost" in preview.text
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).identity_id is None
    refused = logged_in_client.post(f"/broadcasts/{draft.id}/autosave",
                                    data={**fields, "identity": "4242"}, headers=headers)
    assert refused.status_code == 422 and "There is no sending identity 4242" in refused.text


def test_the_send_confirmation_names_the_identity_and_its_transport_masked(app, logged_in_client):
    identity_id = make_identity()
    weekly = make_list(db.session, 2)
    draft = drafts.create_draft(db.session, list_id=weekly.id, subject="News", identity_id=identity_id)
    page = logged_in_client.get(f"/broadcasts/{draft.id}/send").text
    assert "Acme Product &lt;product@acme.example&gt;" in page
    assert "“Product updates”: postmark://pm-s…@" in text_of(page)
    assert_no_secret(page)
    lifecycle.pause(db.session, identity_id, "Postmark suspended the account.")
    db.session.commit()
    page = text_of(logged_in_client.get(f"/broadcasts/{draft.id}/send").text)
    assert "The identity “Product updates” is paused: Postmark suspended the account." in page


def test_the_automation_editor_offers_send_from_and_saves_it(app, logged_in_client):
    weekly = make_list(db.session, 0)
    assert 'name="identity_id"' not in logged_in_client.get("/automations/new").text
    identity_id = make_identity()
    page = logged_in_client.get("/automations/new").text
    assert 'name="identity_id"' in page and "Default — Broadside &lt;newsletter@localhost&gt;" in page
    data = {"action": "save", "name": "Welcome", "trigger_type": "joined_list", "list_id": str(weekly.id),
            "priority": "0", "identity_id": str(identity_id), "step-1-delay": "PT0S",
            "step-1-subject": "Hi", "step-1-body": "Hello"}
    response = post(logged_in_client, "/automations/new", data, page="/automations/new")
    assert response.status_code == 303
    automation = db.session.scalars(select(Automation)).one()
    assert automation.identity_id == identity_id
    edit = logged_in_client.get(f"/automations/{automation.id}/edit").text
    assert f'<option value="{identity_id}" selected>' in edit
    assert automations.as_input(db.session, automation)["identity_id"] == identity_id


# ---------------------------------------------------------------- the System page

def test_the_system_page_shows_each_stream_and_resets_each_cap(app, logged_in_client, redis_client,
                                                               namespace):
    identity_id = make_identity(hourly_limit=500, delay_ms=250)
    key = identities.resolve(db.session, app.config, identity_id).key
    Lease(redis_client, namespace, identity="mailbox:4242:abcdef", stream=key).try_acquire()
    record_rate(redis_client, namespace, key, 3.5)
    cap = HourlyCap(redis_client, namespace, 500, stream=key)
    for _ in range(3):
        cap.record()
    get_jobs().enqueue_slice(77, identity_id)
    live = text_of(logged_in_client.get("/system/live").text)
    assert " Default no worker 0 ms · — no cap none Product updates mailbox:4242 250 ms · 3.5/s 3 of 500 " \
           "broadcasts 1 " in live
    page = logged_in_client.get("/system/")
    assert "Reset the count of “Product updates”" in page.text
    response = post(logged_in_client, f"/system/hourly-reset/{identity_id}", page="/system/")
    assert response.status_code == 302 and cap.used() == 0
    event = db.session.scalars(select(Event).where(Event.kind == "hourly_reset")).one()
    assert event.detail == "hourly limit of “Product updates” reset by the owner; 3 of 500 sends forgotten"
    assert post(logged_in_client, "/system/hourly-reset/999", page="/system/").status_code == 404


def test_the_account_rate_is_saved_and_a_shared_account_is_said_on_save(logged_in_client):
    """The form's account limit is the API's account_rate; saving a second identity of the
    same account warns, naming the first; editing shows the account's value."""
    first = post(logged_in_client, "/settings/identities/", form(account_rate="7.5"))
    assert first.status_code == 303
    assert db.session.scalars(select(Identity)).one().account_rate == 7.5
    second = post(logged_in_client, "/settings/identities/", form(name="Receipts", account_rate=""))
    assert second.status_code == 303
    page = logged_in_client.get("/settings/identities/").text
    assert "same provider account as “Product updates”" in page
    assert "at most 7.5 requests a second across its 2 identities" in text_of(page)
    edit = logged_in_client.get("/settings/identities/2/edit").text
    assert 'name="account_rate" value="7.5"' in edit
