"""Evidence on the broadcast page: the deliveries table, each recipient's timeline, the
confirmed "send again", and user text shown as text. A real worker sends to a real SMTP
server that refuses, defers and drops on cue."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select, update

from broadside.audience.unsubscribe.service import unsubscribe
from broadside.campaigns.broadcasts import evidence
from broadside.core.models import Broadcast, Delivery, Subscriber
from broadside.mail.unsubscribe_tokens import UnsubscribeClaim
from tests.helpers import csrf_token_from, make_list, start_broadcast
from webapp.extensions import db

HTMX = {"HX-Request": "true"}
HOSTILE_SUBJECT = "<script>alert('subject')</script> News"
HOSTILE_NAME = "<script>alert('name')</script>"


def email(i: int) -> str:
    return f"reader{i:05d}@example.com"


@pytest.fixture
def outcomes(app, smtp_server, run_worker_burst) -> Broadcast:
    """Six recipients, one of each fate: deferred until the budget ran out, refused, unsubscribed
    before their turn, dropped after DATA (unknown), and two delivered."""
    weekly = make_list(db.session, 6)
    db.session.execute(update(Subscriber).where(Subscriber.email == email(4)).values(name=HOSTILE_NAME))
    db.session.commit()
    broadcast = start_broadcast(app, weekly, subject=HOSTILE_SUBJECT, body="Hello {{ name }}")
    leaver = db.session.scalar(select(Subscriber.id).where(Subscriber.email == email(2)))
    unsubscribe(db.session, UnsubscribeClaim(leaver, weekly.id, broadcast.id), "one-click")
    smtp_server.script.rcpt_replies = {email(0): ["451 4.3.0 Try again later"] * 10,
                                       email(1): ["550 5.1.1 No such user"]}
    smtp_server.script.drop_after_data = {email(3)}
    app.config["RETRY_BASE_SECONDS"] = 0.002  # the five deferrals take milliseconds, not seconds
    run_worker_burst()
    smtp_server.script.drop_after_data = set()
    db.session.expire_all()
    done = db.session.get(Broadcast, broadcast.id)
    assert (done.status, done.sent_count, done.failed_count, done.skipped_count,
            done.unknown_count) == ("sent", 2, 2, 1, 1)
    return done


def delivery_of(address: str) -> Delivery:
    return db.session.scalars(select(Delivery).join(Subscriber, Subscriber.id == Delivery.subscriber_id)
                              .where(Subscriber.email == address)).one()


def rows_in(html: str) -> list[str]:
    return re.findall(r'<span class="email">([^<]+)</span>', html)


def test_deliveries_table_filters_by_status_searches_by_email_and_says_what_happened(
        logged_in_client, outcomes):
    page = logged_in_client.get(f"/broadcasts/{outcomes.id}")
    assert sorted(rows_in(page.text)) == [email(i) for i in range(6)]
    assert '<label for="status-filter">Status</label>' in page.text
    assert '<label for="delivery-search">Search by email</label>' in page.text
    assert '<option value="failed" id="status-option-failed">Failed (2)</option>' in page.text

    failed = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries?status=failed", headers=HTMX)
    assert failed.text.lstrip().startswith('<div id="delivery-results"')
    assert sorted(rows_in(failed.text)) == [email(0), email(1)]
    assert "Gave up after 5 attempts; the mail server&#39;s last answer was 451" in failed.text
    # A permanent failure says which address to fix, and links to that subscriber.
    assert (f"Refused by the mail server for this address (550 5.1.1 No such user). Check or fix "
            f"{email(1)}") in failed.text
    refused = delivery_of(email(1))
    assert f'href="/subscribers/{refused.subscriber_id}"' in failed.text

    skipped = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries?status=skipped", headers=HTMX)
    assert rows_in(skipped.text) == [email(2)]
    assert "Not sent: they had unsubscribed." in skipped.text
    unknown = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries?status=unknown", headers=HTMX)
    assert rows_in(unknown.text) == [email(3)]
    assert "may have arrived" in unknown.text
    # Without JavaScript the same URL is a page of its own with the filter kept.
    plain = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries?status=skipped")
    assert "<h1>Deliveries of" in plain.text and rows_in(plain.text) == [email(2)]
    assert '<option value="skipped" id="status-option-skipped" selected>' in plain.text
    assert "HX-Request" in plain.headers["Vary"]

    # Search by email, and keyset pages forwards and back.
    found = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries?q=READER00004", headers=HTMX)
    assert rows_in(found.text) == [email(4)]
    for wildcard in ("%", "_", "\\"):  # LIKE wildcards are searched for, not obeyed
        none = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries",
                                    query_string={"q": wildcard}, headers=HTMX)
        assert 'id="no-deliveries">No delivery matches.' in none.text
    seen, after = [], None
    while True:
        page = evidence.delivery_page(db.session, outcomes.id, after=after, per_page=4)
        seen += [row.email for row in page.rows]
        if not page.has_next:
            break
        after = page.last_id
    assert seen == [email(i) for i in range(6)]
    back = evidence.delivery_page(db.session, outcomes.id, before=page.first_id, per_page=4)
    assert [row.email for row in back.rows] == [email(i) for i in range(4)] and not back.has_prev
    html = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries?status=sent&after=0").text
    assert "Next →" not in html


def test_timelines_show_the_unsubscribe_before_the_skip_and_the_servers_replies(logged_in_client, outcomes):
    leaver = delivery_of(email(2))
    row = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries/{leaver.id}", headers=HTMX)
    assert row.text.lstrip().startswith(f'<tr id="timeline-{leaver.id}" class="timeline-row">')
    words = re.findall(r'<span class="moment-words">([^<]+)</span>', row.text)
    assert words == ["Unsubscribed with the one-click button in their mail app",
                     "Picked up by the worker to send", "Skipped: they had unsubscribed"]
    assert re.search(r'<time datetime="[0-9T:.-]+Z">\d\d \w{3} \d\d:\d\d:\d\d</time>', row.text)
    closed = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries/{leaver.id}?closed=1",
                                  headers=HTMX)
    assert f'<tr id="timeline-{leaver.id}" class="timeline-row" hidden></tr>' in closed.text
    # Without JavaScript the link opens a small page.
    page = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries/{leaver.id}")
    assert f"<h1>{email(2)}</h1>" in page.text and "Skipped: they had unsubscribed" in page.text

    # Sent and refused rows show the server's reply; a deferred one each attempt.
    sent = delivery_of(email(5))
    text = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries/{sent.id}", headers=HTMX).text
    assert re.findall(r'<span class="moment-words">([^<]+)</span>', text) == [
        "Picked up by the worker to send", "Accepted by the mail server"]
    assert '<span class="moment-detail">250 ' in text
    refused = delivery_of(email(1))
    text = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries/{refused.id}", headers=HTMX).text
    assert "Refused by the mail server" in text and "550 5.1.1 No such user" in text
    deferred = delivery_of(email(0))
    text = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries/{deferred.id}", headers=HTMX).text
    assert text.count("Not accepted this time; will try again") == 4
    assert text.count("Picked up by the worker to send") == 5


def test_unknown_and_deferred_rows_are_sent_again_only_after_the_owner_confirms(
        logged_in_client, outcomes):
    page = logged_in_client.get(f"/broadcasts/{outcomes.id}")
    assert "<strong>1 unknown.</strong>" in page.text
    assert f'href="/broadcasts/{outcomes.id}/retry/unknown"' in page.text
    confirm = logged_in_client.get(f"/broadcasts/{outcomes.id}/retry/unknown")
    assert "Send again to 1 recipient?" in confirm.text
    assert "may already be in the inbox" in confirm.text and email(3) in confirm.text
    token = csrf_token_from(confirm.text)
    unconfirmed = logged_in_client.post(f"/broadcasts/{outcomes.id}/retry/unknown",
                                        data={"csrf_token": token})
    assert unconfirmed.status_code == 302 and unconfirmed.headers["Location"].endswith("/retry/unknown")
    assert delivery_of(email(3)).status == "unknown"
    done = logged_in_client.post(f"/broadcasts/{outcomes.id}/retry/unknown",
                                 data={"csrf_token": token, "confirm": "yes"})
    assert done.status_code == 303
    assert "Sending again to 1 recipient." in logged_in_client.get(done.headers["Location"]).text
    db.session.expire_all()
    assert delivery_of(email(3)).status == "pending"
    assert db.session.get(Broadcast, outcomes.id).status == "queued"

    # Rows that ran out of retries likewise; refused addresses are not among them.
    confirm = logged_in_client.get(f"/broadcasts/{outcomes.id}/retry/transient")
    assert "Send again to 1 recipient?" in confirm.text and email(0) in confirm.text
    assert email(1) not in confirm.text
    done = logged_in_client.post(f"/broadcasts/{outcomes.id}/retry/transient",
                                 data={"csrf_token": csrf_token_from(confirm.text), "confirm": "yes"})
    assert done.status_code == 303
    db.session.expire_all()
    assert delivery_of(email(0)).status == "pending"
    assert delivery_of(email(1)).status == "failed"


def test_user_text_is_shown_as_text_on_the_broadcast_page_and_in_the_table(logged_in_client, outcomes):
    for path, headers in ((f"/broadcasts/{outcomes.id}", {}),
                          (f"/broadcasts/{outcomes.id}/deliveries?q=reader00004", HTMX),
                          (f"/broadcasts/{outcomes.id}/deliveries?q=reader00004", {}),
                          (f"/broadcasts/{outcomes.id}/deliveries/{delivery_of(email(4)).id}", {}),
                          ("/", {})):
        text = logged_in_client.get(path, headers=headers).text
        assert "<script>alert(" not in text, path
        if path != "/" and "deliveries/" not in path:
            assert "&lt;script&gt;alert(&#39;name&#39;)&lt;/script&gt;" in text, path
    page = logged_in_client.get(f"/broadcasts/{outcomes.id}").text
    assert "&lt;script&gt;alert(&#39;subject&#39;)&lt;/script&gt; News" in page
    assert "&lt;script&gt;alert(&#39;subject&#39;)&lt;/script&gt; News" in logged_in_client.get("/").text


def test_bad_filters_and_foreign_ids_get_a_message_not_a_stack_trace(logged_in_client, outcomes, app):
    bad = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries?status=bogus")
    assert bad.status_code == 422 and "Filter by one of:" in bad.text
    long = logged_in_client.get(f"/broadcasts/{outcomes.id}/deliveries", query_string={"q": "x" * 400},
                                headers=HTMX)
    assert long.status_code == 200 and "Search for at most 320 characters." in long.text
    other = start_broadcast(app, make_list(db.session, 1, name="Other", domain="other.example"),
                            enqueue=False)
    foreign = delivery_of(email(0)).id
    for path in (f"/broadcasts/{other.id}/deliveries/{foreign}", f"/broadcasts/{outcomes.id}/retry/bogus",
                 f"/broadcasts/{outcomes.id}/deliveries/999999"):
        response = logged_in_client.get(path)
        assert response.status_code == 404 and "Traceback" not in response.text, path


def test_a_search_looks_each_delivery_of_its_window_up_by_person(app, outcomes):
    """On PostgreSQL the window's deliveries come first and each person is looked up by id (a
    LATERAL subquery): joined plainly, the planner read every subscriber to find the few
    matching addresses (200 ms at a million). Both engines find the same rows, in order."""
    from sqlalchemy import event

    seen: list[str] = []
    record = lambda conn, cursor, statement, *args: seen.append(statement)  # noqa: E731
    event.listen(db.engine, "before_cursor_execute", record)
    try:
        page = evidence.delivery_page(db.session, outcomes.id, query="00001@")
        failed = evidence.delivery_page(db.session, outcomes.id, query="example", status="failed")
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    assert [row.email for row in failed.rows] == [email(0), email(1)]
    assert [row.email for row in page.rows] == sorted(
        email(i) for i in range(6) if "00001@" in email(i))
    searches = [s for s in seen if "LIKE" in s.upper() and "deliveries" in s]
    assert len(searches) == 2
    lateral = db.engine.dialect.name == "postgresql"
    assert all(("LATERAL" in s) == lateral for s in searches), searches
