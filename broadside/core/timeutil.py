"""One clock for the whole app: naive UTC datetimes, stored the same way on SQLite and PostgreSQL.

And one way to show a time: `local_format` turns a stored moment into the owner's time zone,
and writes that zone with `zone_label` wherever a format says `%Z`, so every page names the
zone alike (an owner in London reads "GMT" everywhere in winter, never "UTC" on one page and
"GMT" on the next). Pages reach it through `webapp/templating.py`; nothing else formats times.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def zone_label(moment: datetime) -> str:
    """The zone of an aware moment as pages write it: its abbreviation then (GMT, BST, CET,
    EST, IST, UTC), or its offset from UTC where the zone has none in letters (the tz
    database writes "-03" for São Paulo: we write UTC−3; Kathmandu's "+0545": UTC+5:45)."""
    name = moment.tzname() or ""
    if name[:1].isalpha():
        return name
    offset = moment.utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "−"
    hours, rest = divmod(abs(minutes), 60)
    return "UTC" if minutes == 0 else f"UTC{sign}{hours}" + (f":{rest:02d}" if rest else "")


def in_zone(moment: datetime, zone: ZoneInfo) -> datetime:
    """A stored (naive UTC) moment as an aware one in `zone`."""
    return moment.replace(tzinfo=UTC).astimezone(zone)


def local_format(moment: datetime, zone: ZoneInfo, fmt: str) -> str:
    """A stored (naive UTC) moment in `zone`, formatted with strftime; `%Z` is `zone_label`."""
    local = in_zone(moment, zone)
    if "%Z" in fmt:
        fmt = fmt.replace("%Z", zone_label(local).replace("%", "%%"))
    return local.strftime(fmt)


def epoch_to_stored(epoch: float) -> datetime:
    """Epoch seconds (Redis keeps times so) as a stored moment (naive UTC)."""
    return datetime.fromtimestamp(epoch, UTC).replace(tzinfo=None)
