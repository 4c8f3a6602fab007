"""One automation's failed, skipped or unknown messages, for the page its counts link to: who,
which step, when, and why in the owner's words; newest first, one keyset page at a time.

A page is one query with a LIMIT over the messages of the automation's steps in that state
(the (step_id, status) index), below or above a message id (never OFFSET), so it costs the
same with a million messages sent; the counts beside the links come from the automations
page's own per-step counts, never from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from broadside.campaigns.automations.service import get_automation
from broadside.campaigns.broadcasts.delivery_words import DeliveryRow
from broadside.core.errors import ValidationError
from broadside.core.models import AutomationMessage, AutomationRevision, AutomationStep, Subscriber

PER_PAGE = 50
LISTED = ("failed", "skipped", "unknown")


@dataclass(frozen=True)
class MessageRow:
    id: int
    subscriber_id: int | None
    email: str | None
    name: str | None
    step: int  # the step's place when the person entered
    subject: str  # the revision's, as written (merge fields unfilled)
    status: str
    reason: str | None
    error_class: str | None
    smtp_code: int | None
    attempts: int
    at: datetime  # when it settled (when it was due, for a row from before that was kept)

    @property
    def who(self) -> str:
        return self.as_delivery.who

    @property
    def as_delivery(self) -> DeliveryRow:
        """The same facts as a broadcast's delivery row, whose words they share."""
        return DeliveryRow(self.id, self.subscriber_id, self.email, self.name, self.status,
                           self.reason, self.smtp_code, self.error_class, self.attempts, None,
                           None, self.at)

    @property
    def explanation(self) -> str:
        """Why it was not sent, in the words a broadcast's delivery uses (the worker's reason
        inside); an automation message has no "send again", so a transient failure that ran
        out of attempts says only that."""
        if self.status == "failed" and self.error_class == "transient":
            return f"Gave up after {self.attempts} attempts ({self.reason or 'no reason given'})."
        return self.as_delivery.explanation


@dataclass(frozen=True)
class MessagePage:
    rows: list[MessageRow]
    status: str
    step_id: int | None  # the step filtered on, if any
    newer: int | None  # the id to pass as `after` for the newer page (None: this is the first)
    older: int | None  # the id to pass as `before` for the older page (None: this is the last)


def message_page(session: Session, automation_id: int, *, status: str, step_id: int | None = None,
                 after: int | None = None, before: int | None = None,
                 per_page: int = PER_PAGE) -> MessagePage:
    """The automation's messages in `status` (one of LISTED), of one of its steps if
    `step_id` names one, newest first: those with ids
    below `before`, or (the page before) above `after`; at most `per_page` (1 to PER_PAGE)."""
    get_automation(session, automation_id)
    if status not in LISTED:
        raise ValidationError(f"Show one of: {', '.join(LISTED)}.")
    per_page = max(1, min(per_page, PER_PAGE))
    steps = select(AutomationStep.id).where(AutomationStep.automation_id == automation_id)
    message = AutomationMessage
    query = (
        select(message.id, message.subscriber_id, Subscriber.email, Subscriber.name,
               message.position, AutomationRevision.subject, message.status, message.reason,
               message.error_class, message.smtp_code, message.attempts,
               func.coalesce(message.updated_at, message.due_at))
        .join(AutomationRevision, AutomationRevision.id == message.revision_id)
        .outerjoin(Subscriber, Subscriber.id == message.subscriber_id)
        .where(message.step_id.in_(steps), message.status == status)
    )
    if step_id is not None:
        query = query.where(message.step_id == step_id)
    backwards = after is not None and before is None  # toward the newer ones
    if backwards:
        query = query.where(message.id > after).order_by(message.id)
    else:
        if before is not None:
            query = query.where(message.id < before)
        query = query.order_by(message.id.desc())
    found = [MessageRow(*tuple(row)) for row in session.execute(query.limit(per_page + 1))]
    more = len(found) > per_page
    rows = found[:per_page]
    if backwards:
        rows.reverse()
    newer_exists = more if backwards else before is not None
    older_exists = True if backwards else more
    return MessagePage(rows, status, step_id,
                       rows[0].id if rows and newer_exists else None,
                       rows[-1].id if rows and older_exists else None)
