"""No page and no API answer shows a Python exception's text, and each reason says who refused.

One run with failures of every kind, through the real worker, Redis, SMTP server (aiosmtpd,
which offers no SMTPUTF8) and a provider's API (tests/provider_servers.py), on SQLite and
PostgreSQL:
- the mail server refuses one address with 550 and keeps answering another 451 (until the
  retry budget is spent), and the connection is dropped after one message's body;
- Broadside refuses before sending: an address with characters outside ASCII (a broadcast,
  a welcome automation and a test send to it), and a merge field that divides by zero;
- an identity whose server cannot be reached (connection refused: the broadcast and the
  identity pause with the reason);
- Postmark answers one request 500 and refuses one address (its ErrorCode 406);
- an outgoing webhook whose endpoint refuses the connection.
Then every owner page and API answer that shows reasons is fetched and searched for
traceback-like text, and the words are checked to be true: "Refused by the mail server" only
where a server did refuse.
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import insert, select, update

from broadside.audience.subscribers import service as subscribers
from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast, send_test
from broadside.core.models import (
    AutomationMessage,
    Broadcast,
    Delivery,
    Identity,
    MailingList,
    Subscriber,
    Subscription,
    TransactionalMessage,
    WebhookEndpoint,
)
from broadside.delivery.identities import service as identities
from broadside.webhooks import endpoints
from broadside.webhooks import posting as webhook_posting
from tests.helpers import broadcast_row, burst_identity
from tests.provider_servers import PostmarkServer
from tests.smtp_server import free_port
from webapp.extensions import db, get_jobs

# What a Python exception looks like on a page: a class name, a traceback, a codec's or an
# attribute's complaint, an errno.
RAW = [re.compile(r"\b[A-Z][A-Za-z]+(?:Error|Exception)\b"),
       re.compile(r"Traceback|codec can't|object has no attribute|object at 0x"),
       re.compile(r"\berrno\b|\[errno", re.IGNORECASE)]
DOMAIN = "readers.example"
NON_ASCII = f"jürgen@{DOMAIN}"  # goes out: the test server offers SMTPUTF8
BODY = "Hello {{ name }}. Your share: {{ 100 / (attributes.n | default(1)) }}."


def raw_text(text: str) -> list[str]:
    return [match.group(0) for pattern in RAW for match in pattern.finditer(text)]


@pytest.fixture
def app_config(app_config):
    app_config["WEBHOOKS_ALLOW_PRIVATE"] = "1"
    return app_config


@pytest.fixture
def postmark():
    with PostmarkServer() as server:
        yield server


def person(list_id: int, email: str, **attributes) -> int:
    """On the list, without the address check (an owner's older import may hold anything)."""
    subscriber_id = db.session.execute(insert(Subscriber).values(
        email=email, name=email.split("@")[0].capitalize(), attributes=attributes)
        .returning(Subscriber.id)).scalar_one()
    db.session.execute(insert(Subscription).values(subscriber_id=subscriber_id, list_id=list_id,
                                                   status="active"))
    db.session.commit()
    return subscriber_id


def broadcast_to(app, list_id: int, identity_id: int | None = None) -> int:
    draft = create_draft(db.session, list_id=list_id, subject="News for {{ name }}", body=BODY,
                         identity_id=identity_id)
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                          jobs=get_jobs()).id


def a_list(name: str) -> int:
    mailing_list = MailingList(name=name)
    db.session.add(mailing_list)
    db.session.commit()
    return mailing_list.id


