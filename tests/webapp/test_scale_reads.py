"""Reads that must not grow with history, so a page costs the same at ten million deliveries
as at a thousand: /metrics while a broadcast sends (its counters and the sent rows past the
last counted, never a GROUP BY over all its rows), and the System page's recent errors (found
among the newest events only)."""

from __future__ import annotations

from sqlalchemy import event, func, select

from broadside.campaigns.broadcasts.ledger import Change, transition
from broadside.core.models import Delivery, Event
from broadside.delivery import recent_errors
from tests.helpers import make_list, start_broadcast
from tests.webapp.test_metrics import scrape, value
from webapp.extensions import db


def _move(broadcast_id: int, ids: list[int], source: str, target: str, **values) -> None:
    rows = db.session.execute(select(Delivery.id, Delivery.subscriber_id)
                              .where(Delivery.id.in_(ids))).all()
    transition(db.session, broadcast_id, [Change(i, s, dict(values)) for i, s in rows],
               source=source, target=target)
    db.session.commit()


def _ids(broadcast_id: int) -> list[int]:
    return list(db.session.scalars(select(Delivery.id).where(Delivery.broadcast_id == broadcast_id)
                                   .order_by(Delivery.id)))


def test_metrics_of_a_sending_broadcast_follow_it_without_reading_its_sent_rows(app, client):
    broadcast = start_broadcast(app, make_list(db.session, 12), enqueue=False)
    ids = _ids(broadcast.id)
    _move(broadcast.id, ids[:8], "pending", "sending")
    _move(broadcast.id, ids[:4], "sending", "sent", smtp_code=250)
    _move(broadcast.id, ids[4:5], "sending", "failed", smtp_code=550, error_class="recipient",
          reason="5.1.1 no such user")
    _move(broadcast.id, ids[5:6], "sending", "pending", smtp_code=451, error_class="transient",
          reason="try later")
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        seen.append(" ".join(statement.lower().split()))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        samples = scrape(client)
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    assert value(samples, "broadside_deliveries_total", outcome="sent") == 4
    assert value(samples, "broadside_deliveries_total", outcome="failed") == 1
    assert value(samples, "broadside_deliveries_failed_total", error_class="recipient") == 1
    assert value(samples, "broadside_deliveries_in_flight", status="pending") == 5
    assert value(samples, "broadside_deliveries_in_flight", status="retrying") == 1
    assert value(samples, "broadside_deliveries_in_flight", status="sending") == 2
    assert value(samples, "broadside_smtp_replies_total", code="250") == 4
    # No statement groups this broadcast's rows whatever their status.
    grouped = [s for s in seen if "from deliveries" in s and "group by" in s]
    assert grouped and all("status in" in s or "deliveries.id >" in s for s in grouped), grouped

    # More are sent: only the rows past the last counted are added to what was counted.
    _move(broadcast.id, ids[6:8], "sending", "sent", smtp_code=250, attempts_delta=0)
    samples = scrape(client)
    assert value(samples, "broadside_deliveries_total", outcome="sent") == 6
    assert value(samples, "broadside_smtp_replies_total", code="250") == 6
    assert value(samples, "broadside_attempts_per_sent_message_count") == 6


def test_recent_errors_are_looked_for_among_the_newest_events(app, monkeypatch):
    broadcast = start_broadcast(app, make_list(db.session, 6), enqueue=False)
    ids = _ids(broadcast.id)
    _move(broadcast.id, ids[:2], "pending", "sending")
    _move(broadcast.id, ids[:1], "sending", "unknown", reason="connection lost")
    _move(broadcast.id, ids[1:2], "sending", "failed", smtp_code=550, error_class="recipient",
          reason="5.1.1 no such user")
    assert {e.delivery_id for e in recent_errors.last_errors(db.session)} == set(ids[:2])
    # Four retries later (a failed attempt writes its event; a first claim and a sent message
    # are kept by the row), a window that ends just past the first error no longer reaches it.
    _move(broadcast.id, ids[2:6], "pending", "sending")
    _move(broadcast.id, ids[2:6], "sending", "pending", smtp_code=451, error_class="transient",
          reason="try later")
    newest = db.session.scalar(select(func.max(Event.id)))
    first_error = db.session.scalar(select(Event.id).where(Event.delivery_id == ids[0],
                                                           Event.kind == "unknown"))
    monkeypatch.setattr(recent_errors, "ERROR_EVENTS_WINDOW", newest - first_error)
    assert {e.delivery_id for e in recent_errors.last_errors(db.session)} == {ids[1], *ids[2:6]}
