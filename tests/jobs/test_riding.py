"""The worker at full speed lets each next envelope ride behind the previous body (RFC 2920
3.1; jobs.riding), against aiosmtpd offering PIPELINING, on
both databases. Each person is still re-checked before their MAIL FROM (invariant 3), a
verdict or a re-check that says stop writes nothing more (the rider is abandoned, its row
released, never attempted), and nobody is ever sent twice."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update

from broadside.core.models import Broadcast, Delivery, Subscriber, Subscription
from tests.helpers import (
    assert_ledger_consistent,
    assert_nobody_twice,
    broadcast_status,
    make_list,
    refuse_the_nth_body,
    start_broadcast,
    statuses,
)
from webapp.extensions import db

SIZE = 30  # a first claim of 20 (FIRST_BATCH), then the rest


@pytest.fixture
def app_config(app_config):
    app_config["SEND_DELAY_MS"] = 0
    return app_config


def rows_by_email(broadcast_id: int) -> dict[str, tuple[str, int]]:
    db.session.expire_all()
    return {email: (status, attempts) for email, status, attempts in db.session.execute(
        select(Subscriber.email, Delivery.status, Delivery.attempts)
        .join(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.broadcast_id == broadcast_id))}


def test_at_full_speed_each_envelope_rides_behind_the_previous_body(app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, SIZE)
    broadcast = start_broadcast(app, weekly)
    assert run_worker_burst() == 0
    received = smtp_server.recipients()
    assert_nobody_twice(received)
    assert_ledger_consistent(broadcast.id, received)
    assert statuses(broadcast.id) == {"sent": SIZE}
    followed = [m.followed for m in smtp_server.messages]
    # Within a claim every body but its last carries the next envelope; a claim's last
    # message stays in flight across the next claim with nothing behind it.
    assert sum(followed) >= SIZE - 4, followed
    assert len({m.peer for m in smtp_server.messages}) == 1


def test_with_a_pace_to_keep_no_envelope_rides(app, app_config, smtp_server, run_worker_burst):
    app.config["SEND_DELAY_MS"] = 5
    weekly = make_list(db.session, 6)
    broadcast = start_broadcast(app, weekly)
    assert run_worker_burst() == 0
    assert statuses(broadcast.id) == {"sent": 6}
    assert not any(m.followed for m in smtp_server.messages)


def test_people_who_left_before_their_turn_are_skipped_between_riders(app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, SIZE)
    broadcast = start_broadcast(app, weekly)
    leaving = ["reader00003@example.com", "reader00004@example.com", "reader00011@example.com"]
    ids = db.session.scalars(select(Subscriber.id).where(Subscriber.email.in_(leaving))).all()
    db.session.execute(update(Subscription).where(Subscription.subscriber_id.in_(ids))
                       .values(status="unsubscribed"))
    db.session.commit()
    assert run_worker_burst() == 0
    received = smtp_server.recipients()
    assert not set(leaving) & set(received)
    assert_nobody_twice(received)
    assert_ledger_consistent(broadcast.id, received)
    assert statuses(broadcast.id) == {"sent": SIZE - 3, "skipped": 3}
    assert sum(m.followed for m in smtp_server.messages) >= SIZE - 3 - 4


def test_a_channel_wide_verdict_sends_nothing_more_and_the_rider_is_released(
    app, smtp_server, run_worker_burst
):
    """The 5th body is refused for the whole channel while the 6th person's envelope rides
    behind it: the broadcast pauses, the 6th is never sent (no body, no dot) and their row is
    back to pending with no attempt spent, as is everyone after them."""
    weekly = make_list(db.session, SIZE)
    broadcast = start_broadcast(app, weekly)
    count = refuse_the_nth_body(smtp_server, 5, "554 5.7.1 sender blocked")
    run_worker_burst()
    assert broadcast_status(broadcast.id) == "paused"
    received = smtp_server.recipients()
    assert received == [f"reader{i:05d}@example.com" for i in range(4)]
    assert count["n"] == 5  # no DATA after the refused one reached the server's handler
    rows = rows_by_email(broadcast.id)
    assert rows["reader00004@example.com"][0] == "pending"  # refused channel-wide: kept
    assert rows["reader00005@example.com"] == ("pending", 0)  # the rider: never attempted
    assert statuses(broadcast.id) == {"sent": 4, "pending": SIZE - 4}
    assert_nobody_twice(received)


def test_a_pause_seen_by_a_re_check_writes_nothing_more(app, smtp_server, run_worker_burst):
    """The owner pauses while the 5th message is with the server: the next re-check sees it,
    the body on the wire gets its verdict, the envelope riding behind it is abandoned, and
    nobody else is sent; every row not sent is back to pending, none attempted twice."""
    weekly = make_list(db.session, SIZE)
    broadcast = start_broadcast(app, weekly)
    engine = db.engine

    def at_data(envelope) -> None:
        if envelope.rcpt_tos == ["reader00004@example.com"]:
            with engine.begin() as connection:
                connection.execute(update(Broadcast).where(Broadcast.id == broadcast.id)
                                   .values(status="paused"))

    smtp_server.script.on_data = at_data
    run_worker_burst()
    assert broadcast_status(broadcast.id) == "paused"
    received = smtp_server.recipients()
    # At most the one whose envelope was already accepted when the pause was committed may
    # follow the 5th (its re-check came before the pause); nobody after that.
    assert received[:5] == [f"reader{i:05d}@example.com" for i in range(5)]
    assert len(received) <= 6, received
    assert_nobody_twice(received)
    rows = rows_by_email(broadcast.id)
    assert {e for e, (status, _) in rows.items() if status == "sent"} == set(received)
    assert all(status == "pending" and attempts == 0
               for e, (status, attempts) in rows.items() if e not in received)