def test_no_page_or_api_answer_shows_a_python_exception(
        app, logged_in_client, api_headers, smtp_server, postmark, run_worker_burst, postal_address):
    # ------------------------------------------------------------------ the failures
    readers = a_list("Readers")
    welcome = automations.enable(db.session, automations.create_automation(
        db.session, automations.parse_input({
            "name": "Welcome", "trigger": {"type": "joined_list", "list_id": readers},
            "steps": [{"delay": "PT0S", "subject": "Welcome, {{ name }}", "body": BODY}]}),
        default_from=app.config["MAIL_FROM"]).id)
    smtp_server.script.rcpt_replies = {f"refused@{DOMAIN}": ["550 5.7.1 Refused by policy"] * 20,
                                       f"later@{DOMAIN}": ["451 4.3.0 Try again later"] * 20}
    smtp_server.script.drop_after_data = {f"dropped@{DOMAIN}"}
    people = {}
    for name in ("ok", "refused", "later", "dropped"):
        joined, _ = subscribers.save_subscriber(db.session, email=f"{name}@{DOMAIN}", name=name,
                                                list_ids=[readers], welcome=True)
        people[name] = joined.id
    people["zero"] = person(readers, f"zero@{DOMAIN}", n=0)  # the merge field divides by zero
    people["jürgen"] = person(readers, NON_ASCII)
    # The welcome for the non-ASCII address too (an import or the API could have let it in).
    ok_welcome = db.session.scalars(select(AutomationMessage).where(
        AutomationMessage.subscriber_id == people["ok"])).one()
    db.session.execute(insert(AutomationMessage).values(
        automation_id=welcome.id, step_id=ok_welcome.step_id, position=ok_welcome.position,
        revision_id=ok_welcome.revision_id, subscriber_id=people["jürgen"], list_id=readers,
        status="pending", due_at=ok_welcome.due_at))
    db.session.commit()
    main = broadcast_to(app, readers)
    test_id = send_test(db.session, main, NON_ASCII, default_from=app.config["MAIL_FROM"],
                        jobs=get_jobs())

    unreachable = identities.create(db.session, identities.parse_input({
        "name": "Unreachable", "from": "News <news@example.com>",
        "transport": f"smtp://127.0.0.1:{free_port()}"}))
    few = a_list("Few")
    for i in range(3):
        person(few, f"few{i}@{DOMAIN}")
    stalled = broadcast_to(app, few, unreachable.id)

    provider = identities.create(db.session, identities.parse_input({
        "name": "Postmark", "from": "News <news@example.com>",
        "transport": postmark.transport_url()}))
    postmark.fail(1, status=500, message="Internal error, try again")
    postmark.reject(f"gone@{DOMAIN}")
    shop = a_list("Shop")
    for name in ("buyer", "gone"):
        person(shop, f"{name}@{DOMAIN}")
    through_postmark = broadcast_to(app, shop, provider.id)

    hook = endpoints.create(db.session, f"http://127.0.0.1:{free_port()}/hook", ["delivery.failed"],
                            allow_private=True)
    db.session.commit()

    run_worker_burst()
    for identity in (unreachable, provider):  # each identity's stream, until it has nothing due
        burst_identity(app, identity.name)
    webhook_posting.deliver_due(db.session, webhook_posting.Settings(allow_private=True))
    db.session.commit()
    db.session.expire_all()

    # Each kind happened.
    rows = {email: (status, reason) for email, status, reason in db.session.execute(
        select(Subscriber.email, Delivery.status, Delivery.reason)
        .join(Subscriber, Subscriber.id == Delivery.subscriber_id))}
    assert rows[f"refused@{DOMAIN}"] == ("failed", "550 5.7.1 Refused by policy")
    assert rows[f"later@{DOMAIN}"][0] == "failed"
    assert rows[f"dropped@{DOMAIN}"][0] == "unknown"
    assert rows[NON_ASCII][0] == "sent" and rows[f"zero@{DOMAIN}"][0] == "failed"
    assert rows[f"gone@{DOMAIN}"][0] == "failed" and rows[f"buyer@{DOMAIN}"][0] == "sent"
    assert broadcast_row(stalled).status == "paused"
    assert db.session.get(Identity, unreachable.id).status == "paused"
    assert db.session.get(TransactionalMessage, test_id).status == "sent"  # SMTPUTF8 offered
    assert db.session.scalar(select(WebhookEndpoint.id)) == hook.id

    # ------------------------------------------------------------------ every page and answer
    delivery_ids = db.session.execute(select(Delivery.broadcast_id, Delivery.id)).all()
    pages = ["/", "/broadcasts/", "/automations/", "/system/", "/system/live",
             "/settings/identities/", f"/settings/identities/{unreachable.id}/edit",
             "/settings/webhooks", f"/settings/webhooks/{hook.id}", f"/broadcasts/tests/{test_id}",
             f"/automations/{welcome.id}/edit"]
    for broadcast_id in (main, stalled, through_postmark):
        pages += [f"/broadcasts/{broadcast_id}", f"/broadcasts/{broadcast_id}/progress",
                  f"/broadcasts/{broadcast_id}/retry/transient",
                  f"/broadcasts/{broadcast_id}/retry/unknown"]
        pages += [f"/broadcasts/{broadcast_id}/deliveries?status={status}"
                  for status in ("failed", "unknown", "pending", "sent")]
    pages += [f"/broadcasts/{b}/deliveries/{d}" for b, d in delivery_ids]
    pages += [f"/subscribers/{subscriber_id}"
              for subscriber_id in db.session.scalars(select(Subscriber.id))]
    answers = ["/api/broadcasts", "/api/automations", f"/api/automations/{welcome.id}",
               "/api/identities", f"/api/identities/{unreachable.id}", "/api/webhooks",
               "/api/subscribers"]
    for broadcast_id in (main, stalled, through_postmark):
        answers += [f"/api/broadcasts/{broadcast_id}", f"/api/broadcasts/{broadcast_id}/deliveries"]
    answers += [f"/api/subscribers/{subscriber_id}"
                for subscriber_id in db.session.scalars(select(Subscriber.id))]

    found: dict[str, list[str]] = {}
    reasons_seen = 0
    for url in pages:
        page = logged_in_client.get(url)
        assert page.status_code == 200, url
        reasons_seen += page.text.count("Broadside did not send it")
        if raw := raw_text(page.text):
            found[url] = raw
    for url in answers:
        answer = logged_in_client.get(url, headers=api_headers)
        assert answer.status_code == 200, url
        if raw := raw_text(answer.text):
            found[url] = raw
    # A body that is not JSON gets an answer in words too.
    bad = logged_in_client.post("/api/subscribers", data=b"{not json", headers={
        **api_headers, "Content-Type": "application/json"})
    assert bad.status_code in (400, 422)
    if raw := raw_text(bad.text):
        found["POST /api/subscribers"] = raw
    assert found == {}
    assert reasons_seen > 0  # the reasons were on the pages searched

    # ------------------------------------------------------------------ the words are true
    assert rows[f"zero@{DOMAIN}"][1].startswith("Broadside did not send it:")
    assert "divides by zero" in rows[f"zero@{DOMAIN}"][1]
    assert rows[f"gone@{DOMAIN}"][1].startswith("Postmark answered “You tried to send")
    assert "(HTTP 422, code 406)" in rows[f"gone@{DOMAIN}"][1]
    assert rows[f"later@{DOMAIN}"][1] == ("Gave up after 5 attempts; the mail server's last "
                                          "answer was 451 4.3.0 Try again later.")
    stalled_reason = broadcast_row(stalled).pause_reason
    assert "could not be reached 5 times in a row" in stalled_reason
    assert "the connection was refused" in stalled_reason

    def timeline(broadcast_id: int, email: str) -> str:
        delivery_id = db.session.scalar(select(Delivery.id).join(
            Subscriber, Subscriber.id == Delivery.subscriber_id).where(Subscriber.email == email))
        page = logged_in_client.get(f"/broadcasts/{broadcast_id}/deliveries/{delivery_id}")
        assert page.status_code == 200
        return page.text

    assert "Refused by the mail server" in timeline(main, f"refused@{DOMAIN}")
    for email in (f"zero@{DOMAIN}",):
        page = timeline(main, email)
        assert "Refused by the mail server" not in page
        assert "refused by Broadside before sending" in page
    gone = timeline(through_postmark, f"gone@{DOMAIN}")
    assert "Refused by Postmark" in gone and "Refused by the mail server" not in gone
    buyer = timeline(through_postmark, f"buyer@{DOMAIN}")
    assert "Accepted by the provider" in buyer and "mail server" not in buyer


