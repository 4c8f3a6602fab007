"""Transactional mail (test sends, sign-up confirmations): a row, then a job.

The row is the source of truth; the job on its identity's `transactional` queue (that of
what it belongs to: a broadcast's, an automation's; the default for confirmations) only
triggers the worker, which claims the row before sending it (the same guards as broadcasts).
Every status change after the row is written goes through `transactional_ledger`.
`queued_test` reads a test send back for its status line on the page, until it is settled.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core.errors import NotFound
from broadside.core.models import TransactionalMessage
from broadside.delivery.queues import Jobs

SETTLED = ("sent", "failed", "unknown")


def queue_transactional(
    session: Session,
    jobs: Jobs,
    *,
    kind: str,
    to_email: str,
    subject: str,
    html: str,
    text: str,
    headers: dict[str, Any] | None = None,
    broadcast_id: int | None = None,
    subscriber_id: int | None = None,
    identity_id: int | None = None,
    template_revision_id: int | None = None,
) -> TransactionalMessage:
    """Store the message (committed) and enqueue it for the worker.

    If Redis is down the row stays `pending`; the worker picks up pending transactional rows
    when it starts, so nothing is lost.
    """
    message = TransactionalMessage(
        kind=kind, to_email=to_email, subject=subject, html=html, text=text, headers=headers,
        broadcast_id=broadcast_id, subscriber_id=subscriber_id, status="pending",
        identity_id=identity_id, template_revision_id=template_revision_id,
    )
    session.add(message)
    session.commit()
    try:
        jobs.enqueue_transactional(message.id, identity_id)
    except RedisError:
        pass
    return message


@dataclass(frozen=True)
class QueuedTest:
    """What became of one test send, as its status line on the page says it. (Not named
    Test...: pytest would take it for a test class.)"""

    id: int
    to_email: str
    status: str
    attempts: int
    reason: str | None
    next_attempt_at: datetime | None

    @property
    def settled(self) -> bool:
        """Nothing more will happen to it (an `unknown` one is never sent again on its own)."""
        return self.status in SETTLED

    @property
    def retrying(self) -> bool:
        return self.status == "pending" and self.attempts > 0

    @property
    def version(self) -> str:
        """Changes whenever the line would say something else: the page asks with the one
        it shows and is told "nothing new" otherwise."""
        return f"{self.status}-{self.attempts}"


def queued_test(session: Session, message_id: int) -> QueuedTest:
    """One test send's state, by its id (one primary-key read). Only test sends: a sign-up's
    confirmation is nobody's status line."""
    row = session.execute(
        select(TransactionalMessage.id, TransactionalMessage.to_email, TransactionalMessage.status,
               TransactionalMessage.attempts, TransactionalMessage.reason,
               TransactionalMessage.next_attempt_at)
        .where(TransactionalMessage.id == message_id, TransactionalMessage.kind == "test")
    ).first()
    if row is None:
        raise NotFound("There is no such test send.")
    return QueuedTest(*row)
