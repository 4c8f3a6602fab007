"""A synchronous refusal that names the recipient (550 5.1.1 and its kin) is a hard bounce:
the row fails and the address is suppressed, in the same transaction, so the next broadcast
skips the person; a policy block (5.7.x) or a full mailbox (552) suppresses nobody."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from broadside.core.models import Delivery, Event, Subscriber
from tests.helpers import emails_by_status, make_list, start_broadcast
from webapp.extensions import db

VICTIM = "reader00001@example.com"


def _person() -> Subscriber:
    db.session.expire_all()
    return db.session.scalars(select(Subscriber).where(Subscriber.email == VICTIM)).one()


def test_a_550_511_suppresses_and_the_next_broadcast_skips_them(app, smtp_server,
                                                                 run_worker_burst):
    weekly = make_list(db.session, 3)
    smtp_server.script.rcpt_replies[VICTIM] = ["550 5.1.1 <reader00001@example.com>: no such user"]
    first = start_broadcast(app, weekly)
    run_worker_burst()
    assert emails_by_status(first.id)["failed"] == {VICTIM}
    person = _person()
    assert person.suppression == "bounced"
    assert "550 5.1.1" in person.suppression_detail
    event = db.session.scalars(select(Event).where(Event.kind == "suppressed",
                                                   Event.subscriber_id == person.id)).one()
    assert event.data["source"] == "smtp" and event.data["smtp_code"] == 550
    assert "refused the address when it was sent to" in event.detail
    assert len(smtp_server.rcpt_rejections) == 1

    smtp_server.reset()
    second = start_broadcast(app, weekly)
    run_worker_burst()
    assert VICTIM not in smtp_server.recipients()
    assert smtp_server.rcpt_rejections == []  # not even tried
    assert VICTIM not in emails_by_status(second.id).get("sent", set())


@pytest.mark.parametrize("reply", ["550 5.7.1 Message refused as spam",
                                   "552 5.2.2 Mailbox full"])
def test_a_policy_block_or_a_full_mailbox_suppresses_nobody(app, smtp_server, run_worker_burst,
                                                            reply):
    weekly = make_list(db.session, 3)
    smtp_server.script.rcpt_replies[VICTIM] = [reply]
    broadcast = start_broadcast(app, weekly)
    run_worker_burst()
    assert emails_by_status(broadcast.id)["failed"] == {VICTIM}
    assert _person().suppression is None
    row = db.session.scalars(select(Delivery).where(Delivery.status == "failed")).one()
    assert row.reason.startswith(reply[:3])


def test_a_full_mailbox_counts_a_soft_bounce_and_the_third_suppresses(app, smtp_server,
                                                                       run_worker_burst):
    weekly = make_list(db.session, 3)
    for sent in range(1, 4):
        smtp_server.reset()
        smtp_server.script.rcpt_replies[VICTIM] = ["552 5.2.2 Mailbox full"]
        start_broadcast(app, weekly)
        run_worker_burst()
        person = _person()
        assert person.soft_bounce_count == sent
        assert person.suppression == (None if sent < 3 else "bounced")
    assert "3 soft bounces in a row" in person.suppression_detail
