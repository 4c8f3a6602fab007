"""The broadcast page keeps up while sending, cheaply: the deliveries table re-reads only its
visible page, only when the progress poll saw a delivery move, with the filter's counts from
the counters; and a test send's status line follows the message until it is settled.

No worker here (the rows and counters are set by hand, to tell counters from COUNTs);
tests/browser/test_live_table.py watches the same with a real worker and a real browser."""

from __future__ import annotations

import re
from contextlib import contextmanager

import pytest
from sqlalchemy import event, select, update

from broadside.core.models import Broadcast, Delivery, TransactionalMessage
from broadside.delivery.transactional import queue_transactional
from tests.helpers import csrf_token_from, make_list, start_broadcast
from webapp.extensions import db, get_jobs

HTMX = {"HX-Request": "true"}


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """Nothing here differs between engines."""
    return request.param


@contextmanager
def statements():
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        seen.append(statement.lower())

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


@pytest.fixture
def sending(app) -> Broadcast:
    """A broadcast to 40 people shown mid-send: the counters say 12 sent while every row is
    still pending, so a count read from the rows would say otherwise."""
    broadcast = start_broadcast(app, make_list(db.session, 40), subject="Autumn news", enqueue=False)
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast.id).values(
        status="sending", pending_count=22, sending_count=2, sent_count=12, skipped_count=2,
        failed_count=1, unknown_count=1))
    db.session.commit()
    return broadcast


VERSION = "sending.22.2.12.2.1.1"


def test_the_progress_answer_tells_the_table_only_when_a_delivery_moved(logged_in_client, sending):
    url = f"/broadcasts/{sending.id}/progress"
    page = logged_in_client.get(f"/broadcasts/{sending.id}").text
    assert f'hx-get="{url}?seen={VERSION}"' in page
    assert 'hx-trigger="deliveries-changed from:body"' in page  # the table listens

    same = logged_in_client.get(url, query_string={"seen": VERSION}, headers=HTMX)
    assert same.status_code == 200 and "HX-Trigger" not in same.headers
    moved = logged_in_client.get(url, query_string={"seen": "sending.23.2.11.2.1.1"}, headers=HTMX)
    assert moved.headers["HX-Trigger"] == "deliveries-changed"
    assert f'?seen={VERSION}"' in moved.text  # the next poll asks with what it now shows
    # Pressing Pause (or Cancel, which skips every waiting row) redraws the table too.
    token = csrf_token_from(page)
    paused = logged_in_client.post(f"/broadcasts/{sending.id}/pause",
                                   headers={**HTMX, "X-CSRFToken": token})
    assert paused.headers["HX-Trigger"] == "deliveries-changed"


def test_a_refresh_reads_one_page_of_rows_and_takes_the_counts_from_the_counters(
        logged_in_client, sending):
    first = db.session.scalar(select(Delivery.id).where(Delivery.broadcast_id == sending.id)
                              .order_by(Delivery.id))
    args = {"status": "pending", "q": "reader", "after": first, "per_page": 5}
    url = f"/broadcasts/{sending.id}/deliveries"

    with statements() as seen:
        nothing = logged_in_client.get(url, query_string={**args, "seen": VERSION}, headers=HTMX)
    assert nothing.status_code == 204 and nothing.text == ""
    assert not [s for s in seen if "deliveries" in s], seen  # nothing moved: no row read

    with statements() as seen:
        fresh = logged_in_client.get(url, query_string={**args, "seen": "sending.40.0.0.0.0.0"},
                                     headers=HTMX)
    assert fresh.status_code == 200 and fresh.headers["Cache-Control"] == "no-store"
    reads = [s for s in seen if "deliveries" in s]
    assert len(reads) == 1 and "limit" in reads[0], reads  # the visible page, never the table
    assert not [s for s in seen if "count(" in s], seen
    text = fresh.text
    assert len(re.findall(r'<tr id="delivery-\d+" class="delivery-row">', text)) == 5
    # It asks again for the same page (filter, search, position, length) with what it shows.
    root = re.search(r'<div id="delivery-results"[^>]*>', text).group(0)
    assert (f'hx-get="{url}?after={first}&amp;seen={VERSION}&amp;status=pending&amp;q=reader'
            '&amp;per_page=5"') in root
    assert 'hx-trigger="deliveries-changed from:body"' in root
    assert 'hx-sync="#delivery-filters:drop"' in root  # the owner's own request goes first
    # The filter's counts, out of band, from the counters (12 sent, though no row is sent).
    assert '<option id="status-option-sent" hx-swap-oob="innerHTML">Sent (12)</option>' in text
    assert '<option id="status-option-pending" hx-swap-oob="innerHTML">Waiting (22)</option>' in text
    assert '<option id="status-option-all" hx-swap-oob="innerHTML">All (40)</option>' in text
    # An open timeline stays open across refreshes; the pager keeps the length and the focus.
    assert 'class="timeline-row" hidden hx-preserve="true"' in text
    opened = logged_in_client.get(f"{url}/{first}", headers=HTMX).text  # and follows by itself
    assert re.match(rf'\s*<tr id="timeline-{first}" class="timeline-row" hx-get="{url}/{first}" '
                    'hx-trigger="deliveries-changed from:body"', opened)
    assert re.search(r'id="next-deliveries"', text) and "per_page=5" in text


