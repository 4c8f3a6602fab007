"""Send again to those who did not open: who they are, whether the button is offered, and the
draft it makes.

Who: the people a sent broadcast reached (a delivery of it `sent` or `unknown`, which may
have arrived) with no per-person open recorded for that copy (`analytics_people`, kind
'open'). Machine opens are never written there (analytics/counting.py), so a privacy proxy's
or a scanner's load does not make anyone an opener; Apple Mail Privacy Protection's own loads
are taken for machines where they can be told apart, but some are not, and clients that block
images make real readers look like non-openers: the confirmation page says both.

`not_opened_clause` is the one condition: the send page's count (`audience.py`), the
confirmation page's count and the snapshot at Send all use it, so they agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import ColumnElement, and_, exists, func, not_, select
from sqlalchemy.orm import Session

from broadside.campaigns.analytics.modes import OFF, PER_PERSON, SHORT
from broadside.campaigns.broadcasts import lifecycle
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _, ngettext
from broadside.core.logs import owner_action
from broadside.core.models import Broadcast, Delivery, MailingList, PersonActivity, Subscriber
from broadside.core.models.sending import BroadcastStatus, DeliveryStatus
from broadside.core.site_settings import get_settings, owner_zone
from broadside.core.timeutil import utcnow
from broadside.delivery.identities.service import check_choice
from broadside.segments import service as segments

REACHED = (DeliveryStatus.SENT.value, DeliveryStatus.UNKNOWN.value)
OPEN = "open"
DEFAULT_WAIT_HOURS = 24  # Settings' resend_after_hours when unset
MAX_WAIT_HOURS = 720
MAX_SUBJECT = 300
MAX_NAMED_LISTS = 5


def not_opened_clause(broadcast_id: int) -> ColumnElement[bool]:
    """A condition over `subscribers` (correlated on Subscriber.id): the broadcast reached them
    and they have not opened it. Reads deliveries by UNIQUE(subscriber_id, broadcast_id) and
    analytics_people by UNIQUE(delivery_id, kind, position)."""
    opened = exists().where(PersonActivity.delivery_id == Delivery.id,
                            PersonActivity.kind == OPEN)
    return exists().where(
        and_(Delivery.subscriber_id == Subscriber.id, Delivery.broadcast_id == broadcast_id,
             Delivery.status.in_(REACHED), not_(opened)))


# ---------------------------------------------------------------- whether it is offered


@dataclass(frozen=True)
class Offer:
    """Whether "send again to those who did not open" is offered for a broadcast, and why
    not: `reason` in the owner's words; `available_at` (naive UTC) when only the wait stands
    in the way; `resend_id` when a resend of it already exists."""

    offered: bool
    reason: str = ""
    available_at: datetime | None = None
    resend_id: int | None = None


def _aggregate_lists(session: Session, broadcast: Broadcast) -> list[str]:
    """The lists whose readers' copies of the broadcast are counted in aggregate only (their
    list has per-person tracking off): nobody on them could be told to have opened it. A
    list's broadcast asks its one list; a segment's reads the lists of its copies (the
    broadcast's deliveries by (broadcast_id, status): one pass, asked only once every other
    condition of the offer holds)."""
    aggregate = MailingList.per_person_tracking.is_not(True)
    if broadcast.segment_id is None and broadcast.list_id is not None:
        return list(session.scalars(select(MailingList.name).where(
            MailingList.id == broadcast.list_id, aggregate)))
    copy_lists = (select(Delivery.list_id).where(Delivery.broadcast_id == broadcast.id,
                                                 Delivery.status.in_(REACHED))
                  .distinct().scalar_subquery())
    return list(session.scalars(
        select(MailingList.name).where(aggregate, MailingList.id.in_(copy_lists))
        .order_by(MailingList.name).limit(MAX_NAMED_LISTS + 1)))


def _when(session: Session, moment: datetime) -> str:
    local = moment.replace(tzinfo=UTC).astimezone(owner_zone(session))
    return local.strftime("%Y-%m-%d %H:%M ") + str(local.tzname())


def offer(session: Session, broadcast: Broadcast, *, now: datetime | None = None) -> Offer:
    """Whether the button is offered for this broadcast now, and the reason when not."""
    if broadcast.status != BroadcastStatus.SENT.value or broadcast.finished_at is None:
        return Offer(False, _("It can be sent again to those who did not open it once it "
                              "has been sent."))
    if broadcast.tracking != PER_PERSON:
        return Offer(False, _("It was sent with tracking %(mode)s: only per-person tracking "
                              "tells who opened it.", mode=str(SHORT.get(broadcast.tracking or OFF,
                                                                          SHORT[OFF]))))
    resend_id = session.scalar(select(Broadcast.id).where(Broadcast.resend_of_id == broadcast.id)
                               .order_by(Broadcast.id).limit(1))
    if resend_id is not None:
        return Offer(False, _("A resend of it to those who did not open it exists already."),
                     resend_id=resend_id)
    # A list's broadcast asks its one list before the wait (the wait's "from then" would
    # promise what its list refuses); a segment's reads its copies' lists only after it.
    to_a_list = broadcast.segment_id is None
    if to_a_list and (refused := _aggregate_only(session, broadcast)):
        return refused
    hours = get_settings(session).resend_after_hours or DEFAULT_WAIT_HOURS
    available = broadcast.finished_at + timedelta(hours=hours)
    if (now or utcnow()) < available:
        return Offer(False, ngettext(
            "Readers get %(num)s hour to open it first: it can be sent again from %(when)s.",
            "Readers get %(num)s hours to open it first: it can be sent again from %(when)s.",
            hours, when=_when(session, available)), available_at=available)
    if not to_a_list and (refused := _aggregate_only(session, broadcast)):
        return refused
    return Offer(True)


def _aggregate_only(session: Session, broadcast: Broadcast) -> Offer | None:
    aggregate = _aggregate_lists(session, broadcast)
    if not aggregate:
        return None
    names = ", ".join(f"“{name}”" for name in aggregate[:MAX_NAMED_LISTS])
    return Offer(False, ngettext(
        "Opens were counted in aggregate only for the list %(names)s (its per-person "
        "tracking is off), so nobody there can be told to have opened it.",
        "Opens were counted in aggregate only for the lists %(names)s (their per-person "
        "tracking is off), so nobody there can be told to have opened it.",
        len(aggregate), names=names))


def count(session: Session, broadcast_id: int) -> int:
    """How many a resend would reach now: the people the broadcast reached who have not
    opened it, among those its list or segment reaches now (what the resend draft's send
    page counts: `audience.audience_condition`)."""
    broadcast = _sent(session, broadcast_id)
    condition = segments.reached(session, broadcast.list_id, broadcast.segment_id)
    if condition is None:
        return 0
    return session.scalar(select(func.count()).select_from(Subscriber).where(
        condition, not_opened_clause(broadcast_id))) or 0


# ---------------------------------------------------------------- the new draft


def _sent(session: Session, broadcast_id: int) -> Broadcast:
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is None:
        raise NotFound(_("No such broadcast."))
    return broadcast


def clean_subject(original: Broadcast, subject: object) -> str:
    if subject is not None and not isinstance(subject, str):
        raise ValidationError(_("The new subject must be text."), field="subject")
    cleaned = " ".join((subject or "").split())
    if not cleaned:
        raise ValidationError(_("Give it a new subject: those who did not open the first "
                                "one may open another."), field="subject")
    if len(cleaned) > MAX_SUBJECT:
        raise ValidationError(_("A subject can be at most %(max)s characters.", max=MAX_SUBJECT),
                              field="subject")
    if cleaned.casefold() == " ".join(original.subject.split()).casefold():
        raise ValidationError(_("Choose a subject different from the first one's."),
                              field="subject")
    return cleaned


def make_draft(session: Session, broadcast_id: int, subject: object) -> Broadcast:
    """A new draft to those the broadcast reached who did not open it: its content, list or
    segment, identity, tracking, design and attachments, with a new subject. Conflict (with
    the offer's reason) when the button is not offered; ValidationError for the subject.
    The frequency cap is not copied (our choice): it would count the first broadcast and
    skip every one of its non-openers."""
    original = session.scalar(select(Broadcast).where(Broadcast.id == broadcast_id)
                              .with_for_update())  # two presses at once: one draft
    if original is None:
        raise NotFound(_("No such broadcast."))
    try:
        cleaned = clean_subject(original, subject)  # a bad request is refused as such first
    except ValidationError:
        session.rollback()
        raise
    chosen = offer(session, original)
    if not chosen.offered:
        session.rollback()
        raise Conflict(chosen.reason)
    try:
        identity_id = check_choice(session, original.identity_id)
    except ValidationError:
        identity_id = None  # a deleted identity is not carried over: the default sends it
    draft = Broadcast(
        list_id=original.list_id, segment_id=original.segment_id, subject=cleaned,
        preheader=original.preheader, body=original.body, body_format=original.body_format,
        editor=original.editor, text_body=original.text_body,
        attachment_ids=original.attachment_ids, versions=original.versions,
        design_overrides=original.design_overrides, view_in_browser=original.view_in_browser,
        tracking=original.tracking, codes_prefix=original.codes_prefix,
        identity_id=identity_id, skip_if_received_within_hours=None,
        status=lifecycle.INITIAL.value, resend_of_id=original.id)
    session.add(draft)
    session.commit()
    owner_action("resend to non-openers drafted", broadcast_id=draft.id, resend_of=original.id)
    return draft


def set_wait_hours(session: Session, value: object) -> int:
    """Settings' wait before the button is offered: whole hours from 1 to MAX_WAIT_HOURS
    after a broadcast finished (one commit)."""
    text = value.strip() if isinstance(value, str) else value
    hours = int(text) if isinstance(text, str) and re.fullmatch(r"[0-9]{1,4}", text) else text
    if isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= MAX_WAIT_HOURS:
        raise ValidationError(_("Give the wait in whole hours, from 1 to %(max)s.",
                                max=MAX_WAIT_HOURS), field="resend_after_hours")
    get_settings(session).resend_after_hours = hours
    session.commit()
    return hours
