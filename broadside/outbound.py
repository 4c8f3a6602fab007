"""Transactional mail (test sends, sign-up confirmations): a row, then a job.

The row is the source of truth; the job on its identity's `transactional` queue (that of
what it belongs to: a broadcast's, an automation's; the default for confirmations) only
triggers the worker, which claims the row before sending it (the same guards as broadcasts).
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from broadside.models import TransactionalMessage
from broadside.queues import Jobs


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
) -> TransactionalMessage:
    """Store the message (committed) and enqueue it for the worker.

    If Redis is down the row stays `pending`; the worker picks up pending transactional rows
    when it starts, so nothing is lost.
    """
    message = TransactionalMessage(
        kind=kind, to_email=to_email, subject=subject, html=html, text=text, headers=headers,
        broadcast_id=broadcast_id, subscriber_id=subscriber_id, status="pending",
        identity_id=identity_id,
    )
    session.add(message)
    session.commit()
    try:
        jobs.enqueue_transactional(message.id, identity_id)
    except RedisError:
        pass
    return message
