"""The automations' figures /metrics reads at scrape time."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from broadside.core.models import Automation, AutomationMessage


def message_counts(session: Session) -> dict[str, int]:
    """Automation messages by status (only the statuses some message is in)."""
    return dict(session.execute(
        select(AutomationMessage.status, func.count()).group_by(AutomationMessage.status)
    ).all())


def messages_due(session: Session, now: datetime) -> int:
    """The backlog to alert on: messages due by `now` for an enabled automation, still waiting."""
    return session.scalar(
        select(func.count()).select_from(AutomationMessage)
        .join(Automation, Automation.id == AutomationMessage.automation_id)
        .where(AutomationMessage.status == "pending", AutomationMessage.due_at <= now,
               Automation.status == "enabled")) or 0
