"""Deleting a list finds what names it through indexes (0019), on SQLite and PostgreSQL: its
foreign keys' ON DELETE SET NULL on deliveries.list_id and events.list_id read
`ix_deliveries_list_id` and `ix_events_list_id`, not every delivery and event ever written;
and the delete still clears exactly that list's copies and events, nobody else's."""

from __future__ import annotations

from sqlalchemy import func, select, text, update

from broadside.audience.lists import delete_list
from broadside.core.models import Broadcast, Delivery, Event
from tests.helpers import make_list, start_broadcast
from tests.webapp.test_partial_indexes import _plan
from webapp.extensions import db


def _lists_named(model, list_id: int) -> int:
    return db.session.scalar(select(func.count()).select_from(model).where(model.list_id == list_id)) or 0


def test_deleting_a_list_reads_only_its_rows_and_clears_only_them(app, backend):
    with app.app_context():
        weekly = make_list(db.session, 3, "Weekly")
        offers = make_list(db.session, 4, "Offers", "offers.example")
        weekly_id, offers_id = weekly.id, offers.id
        kept = start_broadcast(app, weekly, enqueue=False).id
        gone = start_broadcast(app, offers, enqueue=False).id
        # Both settled (a busy broadcast stops the delete), each with its list's copies.
        db.session.execute(update(Broadcast).values(status="sent"))
        for list_id in (weekly_id, offers_id):
            db.session.add(Event(kind="subscribed", list_id=list_id, detail="import"))
        db.session.add(Event(kind="sent", broadcast_id=gone, detail=""))  # names no list
        db.session.commit()
        assert (_lists_named(Delivery, weekly_id), _lists_named(Delivery, offers_id)) == (3, 4)

        connection = db.session.connection()
        for table, index in (("deliveries", "ix_deliveries_list_id"), ("events", "ix_events_list_id")):
            # The statement each foreign key's action runs for a deleted list.
            plan = _plan(connection, f"UPDATE {table} SET list_id = NULL WHERE list_id = {offers_id}")
            assert index in plan, plan
        db.session.rollback()
        events = db.session.execute(text("SELECT count(*) FROM events")).scalar()

        delete_list(db.session, offers_id)

        assert _lists_named(Delivery, offers_id) == 0 and _lists_named(Event, offers_id) == 0
        assert db.session.scalar(select(func.count()).select_from(Delivery)
                                 .where(Delivery.broadcast_id == gone, Delivery.list_id.is_(None))) == 4
        assert (_lists_named(Delivery, weekly_id), _lists_named(Event, weekly_id)) == (3, 1)
        assert db.session.get(Broadcast, kept).list_id == weekly_id
        assert db.session.execute(text("SELECT count(*) FROM events")).scalar() == events  # none lost