def test_the_table_stops_asking_once_the_broadcast_is_over(logged_in_client, sending):
    db.session.execute(update(Broadcast).where(Broadcast.id == sending.id).values(
        status="sent", pending_count=0, sending_count=0, sent_count=36))
    db.session.commit()
    final = logged_in_client.get(f"/broadcasts/{sending.id}/deliveries",
                                 query_string={"seen": VERSION}, headers=HTMX)
    assert final.status_code == 200
    root = re.search(r'<div id="delivery-results"[^>]*>', final.text).group(0)
    assert "hx-trigger" not in root and "hx-get" not in root
    assert ">Sent (36)</option>" in final.text
    page = logged_in_client.get(f"/broadcasts/{sending.id}").text
    assert "deliveries-changed" not in page
    first = db.session.scalar(select(Delivery.id).where(Delivery.broadcast_id == sending.id))
    opened = logged_in_client.get(f"/broadcasts/{sending.id}/deliveries/{first}", headers=HTMX)
    assert "Hide timeline" in opened.text and "hx-trigger" not in opened.text


def test_the_deliveries_page_follows_the_send_with_a_line_of_progress(logged_in_client, sending):
    page = logged_in_client.get(f"/broadcasts/{sending.id}/deliveries?status=sent").text
    line = re.search(r'<p id="progress" class="progress-line"[^>]*>', page).group(0)
    assert f'/progress?view=line&amp;seen={VERSION}' in line and 'every 1500ms' in line
    assert "16 of 40 recipients handled (40%)" in page
    answer = logged_in_client.get(f"/broadcasts/{sending.id}/progress",
                                  query_string={"view": "line", "seen": "x"}, headers=HTMX)
    assert answer.text.lstrip().startswith('<p id="progress" class="progress-line"')
    assert answer.headers["HX-Trigger"] == "deliveries-changed"


def set_message(message_id: int, **values) -> None:
    db.session.execute(update(TransactionalMessage).where(TransactionalMessage.id == message_id)
                       .values(**values))
    db.session.commit()


def test_a_test_sends_line_asks_until_it_is_sent_or_failed_then_stops(app, logged_in_client, sending):
    token = csrf_token_from(logged_in_client.get(f"/broadcasts/{sending.id}").text)
    queued = logged_in_client.post(f"/broadcasts/{sending.id}/test", headers=HTMX,
                                   data={"csrf_token": token, "to_email": "Tester@Example.org"})
    message_id = db.session.scalar(select(TransactionalMessage.id)
                                   .where(TransactionalMessage.kind == "test"))
    assert re.match(r'\s*<p id="test-status" class="test-status" role="status"><span ', queued.text)
    assert "Test queued for tester@example.org." in queued.text
    poll = f"/broadcasts/tests/{message_id}"
    assert f'hx-get="{poll}?was=pending-0" hx-trigger="every 2s" hx-target="this"' in queued.text

    assert logged_in_client.get(poll, query_string={"was": "pending-0"}, headers=HTMX).status_code == 204
    set_message(message_id, status="pending", attempts=1, reason="451 4.3.0 Try again later")
    retrying = logged_in_client.get(poll, query_string={"was": "pending-0"}, headers=HTMX)
    assert retrying.status_code == 200 and "hx-trigger" in retrying.text
    assert "not accepted yet (451 4.3.0 Try again later). Trying again shortly." in retrying.text

    set_message(message_id, status="failed", attempts=2, reason="550 5.1.1 No such user")
    failed = logged_in_client.get(poll, query_string={"was": "pending-1"}, headers=HTMX)
    assert failed.status_code == 286 and "hx-trigger" not in failed.text  # settled: it stops
    assert "Test to tester@example.org failed: 550 5.1.1 No such user." in failed.text
    set_message(message_id, status="sent", reason="250 OK queued")
    sent = logged_in_client.get(poll, query_string={"was": "pending-0"}, headers=HTMX)
    assert sent.status_code == 286
    assert "Test sent to tester@example.org: the mail server accepted it (250 OK queued)." in sent.text

    # A sign-up's confirmation is nobody's status line.
    confirmation = queue_transactional(db.session, get_jobs(), kind="confirmation",
                                       to_email="new@example.org", subject="Confirm", html="", text="")
    assert logged_in_client.get(f"/broadcasts/tests/{confirmation.id}", headers=HTMX).status_code == 404
