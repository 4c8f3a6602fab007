"""A worker SIGKILLed mid-send never mints a row a second code: the rows it had claimed keep
the codes their claim committed (unknown, never resent), the next worker mints only for the
rows it claims, and every code a person received is the one in the table for their row."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.campaigns.codes.minting import ALPHABET
from broadside.core.models import Code, Delivery, Subscriber
from tests.helpers import (
    assert_ledger_consistent,
    assert_nobody_twice,
    broadcast_status,
    make_list,
    wait_until,
)
from webapp.extensions import db, get_jobs

pytestmark = pytest.mark.slow

LIST_SIZE = 150
CODE = re.compile(rf"SAVE-[{ALPHABET}]{{8}}")


def test_a_kill_mid_send_leaves_one_code_per_claimed_row(app, app_config, smtp_server,
                                                          worker_factory):
    app_config["SEND_DELAY_MS"] = 5
    weekly = make_list(db.session, LIST_SIZE)
    draft = create_draft(db.session, list_id=weekly.id, subject="Your code {{ code }}",
                         body="Use {{ code }} at the till.", codes_prefix="SAVE")
    broadcast = send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                               jobs=get_jobs())
    first = worker_factory()
    smtp_server.wait_for(40, timeout=40)
    first.kill()
    assert broadcast_status(broadcast.id) != "sent", "the list ran out before the kill"
    worker_factory()
    wait_until(lambda: broadcast_status(broadcast.id) == "sent", timeout=60,
               message="the broadcast did not finish after the restart")

    received = smtp_server.recipients()
    assert_nobody_twice(received)
    result = assert_ledger_consistent(broadcast.id, received)
    db.session.expire_all()
    minted = dict(db.session.execute(select(Code.source_id, Code.code)).all())
    rows = db.session.execute(select(Delivery.id, Delivery.status, Delivery.attempts,
                                     Subscriber.email)
                              .join(Subscriber, Subscriber.id == Delivery.subscriber_id)).all()
    # Every row was claimed once (none was claimed again: unknown rows are never resent) and
    # carries exactly the one code its claim minted, the rows the dead worker held included.
    assert {row.attempts for row in rows} == {1}
    assert set(minted) == {row.id for row in rows} and len(set(minted.values())) == LIST_SIZE
    assert result.get("unknown", 0) >= 0 and set(result) <= {"sent", "unknown"}
    code_of = {row.email: minted[row.id] for row in rows}
    for message in smtp_server.messages:
        [email] = message.rcpt_tos
        assert set(CODE.findall(message.message["Subject"])) == {code_of[email]}
