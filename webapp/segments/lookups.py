"""What the segments pages show beside the rules, in their words: the choices in the builder's
selects (and whether its engagement conditions can be offered) and the names in the readable
summaries, read through `broadside.segments.lookups`."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.drafts import list_options
from broadside.core.models import Broadcast
from broadside.segments import lookups
from webapp.segments.builder import BROADCAST_ROWS, Box
from webapp.templating import local_time


@dataclasses.dataclass(frozen=True)
class Choices:
    lists: list[tuple[int, str]]
    broadcasts: list[tuple[int, str]]
    attribute_names: list[str]
    # Engagement conditions: the broadcasts sent with per-person tracking, and whether any
    # list tracks per person (if none does, the builder offers those conditions disabled).
    tracked_broadcasts: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    per_person: bool = False


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


def _broadcast_label(broadcast: Broadcast) -> str:
    when = broadcast.started_at or broadcast.queued_at or broadcast.created_at
    return f"{broadcast.subject or '(no subject)'} ({local_time(when, '%Y-%m-%d')})"


def _referenced_broadcasts(box: Box) -> set[int]:
    ids: set[int] = set()
    for item in box.items:
        if isinstance(item, Box):
            ids |= _referenced_broadcasts(item)
        elif item.field in BROADCAST_ROWS and re.fullmatch(r"[0-9]{1,19}", item.value.strip()):
            ids.add(int(item.value))
    return ids


def choices(session: Session, tree: Box, *, attribute_names: bool = True) -> Choices:
    """The builder's choices: every list, the newest broadcasts that started sending (and any
    other broadcast the rules name), and (unless not wanted) attribute names."""
    named = _referenced_broadcasts(tree)
    started = lookups.started_broadcasts(session, also=named)
    tracked = lookups.tracked_broadcasts(session, also=named)
    return Choices(lists=list_options(session),
                   broadcasts=[(b.id, _broadcast_label(b)) for b in started],
                   attribute_names=lookups.recent_attribute_names(session) if attribute_names else [],
                   tracked_broadcasts=[(b.id, _broadcast_label(b)) for b in tracked],
                   per_person=lookups.any_list_tracks_people(session))


def names(session: Session, list_ids: Iterable[int], broadcast_ids: Iterable[int]) -> Names:
    """Names of the lists and subjects of the broadcasts some rules mention."""
    return Names(lookups.list_names(session, list_ids),
                 lookups.broadcast_subjects(session, broadcast_ids))