@pytest.mark.parametrize("body, words", [
    (b'{"name": "Ann",', "line 1, column 16"),  # cut short: where it stops, not Python's words
    (b'{"name": "Ann"} trailing', "line 1, column 17"),
    (b'{"name": "\xff"}', "not UTF-8"),
    (b'{"score": NaN}', "NaN is not a JSON number"),  # our own words are kept
])
def test_a_malformed_api_body_is_refused_in_our_words(client, api_headers, body, words):
    response = client.post("/api/lists", data=body,
                           headers={**api_headers, "Content-Type": "application/json"})
    assert response.status_code == 422 and words in response.json["error"], response.json
    assert raw_text(response.text) == [] and "Expecting" not in response.text
    assert "char " not in response.text  # json's "(char 15)"


def test_a_webhook_host_that_does_not_resolve_is_said_without_python_text(
        logged_in_client, api_headers):
    response = logged_in_client.post("/api/webhooks", headers=api_headers, json={
        "url": "https://no-such-host.invalid/hook", "events": ["delivery.sent"]})
    assert response.status_code == 422 and "does not resolve" in response.json["error"]
    assert raw_text(response.text) == [] and "Name or service" not in response.text


def test_reasons_an_older_version_recorded_with_python_text_are_not_shown(
        app, logged_in_client, api_headers):
    """Rows written before the worker put every reason in words keep them; every page and
    answer that shows a stored reason shows where the details are instead."""
    raw = "UnicodeEncodeError: 'ascii' codec can't encode character '\\xfc'"
    readers = a_list("Readers")
    someone = person(readers, f"ann@{DOMAIN}")
    broadcast_id = broadcast_to(app, readers)
    db.session.execute(update(Delivery).values(status="failed", reason=raw))
    db.session.execute(update(Broadcast).values(status="paused", pause_reason=f"[Errno 111] {raw}"))
    paused = identities.create(db.session, identities.parse_input({
        "name": "Old", "from": "News <news@example.com>", "transport": "smtp://127.0.0.1:25"}))
    db.session.execute(update(Identity).where(Identity.id == paused.id)
                       .values(status="paused", pause_reason=raw))
    db.session.commit()
    delivery_id = db.session.scalar(select(Delivery.id))
    for url in ("/system/", "/system/live", f"/subscribers/{someone}", "/settings/identities/",
                f"/settings/identities/{paused.id}/edit", f"/broadcasts/{broadcast_id}",
                f"/broadcasts/{broadcast_id}/progress",
                f"/broadcasts/{broadcast_id}/deliveries/{delivery_id}"):
        page = logged_in_client.get(url)
        assert page.status_code == 200 and raw_text(page.text) == [], (url, raw_text(page.text))
    for url in (f"/api/broadcasts/{broadcast_id}", f"/api/broadcasts/{broadcast_id}/deliveries",
                "/api/identities", f"/api/subscribers/{someone}"):
        answer = logged_in_client.get(url, headers=api_headers)
        assert answer.status_code == 200 and raw_text(answer.text) == [], (url, answer.text)
    shown = logged_in_client.get(f"/api/broadcasts/{broadcast_id}/deliveries", headers=api_headers)
    assert [row["reason"] for row in shown.json] == ["the details are in the worker's log"]
