"""Reads the segments pages need beside `service`: the attribute names a rule may name, the
broadcasts a "received" rule may name, the names of the lists and broadcasts some rules
mention, the broadcasts an engagement rule may name (sent with per-person tracking) and
whether any list tracks per person, and the broadcasts that use a segment.

Each is one bounded query. Attribute names come from the newest RECENT_PEOPLE subscribers
only: a hint for the owner's typing (a datalist), not a census, so it stays cheap on any list.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core.models import Broadcast, MailingList, Subscriber
from broadside.core.models.sending import BroadcastStatus
from broadside.segments.engagement import PER_PERSON
from broadside.segments.rules import MAX_KEY

RECENT_PEOPLE = 500
MAX_ATTRIBUTE_NAMES = 200
MAX_BROADCAST_CHOICES = 200
MAX_USED_BY = 100
# Broadcasts someone may have received: those that started sending.
STARTED = (BroadcastStatus.SENDING.value, BroadcastStatus.PAUSED.value,
           BroadcastStatus.SENT.value, BroadcastStatus.CANCELLED.value)


def recent_attribute_names(session: Session) -> list[str]:
    """Attribute names seen on the newest subscribers, sorted."""
    seen: set[str] = set()
    for attributes in session.scalars(
        select(Subscriber.attributes).order_by(Subscriber.id.desc()).limit(RECENT_PEOPLE)
    ):
        if isinstance(attributes, dict):
            seen.update(k for k in attributes if isinstance(k, str) and 0 < len(k) <= MAX_KEY)
    return sorted(seen, key=str.lower)[:MAX_ATTRIBUTE_NAMES]


def started_broadcasts(session: Session, also: Iterable[int] = ()) -> list[Broadcast]:
    """The newest MAX_BROADCAST_CHOICES broadcasts that started sending, newest first, then
    any broadcast among the ids `also` not already in them."""
    started = list(session.scalars(
        select(Broadcast).where(Broadcast.status.in_(STARTED))
        .order_by(Broadcast.id.desc()).limit(MAX_BROADCAST_CHOICES)
    ))
    missing = set(also) - {b.id for b in started}
    if missing:
        started += session.scalars(select(Broadcast).where(Broadcast.id.in_(missing)))
    return started


def tracked_broadcasts(session: Session, also: Iterable[int] = ()) -> list[Broadcast]:
    """The newest MAX_BROADCAST_CHOICES broadcasts that started sending with per-person
    tracking (the only ones whose opens and clicks name anyone), then any among `also`."""
    tracked = list(session.scalars(
        select(Broadcast).where(Broadcast.status.in_(STARTED), Broadcast.tracking == PER_PERSON)
        .order_by(Broadcast.id.desc()).limit(MAX_BROADCAST_CHOICES)
    ))
    missing = set(also) - {b.id for b in tracked}
    if missing:
        tracked += session.scalars(select(Broadcast).where(Broadcast.id.in_(missing)))
    return tracked


def any_list_tracks_people(session: Session) -> bool:
    """Whether any list has per-person tracking on (engagement conditions need one)."""
    return session.scalar(select(MailingList.id).where(MailingList.per_person_tracking.is_(True))
                          .limit(1)) is not None


def list_names(session: Session, list_ids: Iterable[int]) -> dict[int, str]:
    """The names of those of the lists that exist."""
    wanted = set(list_ids)
    if not wanted:
        return {}
    return dict(session.execute(
        select(MailingList.id, MailingList.name).where(MailingList.id.in_(wanted))).all())


def broadcast_subjects(session: Session, broadcast_ids: Iterable[int]) -> dict[int, str]:
    """The subjects of those of the broadcasts that exist."""
    wanted = set(broadcast_ids)
    if not wanted:
        return {}
    return dict(session.execute(
        select(Broadcast.id, Broadcast.subject).where(Broadcast.id.in_(wanted))).all())


def broadcasts_using(session: Session, segment_id: int) -> list[Broadcast]:
    """Broadcasts addressed to the segment, in any state, newest first."""
    return list(session.scalars(
        select(Broadcast).where(Broadcast.segment_id == segment_id)
        .order_by(Broadcast.id.desc()).limit(MAX_USED_BY)
    ))
