"""Who a broadcast would reach now, and who would be skipped and why: the send page's and the
press's reads of a list's or a segment's audience, each kept small at a million subscribers.
The audience a send actually gets is decided at the press (`snapshot.begin`).

How many readers get each of a broadcast's versions (`readers_per_version`): the audience
counted by the reader's language, their own (`Subscriber.locale`), else their list's
(`MailingList.language`: the broadcast's list; for a segment, the lowest-id list with a language
the reader is active on), else Settings' `default_language`; each language then given its
version as the worker gives it (`content.versions.version_for`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, exists, func, literal, select
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.non_openers import not_opened_clause
from broadside.campaigns.content.versions import version_for
from broadside.core.models import (
    Broadcast,
    Delivery,
    MailingList,
    Segment,
    Subscriber,
    Subscription,
)
from broadside.core.models.sending import MAY_HAVE_RECEIVED
from broadside.core.site_settings import get_settings
from broadside.core.timeutil import utcnow
from broadside.segments import service as segments


def audience_summary(session: Session, list_id: int | None) -> dict[str, Any]:
    """Who a send to this list would reach now, and who would be skipped and why."""
    if list_id is None:
        return {"active": 0, "skipped": {}}
    # Reads that stay small at a million: the list's subscriptions by status, from the
    # (list_id, status) index alone, and its suppressed people, from whichever side is
    # smaller (`_suppressed_members`); rather than one join that reads every member's row for
    # their suppression (0.8 s on SQLite).
    by_status: dict[str, int] = {}
    for status, count in session.execute(
            select(Subscription.status, func.count()).where(Subscription.list_id == list_id)
            .group_by(Subscription.status)):
        by_status[status] = count
    skipped: dict[str, int] = {}
    for status, suppression, count in session.execute(_suppressed_members(
            session, list_id, members=sum(by_status.values()))):
        by_status[status] -= count  # a suppressed person is skipped for that, whatever else
        reason = str(suppression)  # not NULL: the WHERE asks for it
        skipped[reason] = skipped.get(reason, 0) + count
    for status, count in by_status.items():
        if status != "active" and count:
            skipped[status] = skipped.get(status, 0) + count
    return {"active": by_status.get("active", 0), "skipped": skipped}


def _suppressed_members(session: Session, list_id: int, *, members: int) -> Select:
    """(subscription status, suppression, count) of the list's suppressed people, read from
    whichever side is smaller, decided here: SQLite's statistics count the NULLs of the
    suppression index (nearly every row), so left to itself it reads every member's row to
    find the few suppressed (0.41 s at a million on SQLite). Fewer suppressed people in the
    whole database than members: they are read first, from the suppression index, each one's
    subscription found by UNIQUE(subscriber_id, list_id) (0.04 s); else the members first, as
    before (a small list in a database with many suppressed people)."""
    suppressed = Subscriber.suppression.is_not(None)
    fewer = (session.scalar(select(func.count()).select_from(
        select(Subscriber.id).where(suppressed).limit(members + 1).subquery())) or 0) <= members
    if not fewer:
        return (select(Subscription.status, Subscriber.suppression, func.count())
                .join(Subscription, Subscription.subscriber_id == Subscriber.id)
                .where(suppressed, Subscription.list_id == list_id)
                .group_by(Subscription.status, Subscriber.suppression))
    # MATERIALIZED: the suppressed people first, whatever the planner would reorder.
    first = (select(Subscriber.id, Subscriber.suppression).where(suppressed)
             .cte("suppressed").prefix_with("MATERIALIZED"))
    return (select(Subscription.status, first.c.suppression, func.count())
            .select_from(first)
            .join(Subscription, and_(Subscription.subscriber_id == first.c.id,
                                     Subscription.list_id == list_id))
            .group_by(Subscription.status, first.c.suppression))


def audience_condition(session: Session, broadcast: Broadcast) -> ColumnElement[bool] | None:
    """Who the broadcast would reach now, as a condition over subscribers (None: no audience
    chosen, or its segment is gone). A resend to those who did not open (`resend_of_id`)
    reaches, of its list's or segment's people, only those the first one reached who have not
    opened it (`non_openers.not_opened_clause`)."""
    condition = reached(session, broadcast.list_id, broadcast.segment_id)
    if condition is None or broadcast.resend_of_id is None:
        return condition
    return and_(condition, not_opened_clause(broadcast.resend_of_id))


def reached(session: Session, list_id: int | None, segment_id: int | None
            ) -> ColumnElement[bool] | None:
    """Who mail to a segment (when given) or else a list would reach now: its active,
    unsuppressed members or the segment's matches (None: neither, or the segment is gone).
    An automation's audience too (`automations/merge_report.py`)."""
    return segments.reached(session, list_id, segment_id)


