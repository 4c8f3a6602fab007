"""The send-time re-check of a slice (jobs.recheck.StateReader) reads what `recipient_state`
reads, every time: with its cursor kept on PostgreSQL, a change committed by someone else
between two people's turns is seen at the next turn, and a new connection gets a new cursor."""

from __future__ import annotations

from sqlalchemy import select, update

from broadside.core.models import Delivery, Subscription
from jobs.recheck import StateReader, recipient_state
from tests.helpers import make_list, start_broadcast
from webapp.extensions import db


def test_a_slices_reader_sees_each_change_at_the_next_turn(app, backend):
    weekly = make_list(db.session, 3)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    people = db.session.scalars(select(Delivery.subscriber_id).order_by(Delivery.id)).all()
    broadcast_id, list_id = broadcast.id, weekly.id
    read = StateReader()
    session = db.session

    def both(subscriber_id: int):
        kept = read(session, broadcast_id, list_id, subscriber_id)
        assert kept == recipient_state(session, broadcast_id, list_id, subscriber_id)
        return kept

    assert [both(person).subscription for person in people] == ["active"] * 3
    first_cursor = read._cursor
    session.commit()
    # Someone else unsubscribes the second person between two turns (their own transaction).
    with db.engine.begin() as connection:
        connection.execute(update(Subscription).where(Subscription.subscriber_id == people[1])
                           .values(status="unsubscribed"))
    assert both(people[1]).subscription == "unsubscribed"
    assert both(people[2]).subscription == "active"
    if backend == "postgresql":
        assert read._cursor is first_cursor  # the same connection: the same cursor
        session.commit()
        session.close()  # the connection goes back to the pool; it is closed there too
        db.engine.dispose()
        assert both(people[0]).email == "reader00000@example.com"
        assert read._cursor is not first_cursor  # a new connection, a new cursor
    else:
        assert read._cursor is None  # SQLite: a cursor per read, closed after it
    session.rollback()
