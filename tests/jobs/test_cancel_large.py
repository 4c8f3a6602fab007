"""Cancelling a large broadcast: the owner's request moves the broadcast and writes
ONE event, the worker skips the pending rows in short committed chunks, nothing is sent after
the cancel, a skip cut short resumes, and the counters end exact. On SQLite and PostgreSQL.

The request's inline limit and the worker's chunk are lowered for these tests (3,000 rows in
500-row chunks stand for a million in 5,000-row chunks), so the path a million-row cancel
takes is the one tested.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select

from broadside.campaigns.broadcasts import cancelling, ledger, service
from broadside.campaigns.broadcasts import snapshot as audience_snapshot
from broadside.campaigns.broadcasts.progress import read_progress
from broadside.core.errors import Conflict
from broadside.core.models import Delivery, Event
from jobs.maintenance import ensure_jobs
from tests.helpers import (
    assert_ledger_consistent,
    assert_nobody_twice,
    broadcast_row,
    counters,
    make_list,
    start_broadcast,
    statuses,
    wait_until,
    worker_runtime,
)
from webapp.extensions import db

ROWS = 3_000
SOME = 1_200
HTMX = {"HX-Request": "true"}


@pytest.fixture
def small_inline(monkeypatch):
    monkeypatch.setattr(cancelling, "INLINE_LIMIT", 1_000)
    monkeypatch.setattr(cancelling, "CHUNK_ROWS", 500)


def queued_broadcast(app, size: int) -> int:
    """A queued broadcast whose recipient list is fully written (all `pending`), no worker."""
    bid = start_broadcast(app, make_list(db.session, size), enqueue=False).id
    while not audience_snapshot.prepare(db.session, bid, seconds=60):
        pass
    assert statuses(bid) == {"pending": size}
    return bid


def delivery_events(broadcast_id: int) -> int:
    db.session.commit()
    return db.session.scalar(select(func.count()).select_from(Event).where(
        Event.broadcast_id == broadcast_id, Event.delivery_id.is_not(None))) or 0


def cancel_event(broadcast_id: int) -> list[str]:
    db.session.commit()
    return list(db.session.scalars(select(Event.detail).where(
        Event.broadcast_id == broadcast_id, Event.kind == "cancelled", Event.delivery_id.is_(None))))


def test_a_large_cancel_answers_at_once_and_the_worker_skips_the_rest(
        app, small_inline, logged_in_client, api_headers, monkeypatch):
    bid = queued_broadcast(app, ROWS)

    began = time.monotonic()
    response = logged_in_client.post(f"/api/broadcasts/{bid}/cancel", headers=api_headers)
    took = time.monotonic() - began
    assert response.status_code == 200, response.text
    assert took < 1.0, took
    # The request moved the broadcast and wrote one event; no row was touched.
    assert broadcast_row(bid).status == "cancelled"
    assert statuses(bid) == {"pending": ROWS}
    assert cancel_event(bid) == [f"cancelled: {ROWS} pending recipients will be skipped"]
    assert delivery_events(bid) == 0

    # The page says what is going on, and keeps polling while it is.
    p = read_progress(db.session, bid)
    assert p.cancelling and p.poll_every
    fragment = logged_in_client.get(f"/broadcasts/{bid}/progress", headers=HTMX)
    assert fragment.status_code == 200
    assert f"Cancelled — skipping the {ROWS:,} recipients not sent yet" in fragment.text
    assert "hx-trigger" in fragment.text

    # A slice job on a cancelled broadcast skips (the job the maintenance queues), in chunks.
    from jobs import runtime, tasks

    rt = worker_runtime(app, transport=None)
    monkeypatch.setattr(runtime, "current", rt)
    chunks: list[int] = []
    real = ledger.skip_pending_chunk

    def counting(*args, **kwargs):
        moved, last = real(*args, **kwargs)
        chunks.append(moved)
        return moved, last

    ledger.skip_pending_chunk = counting  # type: ignore[assignment]
    try:
        outcome = tasks.send_broadcast_slice(bid)
    finally:
        ledger.skip_pending_chunk = real  # type: ignore[assignment]
    assert outcome == "skipped"
    assert len(chunks) > 1 and max(chunks) <= cancelling.CHUNK_ROWS and sum(chunks) == ROWS
    assert statuses(bid) == {"skipped": ROWS}
    assert counters(bid) == {"skipped": ROWS}
    assert delivery_events(bid) == 0  # the rows are the evidence
    db.session.commit()
    reasons = set(db.session.scalars(select(Delivery.reason).where(Delivery.broadcast_id == bid)))
    assert reasons == {"cancelled"}
    # Each recipient's timeline still shows the skip (the row is its evidence, no event).
    from broadside.campaigns.broadcasts.evidence import delivery_timeline

    one = db.session.scalar(select(Delivery.id).where(Delivery.broadcast_id == bid).limit(1))
    moments = [(m.kind, m.words) for m in delivery_timeline(db.session, bid, one).moments]
    assert moments == [("skipped", "Skipped: the broadcast was cancelled")]

    # Done: the usual cancelled summary, and the polling stops (286).
    assert not read_progress(db.session, bid).cancelling
    fragment = logged_in_client.get(f"/broadcasts/{bid}/progress", headers=HTMX)
    assert fragment.status_code == 286
    assert "skipping the" not in fragment.text
    # "Send again" refuses a cancelled broadcast (so nothing returns to pending meanwhile).
    with pytest.raises(Conflict):
        service.retry_deliveries(db.session, bid, which="unknown", jobs=rt.jobs)


def test_a_small_cancel_still_skips_in_the_request(app, small_inline):
    bid = queued_broadcast(app, 500)
    service.cancel_broadcast(db.session, bid)
    assert statuses(bid) == {"skipped": 500}
    assert counters(bid) == {"skipped": 500}
    assert cancel_event(bid) == ["500 pending recipients skipped"]


def test_a_skip_cut_short_resumes_from_the_rows_still_pending(app, small_inline, monkeypatch):
    bid = queued_broadcast(app, SOME)
    service.cancel_broadcast(db.session, bid)
    # Two chunks committed, then the worker dies inside the third (after its counters, before
    # its rows): the transaction is lost whole.
    for _ in range(2):
        ledger.skip_pending_chunk(db.session, bid, after_id=0, limit=400)
        db.session.commit()
    ledger.skip_pending_chunk(db.session, bid, after_id=0, limit=400)
    db.session.rollback()
    assert statuses(bid) == {"skipped": 800, "pending": SOME - 800}
    assert counters(bid) == statuses(bid)

    # The worker's maintenance notices the cancelled broadcast with rows pending: one job.
    from broadside.delivery.queues import SLICE_JOB

    rt = worker_runtime(app, transport=None)
    ensure_jobs(db.session, rt)
    assert rt.jobs.has_marker("slice", bid)
    queued = rt.jobs.queue("broadcasts").get_jobs()
    assert [(j.func_name, list(j.args)) for j in queued] == [(SLICE_JOB, [bid])]
    ensure_jobs(db.session, rt)  # no second job while one is queued
    assert len(rt.jobs.queue("broadcasts").get_jobs()) == 1

    # A continuation that runs twice, or two runners, skip each row once.
    monkeypatch.setattr(cancelling, "CHUNK_ROWS", 300)
    assert not cancelling.skip(db.session, bid, seconds=0)
    assert cancelling.skip(db.session, bid)
    assert cancelling.skip(db.session, bid)
    assert statuses(bid) == {"skipped": SOME}
    assert counters(bid) == {"skipped": SOME}


def test_a_chunk_never_skips_a_broadcast_that_is_not_cancelled(app):
    bid = queued_broadcast(app, 50)
    assert ledger.skip_pending_chunk(db.session, bid, after_id=0, limit=100) == (0, None)
    db.session.commit()
    assert cancelling.skip(db.session, bid)
    assert statuses(bid) == {"pending": 50}
    assert counters(bid) == {"pending": 50}


def test_a_deleted_identitys_cancelled_broadcast_is_skipped_by_the_default_stream(
        app, small_inline, monkeypatch):
    """An identity may be deleted once its broadcast is cancelled; its stream is gone with it,
    so the default stream's maintenance takes up the skip (it sends nothing)."""
    from broadside.core.models import Broadcast
    from broadside.delivery.identities import service as identities
    from jobs import runtime, tasks

    identity = identities.create(db.session, identities.parse_input(
        {"name": "Gone", "from": "Gone <gone@product.example>",
         "transport": "smtp://127.0.0.1:9", "delay_ms": 0}))
    bid = queued_broadcast(app, 3_000)
    db.session.get(Broadcast, bid).identity_id = identity.id
    db.session.commit()
    service.cancel_broadcast(db.session, bid)
    identities.delete(db.session, identity.id)
    assert statuses(bid) == {"pending": 3_000}

    rt = worker_runtime(app, transport=None)  # the default stream
    assert rt.identity_id is None
    ensure_jobs(db.session, rt)
    assert rt.jobs.has_marker("slice", bid)
    monkeypatch.setattr(runtime, "current", rt)
    assert tasks.send_broadcast_slice(bid) == "skipped"
    assert statuses(bid) == {"skipped": 3_000}
    assert counters(bid) == {"skipped": 3_000}


