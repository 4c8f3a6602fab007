"""What a code says of itself: whose it is, from which message, when that message was sent and
whether the code was redeemed (the API's `GET /api/codes/{code}`, a person's page).

Three reads whatever the number of codes: the codes, then their deliveries (with the
broadcasts' frozen subjects) and their automation messages (with the steps' frozen subjects
and the automations' names), each by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.campaigns.codes.minting import AUTOMATION_MESSAGE, DELIVERY
from broadside.campaigns.codes.redemption import Redemption, state_of
from broadside.core.errors import NotFound
from broadside.core.models import (
    Automation,
    AutomationMessage,
    AutomationRevision,
    Code,
    Delivery,
    Revision,
    Subscriber,
)

PERSON_PAGE = 100  # a person's newest codes on their page


@dataclass(frozen=True)
class CodeStory:
    code: str
    prefix: str
    subscriber_id: int | None
    email: str | None  # None: the person was erased
    source_kind: str  # delivery | automation_message
    source_id: int
    broadcast_id: int | None
    automation_id: int | None
    step_id: int | None
    message: str  # "Spring sale" (the subject), or the automation's name and step
    status: str | None  # the message's state now (sent, skipped...); None: its row is gone
    sent_at: datetime | None
    minted_at: datetime
    redeemed_at: datetime | None

    @property
    def redemption(self) -> Redemption:
        return state_of(self.redeemed_at)


def _stories(session: Session, codes: Sequence[Code]) -> list[CodeStory]:
    deliveries = [c.source_id for c in codes if c.source_kind == DELIVERY]
    messages = [c.source_id for c in codes if c.source_kind == AUTOMATION_MESSAGE]
    rows: dict[tuple[str, int], tuple[str, str | None, datetime | None]] = {}
    if deliveries:
        for row_id, subject, status, sent_at in session.execute(
                select(Delivery.id, Revision.subject, Delivery.status, Delivery.sent_at)
                .outerjoin(Revision, Revision.broadcast_id == Delivery.broadcast_id)
                .where(Delivery.id.in_(deliveries))):
            rows[(DELIVERY, row_id)] = (subject or "", status, sent_at)
    if messages:
        for row_id, name, position, subject, status, sent_at in session.execute(
                select(AutomationMessage.id, Automation.name, AutomationMessage.position,
                       AutomationRevision.subject, AutomationMessage.status,
                       AutomationMessage.sent_at)
                .join(Automation, Automation.id == AutomationMessage.automation_id)
                .join(AutomationRevision, AutomationRevision.id == AutomationMessage.revision_id)
                .where(AutomationMessage.id.in_(messages))):
            rows[(AUTOMATION_MESSAGE, row_id)] = (f"{name}, step {position}: {subject}", status,
                                                  sent_at)
    people = dict(session.execute(
        select(Subscriber.id, Subscriber.email)
        .where(Subscriber.id.in_({c.subscriber_id for c in codes if c.subscriber_id}))).all())
    stories = []
    for c in codes:
        title, state, when = rows.get((c.source_kind, c.source_id), ("", None, None))
        stories.append(CodeStory(
            c.code, c.prefix, c.subscriber_id, people.get(c.subscriber_id or 0), c.source_kind,
            c.source_id, c.broadcast_id, c.automation_id, c.step_id, title, state, when,
            c.minted_at, c.redeemed_at))
    return stories


def story(session: Session, code: str) -> CodeStory:
    """One code's story, or NotFound."""
    found = session.scalar(select(Code).where(Code.code == code))
    if found is None:
        raise NotFound(f"There is no code {code}.")
    return _stories(session, [found])[0]


def of_person(session: Session, subscriber_id: int, limit: int = PERSON_PAGE) -> list[CodeStory]:
    """A person's newest codes, newest first."""
    codes = list(session.scalars(select(Code).where(Code.subscriber_id == subscriber_id)
                                 .order_by(Code.id.desc()).limit(limit)))
    return _stories(session, codes) if codes else []
