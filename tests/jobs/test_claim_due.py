"""The worker's claim in one statement (`ledger.claim_due`: the due rows read and claimed by one
guarded UPDATE ... RETURNING) and a flush's group of moves in one statement on PostgreSQL
(`ledger.move_rows`: UPDATE ... FROM unnest), on both databases."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, update

from broadside.campaigns.broadcasts import ledger
from broadside.core.models import Delivery, Event
from broadside.core.timeutil import utcnow
from tests.helpers import counters, make_list, start_broadcast
from webapp.extensions import db


def _ids(broadcast_id: int) -> list[int]:
    return list(db.session.scalars(select(Delivery.id).where(Delivery.broadcast_id == broadcast_id)
                                   .order_by(Delivery.id)))


def _events(kind: str) -> list[int | None]:
    return list(db.session.scalars(select(Event.delivery_id).where(Event.kind == kind)
                                   .order_by(Event.delivery_id)))


def test_claim_due_claims_the_next_due_pending_rows_by_id_and_moves_the_counters_by_them(app):
    broadcast = start_broadcast(app, make_list(db.session, 6), enqueue=False)
    ids = _ids(broadcast.id)
    later = utcnow() + timedelta(hours=1)
    # ids[0] is not due yet, ids[1] is already failed: neither is claimed.
    db.session.execute(update(Delivery).where(Delivery.id == ids[0]).values(next_attempt_at=later))
    db.session.execute(update(Delivery).where(Delivery.id == ids[1]).values(status="failed"))
    db.session.commit()
    before = counters(broadcast.id)

    claimed = ledger.claim_due(db.session, broadcast.id, 3)
    db.session.commit()

    assert [row[0] for row in claimed] == ids[2:5]
    subscribers = dict(db.session.execute(select(Delivery.id, Delivery.subscriber_id)).all())
    assert [row[1] for row in claimed] == [subscribers[i] for i in ids[2:5]]
    assert all(row[2] is None or row[2] == broadcast.list_id for row in claimed)
    rows = {d.id: d for d in db.session.scalars(select(Delivery))}
    assert [rows[i].status for i in ids] == ["pending", "failed", "sending", "sending", "sending",
                                             "pending"]
    assert all(rows[i].attempts == 1 and rows[i].claimed_at is not None for i in ids[2:5])
    assert counters(broadcast.id) == {**before, "pending": before["pending"] - 3, "sending": 3}
    assert _events("claimed") == []  # a first claim is the row's own claimed_at


def test_claim_due_with_fewer_rows_than_asked_moves_the_counters_by_the_rows_it_claimed(app):
    broadcast = start_broadcast(app, make_list(db.session, 2), enqueue=False)
    assert len(ledger.claim_due(db.session, broadcast.id, 50)) == 2
    db.session.commit()
    assert counters(broadcast.id) == {"sending": 2}
    # Nothing left to claim: nothing moves, and the counters are as they were.
    assert ledger.claim_due(db.session, broadcast.id, 50) == []
    db.session.commit()
    assert counters(broadcast.id) == {"sending": 2}


def test_a_reclaim_by_claim_due_records_its_claimed_event(app):
    broadcast = start_broadcast(app, make_list(db.session, 1), enqueue=False)
    ((delivery_id, subscriber_id, list_id, _),) = ledger.claim_due(db.session, broadcast.id, 1)
    db.session.commit()
    back = ledger.Change(delivery_id, subscriber_id, {"reason": "try later"}, detail="will retry")
    ledger.transition(db.session, broadcast.id, [back], source="sending", target="pending")
    db.session.commit()
    assert ledger.claim_due(db.session, broadcast.id, 1) == [(delivery_id, subscriber_id, list_id, None)]
    db.session.commit()
    # The first claim (kept as an event when the row went back) and the second, as it happened.
    assert _events("claimed") == [delivery_id, delivery_id]
    assert db.session.scalar(select(Delivery.attempts).where(Delivery.id == delivery_id)) == 2


def test_a_group_of_moves_is_guarded_row_by_row_and_names_the_rows_that_moved(app):
    broadcast = start_broadcast(app, make_list(db.session, 4), enqueue=False)
    claimed = ledger.claim_due(db.session, broadcast.id, 4)
    db.session.commit()
    ids = [row[0] for row in claimed]
    # Someone else (orphan repair) moved one of them meanwhile: it is left as it is.
    db.session.execute(update(Delivery).where(Delivery.id == ids[1]).values(status="unknown"))
    db.session.commit()
    sent_at = utcnow()
    changes = [ledger.Change(d, s, {"sent_at": sent_at, "smtp_code": 250 + i, "reason": f"ok {i}",
                                    "provider_message_id": None if i % 2 else f"p{i}",
                                    "error_class": None})
               for i, (d, s, _, _) in enumerate(claimed)]
    moved = ledger.move_rows(db.session, Delivery.__table__, changes, source="sending",
                             target="sent", now=sent_at)
    db.session.commit()
    assert sorted(c.delivery_id for c in moved) == [ids[0], ids[2], ids[3]]
    rows = {d.id: d for d in db.session.scalars(select(Delivery))}
    assert rows[ids[1]].status == "unknown" and rows[ids[1]].smtp_code is None
    for i in (0, 2, 3):
        row = rows[ids[i]]
        assert (row.status, row.smtp_code, row.reason) == ("sent", 250 + i, f"ok {i}")
        assert row.provider_message_id == (None if i % 2 else f"p{i}")
        assert row.sent_at == sent_at and row.updated_at == sent_at
    # A release's `attempts - 1` in the same one statement.
    released = [ledger.Change(d, s, {ledger.ATTEMPTS_DELTA: -1}) for d, s, _, _ in claimed]
    assert ledger.move_rows(db.session, Delivery.__table__, released, source="sent",
                            target="pending", now=utcnow())
    db.session.commit()
    assert db.session.scalar(select(Delivery.attempts).where(Delivery.id == ids[0])) == 0
    assert db.session.scalar(select(Delivery.attempts).where(Delivery.id == ids[1])) == 1
