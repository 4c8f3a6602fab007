"""The audience's figures /metrics reads at scrape time."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from broadside.core.models import Subscriber


def suppressed_counts(session: Session) -> dict[str | None, int]:
    """Subscribers no email goes to, by reason (only the reasons someone has)."""
    return dict(session.execute(
        select(Subscriber.suppression, func.count())
        .where(Subscriber.suppression.is_not(None))
        .group_by(Subscriber.suppression)
    ).all())
