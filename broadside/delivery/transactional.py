"""Transactional mail (test sends, sign-up confirmations, the API's template messages): a
row, then a job.

The row is the source of truth; the job on its identity's `transactional` queue (that of
what it belongs to: a broadcast's, an automation's; the default for confirmations) only
triggers the worker, which claims the row before sending it (the same guards as broadcasts).
Every status change after the row is written goes through `transactional_ledger`.
`queued_test` reads a test send back for its status line on the page, until it is settled;
`messages_to` a person's, for their page (with what is left of those whose content was
removed after the retention: broadside.delivery.content_retention).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from broadside.core.errors import NotFound
from broadside.core.models import TransactionalMessage
from broadside.delivery.content_retention import removal_words
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
    idempotency_key: str | None = None,
    request_hash: str | None = None,
    attachment_ids: list[int] | None = None,
) -> TransactionalMessage:
    """Store the message (committed) and enqueue it for the worker.

    An API client's `idempotency_key` and its `request_hash` are columns of the row's own
    INSERT, committed with it, so no crash can keep one without the other; a key already
    taken raises IntegrityError at that commit (UNIQUE), which the caller rolls back and
    answers (broadside.campaigns.transactional.sending).

    If Redis is down the row stays `pending`; the worker picks up pending transactional rows
    when it starts, so nothing is lost.
    """
    message = TransactionalMessage(
        kind=kind, to_email=to_email, subject=subject, html=html, text=text, headers=headers,
        broadcast_id=broadcast_id, subscriber_id=subscriber_id, status="pending",
        identity_id=identity_id, template_revision_id=template_revision_id,
        idempotency_key=idempotency_key, request_hash=request_hash,
        attachment_ids=list(attachment_ids) if attachment_ids else None,
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


@dataclass(frozen=True)
class SentMessage:
    """One transactional or test message to a person, as their page shows it."""

    id: int
    kind: str
    subject: str
    status: str
    reason: str | None
    created_at: datetime
    sent_at: datetime | None
    content_removed_at: datetime | None
    content_sha256: str | None
    template_revision_id: int | None

    @property
    def removed(self) -> str | None:
        """The words "content removed after N days" (the real age it went at); None while
        kept."""
        return removal_words(self.kind, self.created_at, self.content_removed_at)


def messages_to(session: Session, subscriber_id: int, email: str,
                limit: int = 20) -> list[SentMessage]:
    """The newest `limit` transactional and test messages addressed to this person (by id or
    by address, as the erase and the export select them), newest first."""
    rows = session.execute(
        select(TransactionalMessage.id, TransactionalMessage.kind, TransactionalMessage.subject,
               TransactionalMessage.status, TransactionalMessage.reason,
               TransactionalMessage.created_at, TransactionalMessage.sent_at,
               TransactionalMessage.content_removed_at, TransactionalMessage.content_sha256,
               TransactionalMessage.template_revision_id)
        .where(or_(TransactionalMessage.subscriber_id == subscriber_id,
                   TransactionalMessage.to_email == email))
        .order_by(TransactionalMessage.id.desc()).limit(limit)).all()
    return [SentMessage(**row._mapping) for row in rows]
