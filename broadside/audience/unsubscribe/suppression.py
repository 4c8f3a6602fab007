"""Bounces, complaints and suppression: one flag on the subscriber that covers every list.

A hard bounce suppresses as `bounced`, a complaint as `complained`, and soft bounces are
counted: the third in a row suppresses as `bounced`. The pipeline re-reads the flag just
before each send (invariant 3), so a bounce that arrives during a broadcast stops the next
send to that address. Every write is a predicate-guarded UPDATE whose rowcount decides
whether a `suppressed` event is appended, so duplicated webhooks record one suppression.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from broadside.audience.unsubscribe import reputation_marks
from broadside.core.addresses import normalise_email
from broadside.core.db import rowcount
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.events import record_event
from broadside.core.i18n import _
from broadside.core.models import (
    AutomationMessage,
    Broadcast,
    Delivery,
    Revision,
    Subscriber,
    TransactionalMessage,
)
from broadside.core.models.audience import SUPPRESSIONS
from broadside.core.timeutil import utcnow
from broadside.mail.message_refs import delivery_message_id, row_of
from broadside.webhooks import emitter

# Soft bounces in a row before the address is suppressed. A successful delivery resets the
# count (`reset_soft_bounces`, called by the pipeline).
SOFT_BOUNCE_LIMIT = 3

# A stronger reason replaces a weaker one, never the reverse: a complaint outranks the
# owner's block, which outranks a bounce.
_RANK = {"bounced": 1, "blocked": 2, "complained": 3}

MAX_NOTE_LENGTH = 500
MAX_DETAIL_LENGTH = 1000
OWNER_BLOCK_DETAIL = "blocked by the owner"


def outranks(kind: str, current: str | None) -> bool:
    """Whether suppressing as `kind` would replace `current` (None: not suppressed)."""
    return current is None or _RANK[kind] > _RANK.get(current, 0)


@dataclass(frozen=True)
class BounceOutcome:
    subscriber_id: int
    suppressed: bool  # this event is the one that suppressed the address
    soft_bounce_count: int
    delivery_id: int | None


@dataclass(frozen=True)
class Link:
    """Where a provider's event came from, found by Message-ID or the provider's id."""

    message_id: str | None = None
    delivery_id: int | None = None
    broadcast_id: int | None = None
    list_id: int | None = None
    transactional_message_id: int | None = None
    automation_message_id: int | None = None


def _subscriber_id_for(session: Session, email: str) -> tuple[int, str] | None:
    try:
        address = normalise_email(email)
    except ValidationError:
        address = (email or "").strip().lower()
    subscriber_id = session.scalar(select(Subscriber.id).where(Subscriber.email == address))
    return (subscriber_id, address) if subscriber_id is not None else None


def message_id_forms(message_ids: Iterable[str | None]) -> list[str]:
    """Each id with and without angle brackets: providers and our pipeline differ (Mailgun's
    API answers `<id@domain>`, its webhooks name `id@domain`)."""
    forms: list[str] = []
    for raw in message_ids:
        bare = (raw or "").strip().strip("<>").strip()
        if bare and len(bare) <= 250:
            forms.extend(f for f in (bare, f"<{bare}>") if f not in forms)
    return forms


def _link(
    session: Session, subscriber_id: int, email: str, message_ids: Iterable[str | None]
) -> Link:
    # Our Message-ID or the provider's own id for the message (`provider_message_id`, what
    # its API answered): a provider's report may name either.
    forms = message_id_forms(message_ids)
    if not forms:
        return Link()
    # A delivery's Message-ID is not stored: ours names its row (broadside.mail.message_refs).
    named = [row_id for kind, row_id in filter(None, map(row_of, forms)) if kind == "delivery"]
    delivery = session.execute(
        select(Delivery.id, Delivery.broadcast_id, Broadcast.list_id, Revision.from_email)
        .join(Broadcast, Broadcast.id == Delivery.broadcast_id)
        .outerjoin(Revision, Revision.broadcast_id == Delivery.broadcast_id)
        .where(or_(Delivery.id.in_(named), Delivery.provider_message_id.in_(forms)),
               Delivery.subscriber_id == subscriber_id)
        .order_by(Delivery.id.desc())
        .limit(1)
    ).first()
    if delivery is not None:
        return Link(delivery_message_id(delivery.id, delivery.broadcast_id,
                                         delivery.from_email or ""),
                     delivery.id, delivery.broadcast_id, delivery.list_id)
    message = session.execute(
        select(TransactionalMessage.id, TransactionalMessage.broadcast_id,
               TransactionalMessage.message_id)
        .where(
            or_(TransactionalMessage.message_id.in_(forms),
                TransactionalMessage.provider_message_id.in_(forms)),
            or_(TransactionalMessage.subscriber_id == subscriber_id,
                TransactionalMessage.to_email == email),
        )
        .order_by(TransactionalMessage.id.desc())
        .limit(1)
    ).first()
    if message is not None:
        return Link(message.message_id, broadcast_id=message.broadcast_id,
                     transactional_message_id=message.id)
    # An automation's message: by the id our Message-ID names or the provider's id (indexed).
    named = [row_id for kind, row_id in filter(None, map(row_of, forms))
             if kind == "automation message"]
    automated = session.execute(
        select(AutomationMessage.id, AutomationMessage.list_id)
        .where(or_(AutomationMessage.id.in_(named),
                   AutomationMessage.provider_message_id.in_(forms)),
               AutomationMessage.subscriber_id == subscriber_id)
        .order_by(AutomationMessage.id.desc())
        .limit(1)
    ).first()
    if automated is not None:
        return Link(forms[0], list_id=automated.list_id, automation_message_id=automated.id)
    return Link(message_id=forms[0])


def suppress_linked(
    session: Session, subscriber_id: int, kind: str, detail: str, link: Link | None = None,
    data: dict[str, Any] | None = None, *, hard: bool = True,
) -> bool:
    link = link or Link()
    weaker = [k for k, rank in _RANK.items() if rank < _RANK[kind]]
    result = session.execute(
        update(Subscriber)
        .where(
            Subscriber.id == subscriber_id,
            or_(Subscriber.suppression.is_(None), Subscriber.suppression.in_(weaker)),
        )
        .values(suppression=kind, suppressed_at=utcnow(), suppression_detail=detail[:1000])
        .execution_options(synchronize_session=False)
    )
    if rowcount(result) != 1:
        return False
    record_event(
        session, "suppressed", subscriber_id=subscriber_id, list_id=link.list_id,
        broadcast_id=link.broadcast_id, delivery_id=link.delivery_id,
        detail=f"{kind}: {detail}" if detail else kind, data={"kind": kind, **(data or {})},
    )
    emitter.emit_subscriber(session, "subscriber.suppressed", subscriber_id, kind=kind,
                           detail=detail or None, broadcast_id=link.broadcast_id)
    if kind == "complained" or (kind == "bounced" and hard):
        # The reputation guard's evidence: the message it names, whatever reported it.
        reputation_marks.mark(session, kind, delivery_id=link.delivery_id,
                              automation_message_id=link.automation_message_id,
                              transactional_message_id=link.transactional_message_id)
    return True


def suppress(
    session: Session, subscriber_id: int, kind: str = "blocked", detail: str = "", *,
    broadcast_id: int | None = None, delivery_id: int | None = None,
) -> bool:
    """Stop all mail to this subscriber; False if already suppressed for as strong a reason.

    The one way to suppress by hand (the owner's "Block from all lists" is `kind="blocked"`):
    a stronger reason replaces a weaker one (blocking a bounced address makes it `blocked`,
    with its event), never the reverse. Commits.
    """
    if kind not in SUPPRESSIONS:
        raise ValidationError(_("Unknown suppression %(kind)s: use %(kinds)s.", kind=repr(kind),
                                kinds=", ".join(SUPPRESSIONS)))
    if session.scalar(select(Subscriber.id).where(Subscriber.id == subscriber_id)) is None:
        raise NotFound(_("There is no such subscriber."))
    changed = suppress_uncommitted(session, subscriber_id, kind, detail,
                                   broadcast_id=broadcast_id, delivery_id=delivery_id)
    session.commit()
    return changed


def suppress_uncommitted(
    session: Session, subscriber_id: int, kind: str = "blocked", detail: str = "", *,
    broadcast_id: int | None = None, delivery_id: int | None = None,
    automation_message_id: int | None = None, transactional_message_id: int | None = None,
) -> bool:
    """`suppress` for a caller that writes many people in one transaction (the bulk
    actions, the worker's refusals at RCPT): the same guarded write and event; no existence
    check (a missing person changes nothing), and the caller commits. Naming the message a
    `bounced` or `complained` is about counts it for the reputation guard."""
    if kind not in SUPPRESSIONS:
        raise ValidationError(_("Unknown suppression %(kind)s: use %(kinds)s.", kind=repr(kind),
                                kinds=", ".join(SUPPRESSIONS)))
    detail = (detail or "").strip()[:MAX_DETAIL_LENGTH]
    if not detail and kind == "blocked":
        detail = OWNER_BLOCK_DETAIL
    return suppress_linked(session, subscriber_id, kind, detail,
                     Link(delivery_id=delivery_id, broadcast_id=broadcast_id,
                           automation_message_id=automation_message_id,
                           transactional_message_id=transactional_message_id))


def lift_suppression(session: Session, subscriber_id: int, note: str = "") -> str:
    """The owner lifts a suppression by hand; returns what it was, and records the note.

    Lifting does not rejoin lists: subscriptions keep their own status.
    """
    note = (note or "").strip()
    if len(note) > MAX_NOTE_LENGTH:
        raise ValidationError(_("Keep the note under %(limit)s characters.",
                                limit=MAX_NOTE_LENGTH))
    row = session.execute(
        select(Subscriber.suppression, Subscriber.suppression_detail, Subscriber.suppressed_at)
        .where(Subscriber.id == subscriber_id)
    ).one_or_none()
    if row is None:
        raise NotFound(_("There is no such subscriber."))
    if row.suppression is None:
        raise Conflict(_("This subscriber is not suppressed."))
    # Guarded on the value just read: if a complaint replaced a bounce meanwhile, the owner
    # must see it before lifting it.
    result = session.execute(
        update(Subscriber)
        .where(Subscriber.id == subscriber_id, Subscriber.suppression == row.suppression)
        .values(suppression=None, suppressed_at=None, suppression_detail=None,
                soft_bounce_count=0)
        .execution_options(synchronize_session=False)
    )
    if rowcount(result) != 1:
        session.rollback()
        raise Conflict(_("The suppression changed meanwhile. Reload the page and look "
                         "again."))
    record_event(
        session, "unsuppressed", subscriber_id=subscriber_id,
        detail=note or "lifted by the owner",
        data={
            "was": row.suppression, "was_detail": row.suppression_detail,
            "since": row.suppressed_at.isoformat() if row.suppressed_at else None, "note": note,
        },
    )
    session.commit()
    return row.suppression


def _event_data(link: Link, source: str, **extra: Any) -> dict[str, Any]:
    data = {"source": source, "message_id": link.message_id, **extra}
    if link.transactional_message_id is not None:
        data["transactional_message_id"] = link.transactional_message_id
    return data


def _provider_event(session: Session, kind: str, summary: str, email: str,
                    message_ids: Iterable[str | None], detail: str, source: str,
                    **data: Any) -> tuple[int, Link] | None:
    """The subscriber a provider's report is about, and its evidence row linked to what was
    sent to them; None (nothing written) when the address is unknown."""
    found = _subscriber_id_for(session, email)
    if found is None:
        return None
    subscriber_id, address = found
    link = _link(session, subscriber_id, address, message_ids)
    record_event(
        session, kind, subscriber_id=subscriber_id, list_id=link.list_id,
        broadcast_id=link.broadcast_id, delivery_id=link.delivery_id,
        detail=f"{summary}: {detail}" if detail else summary,
        data=_event_data(link, source, **data),
    )
    return subscriber_id, link


def record_bounce(
    session: Session, email: str, bounce_type: str, *, message_ids: Iterable[str | None] = (),
    detail: str = "", source: str = "webhook",
) -> BounceOutcome | None:
    """A provider reported a bounce; None (nothing written) when the address is unknown.
    Commits."""
    outcome = record_bounce_uncommitted(session, email, bounce_type, message_ids=message_ids,
                                        detail=detail, source=source)
    session.commit()
    return outcome


def record_bounce_uncommitted(
    session: Session, email: str, bounce_type: str, *, message_ids: Iterable[str | None] = (),
    detail: str = "", source: str = "webhook",
) -> BounceOutcome | None:
    """`record_bounce` for a caller whose own write commits with it (a bounce read from a
    mailbox: its processed row, broadside.feedback.mailbox)."""
    if bounce_type not in ("hard", "soft"):
        raise ValidationError("bounce_type must be 'hard' or 'soft'.")
    detail = (detail or "").strip()[:1000]
    found = _provider_event(session, "bounce", f"{bounce_type} bounce", email, message_ids, detail,
                            source, bounce_type=bounce_type)
    if found is None:
        return None
    subscriber_id, link = found
    if bounce_type == "hard":
        suppressed = suppress_linked(session, subscriber_id, "bounced",
                               f"hard bounce: {detail}" if detail else "hard bounce", link)
    else:
        # Counted in the database, not read-then-written: concurrent webhooks both count.
        session.execute(
            update(Subscriber)
            .where(Subscriber.id == subscriber_id)
            .values(soft_bounce_count=Subscriber.soft_bounce_count + 1)
            .execution_options(synchronize_session=False)
        )
    count = session.scalar(select(Subscriber.soft_bounce_count).where(Subscriber.id == subscriber_id)) or 0
    if bounce_type == "soft":
        suppressed = count >= SOFT_BOUNCE_LIMIT and suppress_linked(
            session, subscriber_id, "bounced",
            f"{count} soft bounces in a row" + (f"; the last: {detail}" if detail else ""),
            link, {"soft_bounce_count": count}, hard=False,
        )
    return BounceOutcome(subscriber_id, suppressed, count or 0, link.delivery_id)


def record_complaint(
    session: Session, email: str, *, message_ids: Iterable[str | None] = (),
    detail: str = "", source: str = "webhook",
) -> BounceOutcome | None:
    """The recipient pressed "report spam": suppress at once (spam rate must stay < 0.3%).
    Commits."""
    outcome = record_complaint_uncommitted(session, email, message_ids=message_ids,
                                           detail=detail, source=source)
    session.commit()
    return outcome


def record_complaint_uncommitted(
    session: Session, email: str, *, message_ids: Iterable[str | None] = (),
    detail: str = "", source: str = "webhook",
) -> BounceOutcome | None:
    """`record_complaint` for a caller whose own write commits with it."""
    detail = (detail or "").strip()[:1000]
    found = _provider_event(session, "complaint", "complaint", email, message_ids, detail, source)
    if found is None:
        return None
    subscriber_id, link = found
    suppressed = suppress_linked(session, subscriber_id, "complained",
                           f"spam complaint: {detail}" if detail else "spam complaint", link)
    count = session.scalar(
        select(Subscriber.soft_bounce_count).where(Subscriber.id == subscriber_id)
    )
    return BounceOutcome(subscriber_id, suppressed, count or 0, link.delivery_id)


def reset_soft_bounces(session: Session, subscriber_id: int) -> bool:
    """A delivery succeeded: soft bounces are no longer "in a row". The caller commits.

    For the pipeline (after an accepted send) and the SES `Delivery` notification.
    """
    result = session.execute(
        update(Subscriber)
        .where(Subscriber.id == subscriber_id, Subscriber.soft_bounce_count > 0)
        .values(soft_bounce_count=0)
        .execution_options(synchronize_session=False)
    )
    return rowcount(result) == 1


def reset_soft_bounces_for_email(session: Session, email: str) -> bool:
    """`reset_soft_bounces` by address (a provider's delivery notification); commits."""
    found = _subscriber_id_for(session, email)
    changed = found is not None and reset_soft_bounces(session, found[0])
    session.commit()
    return changed
