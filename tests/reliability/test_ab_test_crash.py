"""An A/B test survives a SIGKILL: each reader's variant was fixed in their row at the
snapshot, the winner is written once, and a worker killed while the winner goes to the rest
leaves nobody twice and nobody with a second variant."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from broadside.campaigns.broadcasts.ab_tests import REST
from broadside.core.models import Broadcast, Delivery, Subscriber
from tests.helpers import assert_ledger_consistent, assert_nobody_twice, broadcast_status, wait_until
from tests.jobs.test_ab_test_send import SUBJECTS, ab_broadcast, click_the_link, send, the_wait_is_over
from webapp.extensions import db

pytestmark = pytest.mark.slow

LIST_SIZE = 150


def test_a_kill_while_the_winner_goes_out_sends_nobody_twice(app, app_config, client, smtp_server,
                                                             worker_factory):
    app_config["SEND_DELAY_MS"] = 5
    broadcast = send(app, ab_broadcast(app, LIST_SIZE, share=30))
    first = worker_factory()

    def waiting() -> bool:
        db.session.expire_all()
        found = db.session.get(Broadcast, broadcast.id).ab_wait_until is not None
        db.session.commit()
        return found

    wait_until(waiting, timeout=60, message="the test's copies did not all go out")
    drawn = dict(db.session.execute(select(Subscriber.email, Delivery.variant)
                                    .join(Delivery, Delivery.subscriber_id == Subscriber.id)).all())
    test_size = sum(1 for variant in drawn.values() if variant != REST)
    assert len(smtp_server.messages) == test_size
    for message in list(smtp_server.messages):
        if drawn[message.rcpt_tos[0]] == 1:
            click_the_link(app, client, message)

    the_wait_is_over(broadcast.id)  # the running worker's tick decides and sends the rest
    smtp_server.wait_for(test_size + 30, timeout=60)
    first.kill()
    assert broadcast_status(broadcast.id) != "sent", "the rest ran out before the kill"
    worker_factory()
    wait_until(lambda: broadcast_status(broadcast.id) == "sent", timeout=90,
               message="the broadcast did not finish after the restart")

    received = smtp_server.recipients()
    assert_nobody_twice(received)
    assert_ledger_consistent(broadcast.id, received)
    db.session.expire_all()
    assert db.session.get(Broadcast, broadcast.id).ab_winner == 1
    for message in smtp_server.messages:
        variant = drawn[message.rcpt_tos[0]]
        assert message.message["Subject"] == SUBJECTS[1 if variant == REST else variant]
