"""An owner steering a fast send: many pauses and resumes, then a cancel, through the API,
while a real worker process sends as fast as it can (SEND_DELAY_MS=0, batches of claims).

On PostgreSQL only, where row locks are real: a cancel used to lock the broadcast row and
then its deliveries while the worker's claim locked deliveries and then the broadcast's
counters, which could deadlock. Every transaction now takes the broadcast row first (the lock
order in broadside.campaigns.broadcasts.ledger). The test holds that nothing fails, nobody receives two
copies, every state change left its event, and the counters equal the rows.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import ledger, service
from broadside.core.models import Delivery, Event
from jobs.maintenance import mark_orphans_unknown
from tests.helpers import (
    assert_ledger_consistent,
    assert_nobody_twice,
    broadcast_row,
    counters,
    make_list,
    start_broadcast,
    statuses,
    wait_until,
)
from webapp.extensions import db

pytestmark = pytest.mark.slow

RECIPIENTS = 2500
CYCLES = 30


def deadlocks(database_url: str) -> int:
    """PostgreSQL's own count of deadlocks detected in this test database."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        return conn.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()[0]


def event_counts(broadcast_id: int) -> dict[str, int]:
    db.session.expire_all()
    rows = db.session.execute(
        select(Event.kind, func.count())
        .where(Event.broadcast_id == broadcast_id, Event.delivery_id.is_(None))
        .group_by(Event.kind)
    ).all()
    db.session.commit()
    return dict(rows)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_pausing_resuming_and_cancelling_a_fast_send_never_deadlocks_or_doubles(
    app, app_config, database_url, smtp_server, worker_factory, client, api_headers
):
    app_config["SEND_DELAY_MS"] = 0
    weekly = make_list(db.session, RECIPIENTS)
    deadlocks_before = deadlocks(database_url)
    broadcast = start_broadcast(app, weekly)
    worker = worker_factory()
    smtp_server.wait_for(50, timeout=30)

    answers: list[tuple[str, int, str]] = []

    def press(action: str) -> None:
        response = client.post(f"/api/broadcasts/{broadcast.id}/{action}", headers=api_headers)
        answers.append((action, response.status_code, response.get_data(as_text=True)[:200]))

    for cycle in range(CYCLES):
        press("pause")
        if cycle % 2:
            # Let the slice notice and hand its claimed rows back before resuming...
            wait_until(lambda: "sending" not in statuses(broadcast.id), timeout=10)
        # ...or resume at once, racing the slice that is still stopping.
        press("resume")
        smtp_server.wait_for(len(smtp_server.messages) + 10, timeout=20)
    # The cancel lands in the middle of claims and outcomes flushing at full speed.
    smtp_server.wait_for(len(smtp_server.messages) + 30, timeout=20)
    press("cancel")

    assert [(a, code) for a, code, _ in answers if code != 200] == [], answers
    # The slice sees the cancel at its next re-check and skips the rest of its claimed rows.
    wait_until(lambda: not {"pending", "sending"} & set(statuses(broadcast.id)), timeout=20)
    assert broadcast_row(broadcast.id).status == "cancelled"

    received = smtp_server.recipients()
    assert_nobody_twice(received)
    result = assert_ledger_consistent(broadcast.id, received)
    assert result["sent"] == len(received) and len(received) < RECIPIENTS
    assert result["sent"] + result["skipped"] == RECIPIENTS
    # Every owner action moved the broadcast once and left its event.
    events = event_counts(broadcast.id)
    assert events["paused"] == CYCLES
    assert events["resumed"] == CYCLES
    assert events["cancelled"] == 1
    assert events["queued"] == 1

    output = worker.output
    assert "Traceback" not in output
    assert "deadlock" not in output.lower()
    assert deadlocks(database_url) == deadlocks_before


def waiting_on_a_lock(database_url: str) -> bool:
    with psycopg.connect(database_url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()[0] > 0


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_every_writer_of_deliveries_takes_the_broadcast_row_first(app, database_url):
    """The lock order, held deterministically: while another transaction holds the broadcast
    row, each writer waits for it BEFORE locking any of its deliveries (with the old order a
    claim locked its rows first, and a cancel then waited on them while holding the row)."""
    weekly = make_list(db.session, 20)
    broadcast_id = start_broadcast(app, weekly, enqueue=False).id
    rows = [tuple(r) for r in db.session.execute(
        select(Delivery.id, Delivery.subscriber_id)
        .where(Delivery.broadcast_id == broadcast_id).order_by(Delivery.id)).all()]
    ledger.claim(db.session, broadcast_id, rows[:10])
    db.session.commit()
    engine = db.engine
    writers = {
        "claim": lambda s: ledger.claim(s, broadcast_id, rows[10:15]),
        "outcomes": lambda s: ledger.transition(
            s, broadcast_id, [ledger.Change(d, sub) for d, sub in rows[:5]], source="sending", target="sent"
        ),
        "orphan repair": lambda s: mark_orphans_unknown(s, exclude_broadcast=None, older_than=None),
        "send again": lambda s: ledger.transition(
            s, broadcast_id, [ledger.Change(d, sub) for d, sub in rows[5:10]], source="unknown",
            target="pending"
        ),
        "cancel": lambda s: service.cancel_broadcast(s, broadcast_id),
    }
    for name, write in writers.items():
        errors: list[BaseException] = []

        def run(write=write, errors=errors) -> None:
            try:
                with Session(engine) as session:
                    write(session)
                    session.commit()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        with psycopg.connect(database_url) as holder:
            holder.execute("SELECT id FROM broadcasts WHERE id = %s FOR UPDATE", (broadcast_id,))
            writer = threading.Thread(target=run)
            writer.start()
            wait_until(lambda: waiting_on_a_lock(database_url), timeout=10,
                       message=f"{name} did not wait for the broadcast row")
            with psycopg.connect(database_url) as probe:
                try:
                    probe.execute(
                        "SELECT id FROM deliveries WHERE broadcast_id = %s FOR UPDATE NOWAIT",
                        (broadcast_id,),
                    )
                except psycopg.errors.LockNotAvailable:
                    pytest.fail(f"{name} locked deliveries before the broadcast row")
            holder.rollback()
        writer.join(10)
        assert not writer.is_alive() and errors == [], (name, errors)

    db.session.expire_all()
    assert statuses(broadcast_id) == {"sent": 5, "unknown": 5, "skipped": 10}
    assert counters(broadcast_id) == statuses(broadcast_id)
