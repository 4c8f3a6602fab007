"""Transactional mail's figures (test sends, confirmations) /metrics reads at scrape time."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from broadside.core.models import TransactionalMessage


def transactional_counts(session: Session) -> dict[str, int]:
    """Transactional messages by status (only the statuses some message is in)."""
    return dict(session.execute(
        select(TransactionalMessage.status, func.count()).group_by(TransactionalMessage.status)
    ).all())
