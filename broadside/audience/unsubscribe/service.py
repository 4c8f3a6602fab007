"""Leaving a list: unsubscribe, undo, the preferences page, leave everything.

Plain functions over a SQLAlchemy session; no Flask request in here. Every change is a
transition of `broadside.audience.subscriptions` (`leave`, `rejoin`): one guarded UPDATE whose
row count decides whether an Event is appended, in the same transaction: a second click, a
mail client's retried one-click POST or two racing requests change the row once and record
it once, and every one of them still answers "you are unsubscribed". No read-then-write.

Bounces, complaints and suppression live in `broadside.audience.unsubscribe.suppression` and are
re-exported here (see `__all__`), so callers import one module.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.audience import subscriptions
from broadside.audience.unsubscribe.evidence import existing_broadcast_id
from broadside.audience.unsubscribe.suppression import (
    SOFT_BOUNCE_LIMIT,
    BounceOutcome,
    lift_suppression,
    record_bounce,
    record_complaint,
    reset_soft_bounces,
    suppress,
)
from broadside.campaigns.broadcasts.local_time import clean_timezone
from broadside.core.errors import NotFound, ValidationError
from broadside.core.i18n import LOCALES, _, clean_locale
from broadside.core.models import MailingList, Subscriber, Subscription
from broadside.mail.unsubscribe_tokens import UnsubscribeClaim

# How someone left, stored in Subscription.unsubscribe_source and the event's detail.
SOURCES = ("one-click", "link", "preferences", "owner", "api", "import")



def N_(message: str) -> str:
    return message


# One message for every link that does not lead to a subscription (erased subscriber, deleted
# list): it never says which part is missing, so a link cannot tell whether an address exists.
# Both are shown through _() (the page's language).
LINK_GONE = N_("This link does not work any more. You will not receive mail through it.")
# The one exception: the person the link was made for is gone (erased, by themselves or by the
# owner). Whoever holds their link is told so plainly: only their own address is concerned.
ADDRESS_GONE = N_("Everything held about the address this link was made for has been erased. "
                  "No more mail is sent to it.")


class AddressGone(NotFound):
    """The token's person no longer exists: erased (or their id now names somebody else)."""


@dataclass(frozen=True)
class Recipient:
    """Who a token names, and their status on the token's list right now."""

    subscriber_id: int
    email: str
    list_id: int
    list_name: str
    status: str
    broadcast_id: int | None
    suppression: str | None
    locale: str | None = None  # the reader's own language (None: not chosen)
    list_language: str | None = None  # the token's list's
    timezone: str | None = None  # the reader's own time zone (None: not set)


@dataclass(frozen=True)
class Membership:
    list_id: int
    name: str
    description: str
    status: str
    unsubscribed_at: datetime | None


@dataclass(frozen=True)
class Preferences:
    recipient: Recipient
    memberships: list[Membership]

    @property
    def active_count(self) -> int:
        return sum(1 for m in self.memberships if m.status != subscriptions.UNSUBSCRIBED)


@dataclass(frozen=True)
class Change:
    """The outcome of one request: `changed` is False when it was already so (idempotent)."""

    recipient: Recipient
    changed: bool


def resolve(session: Session, claim: UnsubscribeClaim) -> Recipient:
    """The subscriber and list a token names; NotFound (one message) if either is gone."""
    row = session.execute(
        select(Subscriber.email, Subscriber.suppression, Subscriber.created_at, MailingList.name,
               Subscription.status, Subscriber.locale, MailingList.language, Subscriber.timezone)
        .join(Subscription, Subscription.subscriber_id == Subscriber.id)
        .join(MailingList, MailingList.id == Subscription.list_id)
        .where(Subscriber.id == claim.subscriber_id, Subscription.list_id == claim.list_id)
    ).one_or_none()
    if row is None or not claim.made_for(row.created_at):
        # Gone, or the id now belongs to somebody else (a restored backup): the link is not theirs.
        raise _why_gone(session, claim)
    return Recipient(
        subscriber_id=claim.subscriber_id, email=row.email, list_id=claim.list_id,
        list_name=row.name, status=row.status, broadcast_id=claim.broadcast_id,
        suppression=row.suppression, locale=row.locale, list_language=row.language,
        timezone=row.timezone,
    )


def _why_gone(session: Session, claim: UnsubscribeClaim) -> NotFound:
    """Only read when a link leads nowhere: is the person gone, or only the subscription?"""
    joined = session.scalar(select(Subscriber.created_at)
                            .where(Subscriber.id == claim.subscriber_id))
    if joined is None or not claim.made_for(joined):
        return AddressGone(_(ADDRESS_GONE))
    return NotFound(_(LINK_GONE))


def for_list(claim: UnsubscribeClaim, list_id: int) -> UnsubscribeClaim:
    """The same person's claim on another of their lists (the preferences page).

    The broadcast is kept only for the token's own list: it was not sent to the others.
    """
    if list_id == claim.list_id:
        return claim
    return replace(claim, list_id=list_id, broadcast_id=None)


def leave_list(
    session: Session, subscriber_id: int, list_id: int, source: str, *,
    broadcast_id: int | None = None,
) -> bool:
    """The one unsubscribe write, for every way of leaving (a link, the preferences page, the
    owner's button): False when they had already left. The caller commits.

    `broadcast_id` is the broadcast whose link they followed, if any; the event names it
    only while that broadcast still exists.
    """
    _check_source(source)
    return subscriptions.move(
        session, subscriber_id, list_id, "leave", source=source, detail=source,
        broadcast_id=existing_broadcast_id(session, broadcast_id),
        data={"source": source, "broadcast_id": broadcast_id},
        webhook={"source": source, "broadcast_id": broadcast_id},
    )


