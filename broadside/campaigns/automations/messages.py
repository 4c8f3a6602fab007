"""What automations send to people, read for the owner's pages: the messages due soon per
automation (the dashboard), and one person's automated messages (their subscriber page).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from broadside.core.errors import ValidationError
from broadside.core.models import Automation, AutomationMessage, AutomationRevision, Subscriber
from broadside.core.models.automations import AutomationStatus
from broadside.core.timeutil import utcnow
from broadside.mail.rendering import compiled_revision


@dataclass
class DueSoon:
    automation_id: int
    name: str
    status: str
    count: int


def due_soon(session: Session, hours: int = 24, now: datetime | None = None) -> list[DueSoon]:
    """Messages due in the next `hours` per automation (held ones included, with its state)."""
    now = now or utcnow()
    rows = session.execute(
        select(Automation.id, Automation.name, Automation.status, func.count())
        .join(AutomationMessage, AutomationMessage.automation_id == Automation.id)
        .where(AutomationMessage.status == "pending",
               AutomationMessage.due_at <= now + timedelta(hours=hours),
               Automation.status != AutomationStatus.DELETED.value)
        .group_by(Automation.id, Automation.name, Automation.status)
        .order_by(Automation.id)
    ).all()
    return [DueSoon(*row) for row in rows]


@dataclass
class PersonMessage:
    id: int
    automation_id: int
    automation_name: str
    position: int
    subject: str
    status: str
    due_at: datetime
    sent_at: datetime | None
    reason: str | None
    revision_id: int


def messages_of(session: Session, subscriber_id: int, limit: int = 200) -> list[PersonMessage]:
    """Every automated message of one person, newest first, with the revision's subject."""
    rows = session.execute(
        select(AutomationMessage.id, Automation.id, Automation.name, AutomationMessage.position,
               AutomationRevision.subject, AutomationMessage.status, AutomationMessage.due_at,
               AutomationMessage.sent_at, AutomationMessage.reason, AutomationMessage.revision_id)
        .join(Automation, Automation.id == AutomationMessage.automation_id)
        .join(AutomationRevision, AutomationRevision.id == AutomationMessage.revision_id)
        .where(AutomationMessage.subscriber_id == subscriber_id)
        .order_by(AutomationMessage.due_at.desc(), AutomationMessage.id.desc())
        .limit(limit)
    ).all()
    messages = [PersonMessage(*tuple(row)) for row in rows]
    person = session.get(Subscriber, subscriber_id)
    if person is not None:
        for message in messages:
            message.subject = subject_for(message.subject, person)
    return messages


def subject_for(template: str, person: Subscriber) -> str:
    """The subject as this person got it (their merge fields filled in), or the template when
    their values cannot fill it (the worker failed that message with the reason)."""
    try:
        return compiled_revision(template, "", "").render(
            email=person.email, name=person.name or "", attributes=person.attributes or {},
            unsubscribe_url="#").subject
    except ValidationError:
        return template
