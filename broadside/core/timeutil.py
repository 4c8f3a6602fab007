"""One clock for the whole app: naive UTC datetimes, stored the same way on SQLite and PostgreSQL.

And one way to show a time: `local_format` turns a stored moment into the owner's time zone,
and writes that zone with `zone_label` wherever a format says `%Z`, so every page names the
zone alike (an owner in London reads "GMT" everywhere in winter, never "UTC" on one page and
"GMT" on the next). Pages reach it through `webapp/templating.py`; nothing else formats times.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from babel.dates import format_datetime, get_date_format

from broadside.core.i18n import DEFAULT_LOCALE, current_locale


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
    """A stored (naive UTC) moment in `zone`, in a strftime format; `%Z` is `zone_label`.

    In the language being spoken (broadside.core.i18n): English as the format says; another
    language through Babel, with the names of months and days in that language and an ISO
    date (`%Y-%m-%d`) written as the language writes dates (`01.03.2025`, `1 mars 2025`)."""
    local = in_zone(moment, zone)
    locale = current_locale()
    if locale != DEFAULT_LOCALE:
        return format_datetime(local, _cldr_pattern(fmt, locale, zone_label(local)), locale=locale)
    if "%Z" in fmt:
        fmt = fmt.replace("%Z", zone_label(local).replace("%", "%%"))
    return local.strftime(fmt)


_CLDR = {"%Y": "yyyy", "%m": "MM", "%d": "dd", "%H": "HH", "%M": "mm", "%S": "ss", "%b": "MMM",
         "%B": "MMMM", "%a": "EEE", "%A": "EEEE", "%e": "d", "%%": "%"}


def _cldr_pattern(fmt: str, locale: str, zone: str) -> str:
    """A strftime format as a CLDR pattern for Babel; literal text quoted, as CLDR wants."""
    date_pattern = get_date_format("medium", locale=locale).pattern
    pieces = []
    for piece in re.split(r"(%Y-%m-%d|%[A-Za-z%])", fmt):
        if piece == "%Y-%m-%d":
            pieces.append(date_pattern)
        elif piece == "%Z":
            pieces.append("'" + zone.replace("'", "''") + "'")
        elif piece in _CLDR:
            pieces.append(_CLDR[piece])
        elif piece:
            pieces.append("'" + piece.replace("'", "''") + "'" if re.search(r"[A-Za-z']", piece)
                          else piece)
    return "".join(pieces)


def epoch_to_stored(epoch: float) -> datetime:
    """Epoch seconds (Redis keeps times so) as a stored moment (naive UTC)."""
    return datetime.fromtimestamp(epoch, UTC).replace(tzinfo=None)
