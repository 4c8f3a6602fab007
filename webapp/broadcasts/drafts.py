"""Drafts: create and edit a broadcast before it is sent."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.orm import Session

from webapp.errors import Conflict, NotFound, ValidationError
from webapp.models import Broadcast, MailingList
from webapp.timeutil import utcnow

MAX_SUBJECT = 300
MAX_PREHEADER = 300
MAX_BODY = 500_000


def _validate(session: Session, list_id: object, subject: object, preheader: object, body: object):
    if not isinstance(list_id, int) or isinstance(list_id, bool):
        raise ValidationError("Choose a list to send to.")
    if session.get(MailingList, list_id) is None:
        raise ValidationError(f"There is no list with id {list_id}.")
    for label, value, limit in (("subject", subject, MAX_SUBJECT),
                                ("preheader", preheader, MAX_PREHEADER),
                                ("body", body, MAX_BODY)):
        if not isinstance(value, str):
            raise ValidationError(f"The {label} must be text.")
        if len(value) > limit:
            raise ValidationError(f"The {label} is too long ({len(value)} of {limit} characters).")
    if "\n" in subject or "\r" in subject:
        raise ValidationError("The subject must be one line.")


def create_draft(session: Session, *, list_id: int, subject: str = "", body: str = "",
                 preheader: str = "") -> Broadcast:
    _validate(session, list_id, subject, preheader, body)
    broadcast = Broadcast(list_id=list_id, subject=subject.strip(), preheader=preheader.strip(),
                          body=body, status="draft")
    session.add(broadcast)
    session.commit()
    return broadcast


def update_draft(session: Session, broadcast_id: int, *, list_id: int, subject: str,
                 preheader: str, body: str) -> Broadcast:
    """Edit a draft. Only drafts change: what was sent is frozen (invariant 8)."""
    _validate(session, list_id, subject, preheader, body)
    result = session.execute(
        update(Broadcast)
        .where(Broadcast.id == broadcast_id, Broadcast.status == "draft")
        .values(list_id=list_id, subject=subject.strip(), preheader=preheader.strip(), body=body,
                updated_at=utcnow())
    )
    session.commit()
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is None:
        raise NotFound("There is no such broadcast.")
    if result.rowcount == 0:
        raise Conflict("This broadcast has been sent and can no longer be edited; duplicate it instead.")
    session.refresh(broadcast)
    return broadcast


def duplicate(session: Session, broadcast_id: int) -> Broadcast:
    original = session.get(Broadcast, broadcast_id)
    if original is None:
        raise NotFound("There is no such broadcast.")
    copy = Broadcast(list_id=original.list_id, subject=original.subject,
                     preheader=original.preheader, body=original.body, status="draft")
    session.add(copy)
    session.commit()
    return copy
