"""Sending at each reader's own hour, as the owner chooses it and reads it before pressing Send.

A draft may say "send at 09:00 in each reader's time zone" (`Broadcast.send_at_local`,
"HH:MM", checked by `local_time.clean_local_time`; None: everyone at once). `choose` is its
one writer before the press (the send page's card and the API), guarded by the draft state
like every draft edit. `zone_plan` is what the send page says will happen: the audience
counted by time zone (one GROUP BY, kept to the TOP_ZONES largest zones plus the rest as
"others"), each with the moment it is due, earliest first; readers without a zone, or with one
this machine no longer knows, get the owner's. At the press `local_time.due_times` fixes these
moments for good (`Broadcast.local_due`); an A/B test sends at one time, so the two together are
refused there (`CONFLICT_WITH_AB_TEST` is the words the page shows beforehand).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import service
from broadside.campaigns.broadcasts.audience import audience_condition
from broadside.campaigns.broadcasts.local_time import clean_local_time, next_local
from broadside.core.db import rowcount
from broadside.core.errors import Conflict
from broadside.core.i18n import _, _l
from broadside.core.models import Broadcast, Subscriber
from broadside.core.models.sending import BroadcastStatus

TOP_ZONES = 10
CONFLICT_WITH_AB_TEST = _l("An A/B test sends at one time: choose one.")


def choose(session: Session, broadcast_id: int, value: Any) -> Broadcast:
    """A draft's "send at HH:MM in each reader's time zone" (None or "": at once). A
    ValidationError naming `send_at_local` for a time that is not HH:MM; Conflict once the
    broadcast is no longer a draft (what was pressed is frozen)."""
    at = clean_local_time(value)
    broadcast = service.get_broadcast(session, broadcast_id)
    changed = session.execute(
        update(Broadcast)
        .where(Broadcast.id == broadcast_id, Broadcast.status == BroadcastStatus.DRAFT.value)
        .values(send_at_local=at).execution_options(synchronize_session=False))
    if not rowcount(changed):
        session.rollback()
        raise Conflict(_("This broadcast has been sent and can no longer be edited; "
                         "duplicate it instead."))
    session.commit()
    session.refresh(broadcast)
    return broadcast


@dataclass(frozen=True)
class ZoneGroup:
    zone: str | None  # an IANA name; None: readers without one (the owner's hour)
    readers: int
    due: datetime  # naive UTC: when their copies leave


@dataclass(frozen=True)
class ZonePlan:
    at: str  # "09:00"
    owner_zone: str
    groups: list[ZoneGroup]  # the largest zones and the owner's, earliest first
    others: int  # readers in the remaining zones
    other_zones: int  # how many zones they are
    readers: int  # everyone the broadcast would reach now

    @property
    def last_due(self) -> datetime | None:
        return max((group.due for group in self.groups), default=None)


def zone_plan(session: Session, broadcast: Broadcast, owner: ZoneInfo, now: datetime,
              *, top: int = TOP_ZONES) -> ZonePlan | None:
    """What "at `send_at_local` in each reader's time zone" would do if pressed at `now`
    (naive UTC): None when the broadcast sends at once or has no audience."""
    at = broadcast.send_at_local
    condition = audience_condition(session, broadcast)
    if not at or condition is None:
        return None
    counted: dict[str | None, int] = {}
    for name, count in session.execute(
            select(Subscriber.timezone, func.count()).select_from(Subscriber)
            .where(condition).group_by(Subscriber.timezone)):
        zone = _known(name)
        counted[zone] = counted.get(zone, 0) + count
    own = counted.pop(None, 0)
    zoned = {name: count for name, count in counted.items() if name is not None}
    largest = sorted(zoned.items(), key=lambda item: (-item[1], item[0]))
    shown, rest = largest[:top], largest[top:]
    groups = [ZoneGroup(name, count, next_local(at, ZoneInfo(name), now))
              for name, count in shown]
    if own:
        groups.append(ZoneGroup(None, own, next_local(at, owner, now)))
    groups.sort(key=lambda group: (group.due, group.zone or ""))
    others = sum(count for _name, count in rest)
    return ZonePlan(at, owner.key, groups, others, len(rest),
                    own + sum(zoned.values()))


def _known(name: str | None) -> str | None:
    """The zone as the send reads it (`local_time.due_times`): one this machine does not
    know is the owner's hour, like none."""
    if not name:
        return None
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
    return name
