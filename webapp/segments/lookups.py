"""Reads the segments pages need beside the domain's services: the choices in the builder's
selects, the names in the readable summaries, and the broadcasts that use a segment.

Each is one bounded query. Attribute names come from the newest RECENT_PEOPLE subscribers
only: a hint for the owner's typing (a datalist), not a census, so it stays cheap on any list.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.drafts import list_options
from broadside.core.models import Broadcast, MailingList, Subscriber
from broadside.core.models.sending import BroadcastStatus
from broadside.segments.rules import MAX_KEY
from webapp.segments.builder import Box
from webapp.templating import local_time

RECENT_PEOPLE = 500
MAX_ATTRIBUTE_NAMES = 200
MAX_BROADCAST_CHOICES = 200
MAX_USED_BY = 100
# Broadcasts someone may have received: those that started sending.
STARTED = (BroadcastStatus.SENDING.value, BroadcastStatus.PAUSED.value,
           BroadcastStatus.SENT.value, BroadcastStatus.CANCELLED.value)


@dataclasses.dataclass(frozen=True)
class Choices:
    lists: list[tuple[int, str]]
    broadcasts: list[tuple[int, str]]
    attribute_names: list[str]


@dataclasses.dataclass(frozen=True)
class Names:
    lists: dict[int, str]
    broadcasts: dict[int, str]

    def list_name(self, list_id: int) -> str:
        return self.lists.get(list_id) or f"list #{list_id} (deleted)"

    def broadcast_subject(self, broadcast_id: int) -> str:
        if broadcast_id not in self.broadcasts:
            return f"broadcast #{broadcast_id} (deleted)"
        return self.broadcasts[broadcast_id] or "(no subject)"


def recent_attribute_names(session: Session) -> list[str]:
    """Attribute names seen on the newest subscribers, sorted."""
    seen: set[str] = set()
    for attributes in session.scalars(
        select(Subscriber.attributes).order_by(Subscriber.id.desc()).limit(RECENT_PEOPLE)
    ):
        if isinstance(attributes, dict):
            seen.update(k for k in attributes if isinstance(k, str) and 0 < len(k) <= MAX_KEY)
    return sorted(seen, key=str.lower)[:MAX_ATTRIBUTE_NAMES]


def _broadcast_label(broadcast: Broadcast) -> str:
    when = broadcast.started_at or broadcast.queued_at or broadcast.created_at
    return f"{broadcast.subject or '(no subject)'} ({local_time(when, '%Y-%m-%d')})"


def _referenced_broadcasts(box: Box) -> set[int]:
    ids: set[int] = set()
    for item in box.items:
        if isinstance(item, Box):
            ids |= _referenced_broadcasts(item)
        elif item.field == "received" and re.fullmatch(r"[0-9]{1,19}", item.value.strip()):
            ids.add(int(item.value))
    return ids


def choices(session: Session, tree: Box, *, attribute_names: bool = True) -> Choices:
    """The builder's choices: every list, the newest broadcasts that started sending (and any
    other broadcast the rules name), and (unless not wanted) attribute names."""
    started = list(session.scalars(
        select(Broadcast).where(Broadcast.status.in_(STARTED))
        .order_by(Broadcast.id.desc()).limit(MAX_BROADCAST_CHOICES)
    ))
    missing = _referenced_broadcasts(tree) - {b.id for b in started}
    if missing:
        started += session.scalars(select(Broadcast).where(Broadcast.id.in_(missing)))
    return Choices(lists=list_options(session),
                   broadcasts=[(b.id, _broadcast_label(b)) for b in started],
                   attribute_names=recent_attribute_names(session) if attribute_names else [])


def names(session: Session, list_ids: Iterable[int], broadcast_ids: Iterable[int]) -> Names:
    """Names of the lists and subjects of the broadcasts some rules mention."""
    wanted_lists, wanted_broadcasts = set(list_ids), set(broadcast_ids)
    lists: dict[int, str] = {}
    broadcasts: dict[int, str] = {}
    if wanted_lists:
        lists.update(session.execute(
            select(MailingList.id, MailingList.name).where(MailingList.id.in_(wanted_lists))).all())
    if wanted_broadcasts:
        broadcasts.update(session.execute(
            select(Broadcast.id, Broadcast.subject).where(Broadcast.id.in_(wanted_broadcasts))).all())
    return Names(lists, broadcasts)


def broadcasts_using(session: Session, segment_id: int) -> list[Broadcast]:
    """Broadcasts addressed to the segment, in any state, newest first."""
    return list(session.scalars(
        select(Broadcast).where(Broadcast.segment_id == segment_id)
        .order_by(Broadcast.id.desc()).limit(MAX_USED_BY)
    ))