@pytest.mark.slow
def test_nothing_is_sent_after_a_large_cancel_of_a_running_send(
        app, app_config, small_inline, smtp_server, worker_factory, client, api_headers):
    """A real worker sending fast to a real SMTP server on loopback; the owner cancels
    mid-send; the slice stops at its next re-check and the worker skips the rest."""
    app_config["SEND_DELAY_MS"] = 0
    size = 2_500
    broadcast = start_broadcast(app, make_list(db.session, size))
    bid = broadcast.id
    worker = worker_factory()
    smtp_server.wait_for(100, timeout=60)
    response = client.post(f"/api/broadcasts/{bid}/cancel", headers=api_headers)
    assert response.status_code == 200, response.text
    at_cancel = len(smtp_server.messages)
    detail = cancel_event(bid)
    assert len(detail) == 1 and detail[0].endswith("pending recipients will be skipped"), detail

    wait_until(lambda: not {"pending", "sending"} & set(statuses(bid)), timeout=60)
    time.sleep(1.0)
    received = smtp_server.recipients()
    # At most the message on the wire and the one re-checked before the commit.
    assert len(received) <= at_cancel + 2, (len(received), at_cancel)
    assert_nobody_twice(received)
    result = assert_ledger_consistent(bid, received)
    assert result["sent"] == len(received)
    assert result["sent"] + result["skipped"] == size
    assert "Traceback" not in worker.output
    assert "database is locked" not in worker.output


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_chunk_takes_the_broadcast_row_before_any_delivery(app, database_url, monkeypatch):
    """The lock order, held deterministically (as tests/reliability/test_steering.py does for
    every other writer): while another transaction holds the broadcast row, a chunk of the
    worker's skip waits for it BEFORE locking any of its deliveries."""
    import threading

    import psycopg
    from sqlalchemy.orm import Session

    from tests.reliability.test_steering import waiting_on_a_lock

    monkeypatch.setattr(cancelling, "INLINE_LIMIT", 0)
    bid = queued_broadcast(app, 40)
    service.cancel_broadcast(db.session, bid)
    errors: list[BaseException] = []
    engine = db.engine

    def run() -> None:
        try:
            with Session(engine) as session:
                ledger.skip_pending_chunk(session, bid, after_id=0, limit=100)
                session.commit()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    with psycopg.connect(database_url) as holder:
        holder.execute("SELECT id FROM broadcasts WHERE id = %s FOR UPDATE", (bid,))
        writer = threading.Thread(target=run)
        writer.start()
        wait_until(lambda: waiting_on_a_lock(database_url), timeout=10,
                   message="the chunk did not wait for the broadcast row")
        with psycopg.connect(database_url) as probe:
            try:
                probe.execute("SELECT id FROM deliveries WHERE broadcast_id = %s FOR UPDATE NOWAIT",
                              (bid,))
            except psycopg.errors.LockNotAvailable:
                pytest.fail("the chunk locked deliveries before the broadcast row")
        holder.rollback()
    writer.join(10)
    assert not writer.is_alive() and errors == []
    assert statuses(bid) == {"skipped": 40}
    assert counters(bid) == {"skipped": 40}
