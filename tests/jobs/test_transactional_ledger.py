"""Transactional mail through its ledger (broadside.delivery.transactional_ledger) and the one
send engine, on SQLite and PostgreSQL: a guarded claim claims once, every move names the status
it expects, a crashed `sending` row becomes `unknown` with its event (and is left alone while
a transactional slice of its identity runs), a provider's delivery event settles it through
the same ledger, and a channel-wide refusal retries the message without pausing anything."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from broadside.core.models import Event, Identity, SiteSettings, TransactionalMessage
from broadside.delivery import transactional_ledger as tx
from broadside.delivery.smtp import SmtpTransport
from broadside.feedback.payloads import ProviderEvent
from broadside.feedback.settle import Senders, confirm_delivery
from jobs import transactional
from jobs.maintenance import ORPHANED, mark_orphans_unknown
from jobs.transactional import transactional_slice
from tests.helpers import worker_runtime
from webapp.extensions import db


@pytest.fixture
def runtime(app, smtp_server):
    rt = worker_runtime(app, SmtpTransport(smtp_server.url), identity="test")
    assert rt.lease.try_acquire()
    yield rt
    rt.transport.close()


def queued(to: str = "someone@example.com", status: str = "pending") -> TransactionalMessage:
    message = TransactionalMessage(kind="confirmation", to_email=to, subject="Confirm",
                                   html="<p>Confirm</p>", text="Confirm", status=status)
    db.session.add(message)
    db.session.commit()
    return message


def row(message_id: int) -> TransactionalMessage:
    db.session.expire_all()
    return db.session.get_one(TransactionalMessage, message_id)


def events_of(message_id: int) -> list[tuple[str, str]]:
    return [(e.kind, e.detail) for e in db.session.scalars(select(Event).order_by(Event.id))
            if (e.data or {}).get("transactional_message_id") == message_id]


def test_a_guarded_claim_claims_once_and_a_second_changes_nothing(app):
    message = queued()
    assert tx.claim_due(db.session, None, 10) == [(message.id, None)]
    db.session.commit()
    assert tx.claim_due(db.session, None, 10) == []  # a duplicated job finds nothing to claim
    db.session.commit()
    assert (row(message.id).status, row(message.id).attempts) == ("sending", 1)
    # The worker's verdict moves it once; the same move again expects `sending` and finds none.
    sent = tx.Move(message.id, values={"reason": "ok", "smtp_code": 250})
    assert tx.transition(db.session, [sent], source="sending", target="sent") == [message.id]
    assert tx.transition(db.session, [sent], source="sending", target="sent") == []
    db.session.commit()
    assert (row(message.id).status, row(message.id).reason) == ("sent", "250 ok")
    assert events_of(message.id) == []  # the claim and the send are the row's own evidence


def test_a_move_the_table_does_not_know_is_refused(app):
    message = queued(status="unknown")
    with pytest.raises(ValueError, match="never moves unknown -> pending"):
        tx.transition(db.session, [tx.Move(message.id)], source="unknown", target="pending")
    assert row(message.id).status == "unknown"


def test_a_crashed_sending_row_becomes_unknown_through_the_ledger_with_its_event(app, runtime, smtp_server):
    message = queued()
    tx.claim_due(db.session, None, 1)
    db.session.commit()  # then the worker died
    rt = runtime
    with transactional.sending(None):  # a slice of this identity is running: not an orphan
        mark_orphans_unknown(db.session, exclude_broadcast=None, older_than=None)
        assert row(message.id).status == "sending"
    assert mark_orphans_unknown(db.session, exclude_broadcast=None, older_than=None) == 1
    assert row(message.id).status == "unknown"
    assert row(message.id).reason == ORPHANED["reason"]
    assert events_of(message.id) == [("unknown", "worker stopped mid-send")]
    # Never sent again: nothing of it is due.
    assert transactional_slice(db.session, rt).run().outcome == "finished"
    assert smtp_server.messages == []


def test_a_delivery_event_settles_an_unknown_message_through_the_ledger(app):
    message = queued(to="reader@example.com", status="unknown")
    event = ProviderEvent(type="delivery", email="reader@example.com",
                          message_ids=(f"<broadside.t{message.id}@example.com>",),
                          detail="confirmed by postmark's delivery event", source="postmark")
    default = Senders(default=True)  # the message went through the default identity
    assert confirm_delivery(db.session, event, Senders(ids=frozenset({7}))) == "unmatched"
    assert confirm_delivery(db.session, event, default) == "settled"
    assert row(message.id).status == "sent" and row(message.id).sent_at is not None
    assert events_of(message.id) == [("sent", "delivered: confirmed by postmark's delivery event")]
    assert confirm_delivery(db.session, event, default) == "already sent"  # a redelivery changes nothing


def test_the_engine_sends_a_streams_due_transactional_mail_in_one_slice(app, runtime, smtp_server):
    first, second, third = queued("a@example.com"), queued("b@example.com"), queued("c@example.com")
    rt = runtime
    assert transactional_slice(db.session, rt).run().outcome == "finished"
    assert sorted(smtp_server.recipients()) == ["a@example.com", "b@example.com", "c@example.com"]
    for message in (first, second, third):
        sent = row(message.id)
        assert (sent.status, sent.attempts) == ("sent", 1) and sent.reason.startswith("250")


def test_a_channel_wide_refusal_retries_a_transactional_message_and_pauses_nothing(app, runtime, smtp_server):
    message = queued()
    smtp_server.script.data_replies = ["554 5.7.1 Refused by policy"]  # channel-wide for a broadcast
    rt = runtime
    transactional_slice(db.session, rt).run()
    retried = row(message.id)
    assert (retried.status, retried.attempts) == ("pending", 1)
    assert retried.next_attempt_at is not None and "554" in retried.reason
    assert events_of(message.id)[0][0] == "retry"
    settings = db.session.get(SiteSettings, 1)
    assert settings is None or settings.default_pause_reason is None
    assert db.session.scalars(select(Identity).where(Identity.status != "active")).all() == []
