"""The send loop's batch boundary with the wire kept busy: the next batch is
claimed while the previous batch's last message awaits its verdict. Claim before send
(invariant 4) still holds for every message, every verdict is recorded, the ledger adds up,
and a verdict that pauses the broadcast there still stops everything after it."""

from __future__ import annotations

from itertools import groupby

import pytest
from sqlalchemy import select, text

from broadside.core.models import Delivery, Subscriber
from jobs.engine import FIRST_BATCH, MAX_BATCH
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

# Several claims at SEND_DELAY_MS=0 however fast the worker is: the first claims FIRST_BATCH
# rows, each later one at most MAX_BATCH (90 rows came to two claims once the worker sent
# faster than 350 a second).
SIZE = FIRST_BATCH + 2 * MAX_BATCH + 10


@pytest.fixture
def app_config(app_config):
    app_config["SEND_DELAY_MS"] = 0
    return app_config


def test_every_message_is_claimed_and_committed_before_the_server_takes_it(
    app, smtp_server, run_worker_burst
):
    weekly = make_list(db.session, SIZE)
    broadcast = start_broadcast(app, weekly)
    engine = db.engine
    seen_status: dict[str, str] = {}

    def at_data(envelope) -> None:  # on the server's thread, its own connection: committed rows only
        with engine.connect() as connection:
            seen_status[envelope.rcpt_tos[0]] = connection.execute(text(
                "SELECT d.status FROM deliveries d JOIN subscribers s ON s.id = d.subscriber_id "
                "WHERE s.email = :email AND d.broadcast_id = :b"),
                {"email": envelope.rcpt_tos[0], "b": broadcast.id}).scalar_one()

    smtp_server.script.on_data = at_data
    assert run_worker_burst() == 0
    received = smtp_server.recipients()
    assert len(received) == SIZE and all(m.pipelined for m in smtp_server.messages)
    assert_nobody_twice(received)
    assert_ledger_consistent(broadcast.id, received)
    assert statuses(broadcast.id) == {"sent": SIZE}
    assert set(seen_status.values()) == {"sending"}, seen_status  # claimed, committed, in flight

    # The overlap happened: some batch's last message got its verdict (the row's `sent_at`,
    # stamped when the verdict is read) after the next batch was claimed (its rows'
    # `claimed_at`, one moment per claim): it was carried across that claim. The rows keep
    # both moments themselves (the ledger writes no event for a first claim or a send).
    rows = db.session.execute(
        select(Delivery.id, Delivery.claimed_at, Delivery.sent_at)
        .where(Delivery.broadcast_id == broadcast.id).order_by(Delivery.id)).all()
    batches = [sorted(group, key=lambda r: r.id)
               for _, group in groupby(sorted(rows, key=lambda r: (r.claimed_at, r.id)),
                                       key=lambda r: r.claimed_at)]
    carried = [{r.id for r in batch if r.sent_at >= following[0].claimed_at}
               for batch, following in zip(batches, batches[1:], strict=False)]
    carried = [ids for ids in carried if ids]
    assert len(batches) > 2, "a few claims at full speed"
    assert carried, "every batch's verdicts were all read before the next claim"
    assert all(len(ids) == 1 for ids in carried)  # only ever the one message in flight
    last_of = {max(r.id for r in batch) for batch in batches}
    assert all(ids <= last_of for ids in carried)  # and it is its batch's last


def test_a_channel_wide_verdict_on_the_carried_message_pauses_before_anyone_else_is_sent(
    app, smtp_server, run_worker_burst
):
    """The message left in flight across a claim is refused for the whole channel (a 554 at
    the end of DATA): the claimed batch goes back to pending untouched and nobody after it
    is sent."""
    weekly = make_list(db.session, SIZE)
    broadcast = start_broadcast(app, weekly)
    # The 20th message ends the first claim (FIRST_BATCH): it is the one carried across.
    refuse_the_nth_body(smtp_server, 20, "554 5.7.1 sender blocked")
    run_worker_burst()
    db.session.expire_all()
    assert broadcast_status(broadcast.id) == "paused"
    received = smtp_server.recipients()
    assert len(received) == 19  # the first 19; the 20th refused; nobody after it
    rows = dict(db.session.execute(
        select(Subscriber.email, Delivery.status).join(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.broadcast_id == broadcast.id)).all())
    assert rows["reader00019@example.com"] == "pending"  # channel-wide: back to pending, kept
    assert statuses(broadcast.id) == {"sent": 19, "pending": SIZE - 19}
    assert_nobody_twice(received)