def has_audience(session: Session, broadcast: Broadcast) -> bool:
    """Whether a send would reach anyone now: the first such person, not a count."""
    condition = audience_condition(session, broadcast)
    return condition is not None and session.scalar(
        select(Subscriber.id).where(condition).limit(1)) is not None


def broadcast_audience(session: Session, broadcast: Broadcast) -> dict[str, Any]:
    """Who a send would reach now and who would be skipped and why, for a list or a segment;
    with a frequency cap, also how many of them got a broadcast within it (they are skipped
    at their turn if that is still so)."""
    if broadcast.resend_of_id is not None:
        summary = _resend_summary(session, broadcast)
    elif broadcast.segment_id is not None:
        segment = session.get(Segment, broadcast.segment_id)
        summary = (segments.summary(session, segment) if segment is not None
                   else {"active": 0, "skipped": {}})
    else:
        summary = audience_summary(session, broadcast.list_id)
    summary["recently_received"] = 0
    hours = broadcast.skip_if_received_within_hours
    condition = audience_condition(session, broadcast)
    if hours and condition is not None and summary["active"]:
        recent = exists().where(
            Delivery.subscriber_id == Subscriber.id,
            Delivery.status.in_(MAY_HAVE_RECEIVED),
            func.coalesce(Delivery.sent_at, Delivery.claimed_at) >= utcnow() - timedelta(hours=hours),
        )
        summary["recently_received"] = session.scalar(
            select(func.count()).select_from(Subscriber).where(condition, recent)) or 0
    return summary


def _resend_summary(session: Session, broadcast: Broadcast) -> dict[str, Any]:
    """A resend's audience: the first broadcast's non-openers its list or segment reaches now;
    those it no longer reaches are skipped, for their suppression, else as unsubscribed (no
    longer active on the list, or no longer matching the segment)."""
    assert broadcast.resend_of_id is not None
    condition = reached(session, broadcast.list_id, broadcast.segment_id)
    if condition is None:
        return {"active": 0, "skipped": {}}
    rows = session.execute(
        select(Subscriber.suppression, condition.label("reached"), func.count())
        .where(not_opened_clause(broadcast.resend_of_id))
        .group_by(Subscriber.suppression, condition))
    active, skipped = 0, dict[str, int]()
    for suppression, is_reached, count in rows:
        if is_reached:
            active += count
        else:
            reason = suppression or "unsubscribed"
            skipped[reason] = skipped.get(reason, 0) + count
    return {"active": active, "skipped": skipped}


# ---------------------------------------------------------------- readers per version


@dataclass(frozen=True)
class VersionCount:
    locale: str  # the version's language tag (the default version's: Settings')
    default: bool  # the message's own fields, for everyone whose language has no version
    readers: int


def _list_language(session: Session, broadcast: Broadcast) -> ColumnElement:
    """The language of the reader's list, as a column of the count's query."""
    if broadcast.segment_id is None:
        language = session.scalar(select(MailingList.language)
                                  .where(MailingList.id == broadcast.list_id))
        return literal(language or None)
    return (select(MailingList.language)
            .join(Subscription, Subscription.list_id == MailingList.id)
            .where(Subscription.subscriber_id == Subscriber.id,
                   Subscription.status == "active", MailingList.language.is_not(None),
                   MailingList.language != "")
            .order_by(MailingList.id).limit(1).correlate(Subscriber).scalar_subquery())


def readers_by_language(session: Session, broadcast: Broadcast) -> dict[str | None, int]:
    """{the reader's language tag (None: neither theirs nor their list's): how many}."""
    condition = audience_condition(session, broadcast)
    if condition is None:
        return {}
    language = func.coalesce(func.nullif(Subscriber.locale, ""),
                             _list_language(session, broadcast)).label("language")
    rows = session.execute(select(language, func.count()).select_from(Subscriber)
                           .where(condition).group_by(language))
    counted: dict[str | None, int] = {}
    for tag, count in rows:
        counted[tag or None] = counted.get(tag or None, 0) + count
    return counted


def readers_per_version(session: Session, broadcast: Broadcast) -> list[VersionCount]:
    """Each version with how many readers get it: the written versions in their order, then
    the default version. Empty when the broadcast has no versions."""
    versions = [v["locale"] for v in broadcast.versions or []]
    if not versions:
        return []
    default_locale = get_settings(session).default_language or "en"
    per_version = dict.fromkeys(versions, 0)
    default = 0
    for tag, count in readers_by_language(session, broadcast).items():
        chosen = version_for(tag or default_locale, versions)
        if chosen is None:
            default += count
        else:
            per_version[chosen] += count
    return ([VersionCount(tag, False, n) for tag, n in per_version.items()]
            + [VersionCount(default_locale, True, default)])
