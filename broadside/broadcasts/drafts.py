"""Drafts: create and edit a broadcast before it is sent.

Only a draft's content changes (invariant 8: what was sent is frozen); the edit is one UPDATE
guarded by the draft state, so an edit racing a send either lands before the send freezes the
content or is refused. The status itself is written only by `broadside.broadcasts.lifecycle`
(a new broadcast starts in its initial state).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from broadside.broadcasts import lifecycle
from broadside.broadcasts.service import get_broadcast, sender_identity
from broadside.db import rowcount
from broadside.errors import Conflict, NotFound, ValidationError
from broadside.models import Broadcast, MailingList, Revision
from broadside.rendering import CompiledRevision, RenderedEmail, compiled_revision, freeze_content
from broadside.site_settings import get_settings
from broadside.timeutil import utcnow

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
    if "\n" in str(subject) or "\r" in str(subject):
        raise ValidationError("The subject must be one line.")


def create_draft(session: Session, *, list_id: int, subject: str = "", body: str = "",
                 preheader: str = "") -> Broadcast:
    _validate(session, list_id, subject, preheader, body)
    broadcast = Broadcast(list_id=list_id, subject=subject.strip(), preheader=preheader.strip(),
                          body=body, status=lifecycle.INITIAL.value)
    session.add(broadcast)
    session.commit()
    return broadcast


def update_draft(session: Session, broadcast_id: int, *, list_id: int, subject: str,
                 preheader: str, body: str) -> Broadcast:
    """Edit a draft. Only drafts change: what was sent is frozen (invariant 8)."""
    _validate(session, list_id, subject, preheader, body)
    result = session.execute(
        update(Broadcast)
        .where(Broadcast.id == broadcast_id, Broadcast.status == lifecycle.DRAFT.value)
        .values(list_id=list_id, subject=subject.strip(), preheader=preheader.strip(), body=body,
                updated_at=utcnow())
    )
    session.commit()
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is None:
        raise NotFound("There is no such broadcast.")
    if rowcount(result) == 0:
        raise Conflict("This broadcast has been sent and can no longer be edited; "
                       "duplicate it instead.")
    session.refresh(broadcast)
    return broadcast


def duplicate(session: Session, broadcast_id: int) -> Broadcast:
    original = session.get(Broadcast, broadcast_id)
    if original is None:
        raise NotFound("There is no such broadcast.")
    copy = Broadcast(list_id=original.list_id, subject=original.subject,
                     preheader=original.preheader, body=original.body,
                     status=lifecycle.INITIAL.value)
    session.add(copy)
    session.commit()
    return copy


# ---------------------------------------------------------------- reading, for the pages

PAGE_SIZE = 50


@dataclass(frozen=True)
class BroadcastRow:
    broadcast: Broadcast
    list_name: str | None


@dataclass(frozen=True)
class BroadcastPage:
    rows: list[BroadcastRow]
    page: int
    has_next: bool


def list_broadcasts(session: Session, *, page: int = 1, per_page: int = PAGE_SIZE
                    ) -> BroadcastPage:
    """Broadcasts, most recently changed first, with the name of their list."""
    page = max(1, page)
    result = session.execute(
        select(Broadcast, MailingList.name)
        .outerjoin(MailingList, MailingList.id == Broadcast.list_id)
        .order_by(Broadcast.updated_at.desc(), Broadcast.id.desc())
        .offset((page - 1) * per_page)
        .limit(per_page + 1)
    ).all()
    rows = [BroadcastRow(broadcast, name) for broadcast, name in result]
    return BroadcastPage(rows=rows[:per_page], page=page, has_next=len(rows) > per_page)


def list_options(session: Session) -> list[tuple[int, str]]:
    """(id, name) of every list, for the "send to" choice."""
    return [(row.id, row.name) for row in
            session.execute(select(MailingList.id, MailingList.name).order_by(MailingList.name))]


def list_name(session: Session, list_id: int | None) -> str | None:
    if list_id is None:
        return None
    return session.scalar(select(MailingList.name).where(MailingList.id == list_id))


@dataclass(frozen=True)
class DraftPreview:
    """What a broadcast looks like in an inbox, or why it cannot be rendered yet."""

    broadcast: Broadcast
    from_name: str
    from_email: str
    postal_address: str
    rendered: RenderedEmail | None
    problem: str | None
    frozen: bool  # True when this is the revision that was (or is being) sent


def preview_email(session: Session, broadcast_id: int, *, sample_email: str,
                  default_from: str) -> DraftPreview:
    """Render a broadcast for a sample recipient with the renderer the worker uses.

    A sent broadcast shows its frozen revision (what the list received); a draft is rendered
    from its current text with the current settings. The sample recipient is named Alex.
    """

    broadcast = get_broadcast(session, broadcast_id)
    revision = session.scalar(select(Revision).where(Revision.broadcast_id == broadcast_id))
    sample: dict[str, Any] = {"email": sample_email, "name": "Alex", "attributes": {},
                              "unsubscribe_url": "#"}
    try:
        if revision is not None:
            compiled = compiled_revision(revision.subject, revision.html_template,
                                         revision.text_template)
            return DraftPreview(broadcast, revision.from_name, revision.from_email,
                                revision.postal_address, compiled.render(**sample), None, True)
        from_name, from_email = sender_identity(session, default_from)
        postal_address = get_settings(session).postal_address
        frozen = freeze_content(subject=broadcast.subject, preheader=broadcast.preheader,
                                body_markdown=broadcast.body, from_name=from_name,
                                from_email=from_email, postal_address=postal_address)
        compiled = CompiledRevision(subject=broadcast.subject,
                                    html_template=frozen.html_template,
                                    text_template=frozen.text_template)
        return DraftPreview(broadcast, from_name, from_email, postal_address,
                            compiled.render(**sample), None, False)
    except ValidationError as exc:
        return DraftPreview(broadcast, "", "", "", None, exc.message, revision is not None)


def autosave(session: Session, broadcast_id: int, *, list_id: int, subject: str,
             preheader: str, body: str, sample_email: str, default_from: str) -> DraftPreview:
    """Save the draft (all or nothing, as update_draft) and render its new preview."""
    update_draft(session, broadcast_id, list_id=list_id, subject=subject, preheader=preheader,
                 body=body)
    return preview_email(session, broadcast_id, sample_email=sample_email,
                         default_from=default_from)
