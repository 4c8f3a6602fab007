"""At each reader's own hour: "send at 09:00 in each reader's time zone".

A reader may have a time zone (`Subscriber.timezone`, an IANA name: `clean_timezone`). At
Send a broadcast with `send_at_local` ("HH:MM": `clean_local_time`) gets, for each zone its
readers have and for the owner's (readers without one), the next moment within 24 hours at
which it is that time there (`due_times`, kept on the broadcast as `local_due`). The
snapshot writes each reader's row with that moment as its `next_attempt_at`, which the
worker's claim already honours (a row is claimed once it is due), so the copies leave as each
zone's hour comes: still paced, in one broadcast, with one progress bar (`waiting`: what is
waiting for which hour).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from sqlalchemy import case, func, literal, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from broadside.core.errors import ValidationError
from broadside.core.i18n import _
from broadside.core.models import Delivery, Subscriber
from broadside.core.models.sending import DeliveryStatus

_HH_MM = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")
OWNER = ""  # the key of `local_due` for readers without a time zone of their own


@lru_cache(maxsize=1)
def known_zones() -> frozenset[str]:
    """The IANA time zone names this machine's tz database knows."""
    return frozenset(available_timezones())


def clean_timezone(value: Any, *, field: str = "timezone") -> str | None:
    """A reader's time zone as stored: an IANA name this machine knows ("Europe/Berlin"), in
    its canonical spelling; None for none (None or blank). Raises ValidationError naming the
    value otherwise."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or len(value) > 64:
        raise ValidationError(_("The time zone must be a name such as Europe/Berlin."),
                              field=field)
    name = value.strip()
    zones = known_zones()
    if name not in zones:
        folded = {zone.lower(): zone for zone in zones}
        name = folded.get(name.lower(), "")
    if not name:
        raise ValidationError(_("“%(zone)s” is not a time zone this server knows (such as "
                                "Europe/Berlin or America/New_York).", zone=value.strip()[:64]),
                              field=field)
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValidationError(_("“%(zone)s” is not a time zone this server knows (such as "
                                "Europe/Berlin or America/New_York).", zone=name),
                              field=field) from exc
    return name


def clean_local_time(value: Any, *, field: str = "send_at_local") -> str | None:
    """"HH:MM" (24-hour) as stored; None for none. Raises ValidationError otherwise."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or not _HH_MM.fullmatch(value.strip()):
        raise ValidationError(_("The time must be written as HH:MM, from 00:00 to 23:59."),
                              field=field)
    return value.strip()


def next_local(at: str, zone: ZoneInfo, now: datetime) -> datetime:
    """The first moment at or after `now` (naive UTC) at which it is `at` in `zone`, as naive
    UTC: within the next 24 hours. A time the zone skips (a spring-forward gap) is read as
    the clock reads it just after; a repeated one (autumn) is its first occurrence."""
    hour, minute = (int(part) for part in at.split(":"))
    local_now = now.replace(tzinfo=UTC).astimezone(zone)
    for days in (0, 1, 2):
        day = (local_now + timedelta(days=days)).date()
        moment = datetime.combine(day, time(hour, minute), tzinfo=zone)
        # Round trip through UTC: a nonexistent wall time lands on the real one after it.
        utc = moment.astimezone(UTC).replace(tzinfo=None)
        if utc >= now.replace(microsecond=0):
            return utc
    raise AssertionError("no local time within two days")  # pragma: no cover


def due_times(session: Session, at: str, now: datetime, owner: ZoneInfo) -> dict[str, str]:
    """At Send: each time zone the readers have, and the owner's (key `OWNER`), with the
    moment (naive UTC, ISO) their copies are due."""
    zones = session.scalars(select(Subscriber.timezone).where(Subscriber.timezone.is_not(None))
                            .distinct()).all()
    due = {OWNER: next_local(at, owner, now).isoformat()}
    for name in zones:
        if name is None:
            continue
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            continue  # a name this machine no longer knows: the owner's hour
        due[name] = next_local(at, zone, now).isoformat()
    return due


def due_expression(local_due: dict[str, str] | None) -> ColumnElement[Any] | None:
    """The snapshot's `next_attempt_at` for a reader (correlated on `Subscriber`): their zone's
    moment, else the owner's. None when the broadcast sends to everyone at once."""
    if not local_due:
        return None
    owner = datetime.fromisoformat(local_due[OWNER])
    whens = {name: datetime.fromisoformat(moment) for name, moment in local_due.items()
             if name != OWNER}
    if not whens:
        return literal(owner, Delivery.next_attempt_at.type)
    return case(
        {name: literal(moment, Delivery.next_attempt_at.type) for name, moment in whens.items()},
        value=Subscriber.timezone,
        else_=literal(owner, Delivery.next_attempt_at.type),
    )


def waiting(session: Session, broadcast_id: int, now: datetime) -> list[tuple[datetime, int]]:
    """What is waiting for which hour: the pending copies not yet due, by the moment (naive
    UTC) they are due, earliest first. Retries waiting for their next attempt are not in it
    (their attempts are above 0)."""
    rows = session.execute(
        select(Delivery.next_attempt_at, func.count())
        .where(Delivery.broadcast_id == broadcast_id,
               Delivery.status == DeliveryStatus.PENDING.value,
               Delivery.attempts == 0, Delivery.next_attempt_at > now)
        .group_by(Delivery.next_attempt_at).order_by(Delivery.next_attempt_at)).all()
    return [(moment, int(count)) for moment, count in rows if moment is not None]