def _leave(session: Session, claim: UnsubscribeClaim, source: str) -> bool:
    return leave_list(session, claim.subscriber_id, claim.list_id, source,
                      broadcast_id=claim.broadcast_id)


def _check_source(source: str) -> None:
    if source not in SOURCES:
        raise ValidationError(_("Unknown unsubscribe source %(source)s.", source=repr(source)))


def unsubscribe(session: Session, claim: UnsubscribeClaim, source: str) -> Change:
    """Leave the claim's list at once; a repeat answers the same and records nothing new.

    A broadcast already sending skips this person from their next turn on: the pipeline
    re-reads the subscription just before each send (invariant 3).
    """
    _check_source(source)
    resolve(session, claim)
    changed = _leave(session, claim, source)
    session.commit()
    return Change(resolve(session, claim), changed)


def resubscribe(session: Session, claim: UnsubscribeClaim, source: str = "link") -> Change:
    """Rejoin a list this person left; only their own action (this call) sets `active` again.

    A subscription that never left (active, or unconfirmed) is not touched, so undo cannot be
    used to skip a pending double opt-in confirmation.
    """
    resolve(session, claim)
    # They prove they read mail at this address by following its link: `rejoin` counts it
    # as their confirmation if they had none.
    changed = subscriptions.move(
        session, claim.subscriber_id, claim.list_id, "rejoin", detail=source,
        broadcast_id=existing_broadcast_id(session, claim.broadcast_id), data={"source": source},
    )
    session.commit()
    return Change(resolve(session, claim), changed)


def leave_all(session: Session, claim: UnsubscribeClaim, source: str = "preferences") -> int:
    """Leave every list this person is on; returns how many subscriptions changed."""
    _check_source(source)
    resolve(session, claim)
    list_ids = session.scalars(
        select(Subscription.list_id)
        .where(
            Subscription.subscriber_id == claim.subscriber_id,
            Subscription.status.in_([s.value for s in subscriptions.STAYING]),
        )
        .order_by(Subscription.list_id)
    ).all()
    changed = sum(1 for list_id in list_ids if _leave(session, for_list(claim, list_id), source))
    session.commit()
    return changed


def preferences(session: Session, claim: UnsubscribeClaim) -> Preferences:
    """Every list this person is on (or left), for the preferences page. Reads only."""
    recipient = resolve(session, claim)
    rows = session.execute(
        select(
            MailingList.id, MailingList.name, MailingList.description, Subscription.status,
            Subscription.unsubscribed_at,
        )
        .join(Subscription, Subscription.list_id == MailingList.id)
        .where(Subscription.subscriber_id == claim.subscriber_id)
        .order_by(MailingList.name)
    ).all()
    return Preferences(recipient, [Membership(*row) for row in rows])


def change_preference(
    session: Session, claim: UnsubscribeClaim, action: str, list_id: int | None
) -> str:
    """One button of the preferences page; returns the sentence to show.

    `list_id` must be one of this person's own subscriptions: the token authorises exactly
    the subscriber it names, never anyone else's rows.
    """
    if action == "leave_all":
        count = leave_all(session, claim, "preferences")
        return _("You have left every list.") if count else _("You were not on any list any more.")
    if action not in ("leave", "rejoin") or list_id is None:
        raise ValidationError(_("Choose a list and whether to leave or rejoin it."))
    target = for_list(claim, list_id)
    try:
        recipient = resolve(session, target)
    except NotFound:
        raise ValidationError(_("You are not on that list.")) from None
    if action == "leave":
        unsubscribe(session, target, "preferences")
        return _("You have left %(list)s.", list=recipient.list_name)
    resubscribe(session, target, "preferences")
    return _("You are subscribed to %(list)s again.", list=recipient.list_name)


def set_language(session: Session, claim: UnsubscribeClaim, locale: str | None) -> str | None:
    """The reader's own choice of language (the preferences page): one Broadside speaks, or
    "" for none (their list's, else Settings'). Returns it as stored. ValidationError for
    anything else, nothing changed."""
    resolve(session, claim)
    if locale:
        chosen = clean_locale(locale)
        if chosen not in LOCALES:
            raise ValidationError(_("Choose one of the languages offered."), field="locale")
    else:
        chosen = None
    subscriber = session.get(Subscriber, claim.subscriber_id)
    if subscriber is not None:
        subscriber.locale = chosen
    session.commit()
    return chosen


def set_timezone(session: Session, claim: UnsubscribeClaim, zone: str | None) -> str | None:
    """The reader's own time zone (the preferences page): an IANA name this server knows, or
    "" for none. Returns it as stored. ValidationError for anything else, nothing changed."""
    resolve(session, claim)
    try:
        chosen = clean_timezone(zone)
    except ValidationError:
        raise ValidationError(_("Choose one of the time zones offered."), field="timezone") from None
    subscriber = session.get(Subscriber, claim.subscriber_id)
    if subscriber is not None:
        subscriber.timezone = chosen
    session.commit()
    return chosen


__all__ = [
    "ADDRESS_GONE",
    "SOFT_BOUNCE_LIMIT",
    "AddressGone",
    "BounceOutcome",
    "Change",
    "Membership",
    "Preferences",
    "Recipient",
    "change_preference",
    "for_list",
    "leave_all",
    "leave_list",
    "lift_suppression",
    "preferences",
    "record_bounce",
    "record_complaint",
    "reset_soft_bounces",
    "resolve",
    "resubscribe",
    "set_language",
    "set_timezone",
    "suppress",
    "unsubscribe",
]
