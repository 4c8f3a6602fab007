"""A reader's time zone (`Subscriber.timezone`): an IANA name such as "Asia/Tokyo", or None
(a broadcast "at 09:00 in each reader's time zone" gives them the owner's hour). The check is
`broadside.campaigns.broadcasts.local_time.clean_timezone`, shared with the send; here are the
audience's ways in: the owner's and the API's (`clean_reader_timezone`: a bad name is a
ValidationError naming the field), the sign-up form's browser (`browser_timezone`: a bad or
missing name is simply nothing, never an error for the reader), and the choices the pages
offer (`zone_groups`: the names by region).
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from broadside.campaigns.broadcasts.local_time import clean_timezone, known_zones
from broadside.core.errors import ValidationError
from broadside.core.i18n import _l
from broadside.core.timeutil import local_format

FIELD = "timezone"
# The regions a select groups the zones by, in the owner's words; the tz database's other
# names (US/Eastern, Etc/GMT+5, EST5EDT...) are aliases and old spellings, still accepted when
# typed or imported, not offered.
REGIONS = {"Africa": _l("Africa"), "America": _l("America"), "Antarctica": _l("Antarctica"),
           "Arctic": _l("Arctic"), "Asia": _l("Asia"), "Atlantic": _l("Atlantic"),
           "Australia": _l("Australia"), "Europe": _l("Europe"), "Indian": _l("Indian Ocean"),
           "Pacific": _l("Pacific")}


def clean_reader_timezone(value: Any) -> str | None:
    """The zone as stored (its canonical spelling), None for none (None or blank); a
    ValidationError naming the field `timezone` otherwise."""
    return clean_timezone(value, field=FIELD)


def browser_timezone(value: Any) -> str | None:
    """What a browser said (`Intl.DateTimeFormat().resolvedOptions().timeZone`), as stored,
    or None when it said nothing this server knows: the reader is never refused for it."""
    try:
        return clean_timezone(value if isinstance(value, str) else None, field=FIELD)
    except ValidationError:
        return None


@lru_cache(maxsize=1)
def _grouped() -> tuple[tuple[str, tuple[str, ...]], ...]:
    by_region: dict[str, list[str]] = {region: [] for region in REGIONS}
    for name in known_zones():
        region = name.split("/", 1)[0]
        if "/" in name and region in by_region:
            by_region[region].append(name)
    return tuple((region, tuple(sorted(names))) for region, names in by_region.items() if names)


def zone_groups(current: str | None = None) -> list[tuple[str, list[str]]]:
    """(region in the reader's or owner's language, its zone names) in region order, with
    "UTC" first on its own; a `current` zone not offered (an alias) is kept in its own group,
    so a page that shows it never drops it on the next save."""
    groups = [(str(REGIONS[region]), list(names)) for region, names in _grouped()]
    groups.insert(0, ("UTC", ["UTC"]))
    if current and not any(current in names for _region, names in groups):
        groups.insert(0, (current, [current]))
    return groups


def clock_in(name: str | None, moment: datetime) -> str | None:
    """A stored (naive UTC) moment as the clock reads in zone `name` ("01:00 JST"); None for
    no zone, or one this machine no longer knows."""
    try:
        return local_format(moment, ZoneInfo(name), "%H:%M %Z") if name else None
    except (ZoneInfoNotFoundError, ValueError):
        return None
