"""A step's delay: an ISO 8601 duration in weeks, days, hours, minutes and seconds.

`PT0S` (at once), `PT12H`, `P3D`, `P1DT6H`, `P2W`. Years and months are refused: their length
varies, and a welcome series is planned in days. At most `MAX_DAYS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from broadside.core.errors import ValidationError
from broadside.core.i18n import _, ngettext

MAX_DAYS = 366
_DURATION = re.compile(
    r"^P(?:(?P<weeks>\d{1,3})W)?(?:(?P<days>\d{1,4})D)?"
    r"(?:T(?:(?P<hours>\d{1,5})H)?(?:(?P<minutes>\d{1,6})M)?(?:(?P<seconds>\d{1,8})S)?)?$"
)
_SECONDS = {"weeks": 604800, "days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}
EXAMPLES = "PT0S (at once), PT12H (12 hours), P3D (3 days) or P1DT6H"


def parse_duration(value: object, where: str = "The delay") -> int:
    """Seconds in an ISO 8601 duration, or a ValidationError that says how to write one."""
    if not isinstance(value, str):
        raise ValidationError(f"{where} must be an ISO 8601 duration such as {EXAMPLES}.")
    text = value.strip().upper()
    match = _DURATION.match(text)
    if match is None or text in ("P", "PT") or text.endswith("T"):
        if re.match(r"^P\d+[YM]", text):
            raise ValidationError(f"{where} '{value[:40]}' uses years or months, whose length varies: "
                                  "give it in days or weeks instead, e.g. P30D.")
        raise ValidationError(f"{where} '{value[:40]}' is not a duration: write it like {EXAMPLES}.")
    seconds = sum(int(n) * _SECONDS[k] for k, n in match.groupdict().items() if n)
    if seconds > MAX_DAYS * 86400:
        raise ValidationError(f"{where} '{value[:40]}' is longer than {MAX_DAYS} days.")
    return seconds


def describe(seconds: int) -> str:
    """'at once', '3 days', '1 day 6 hours', '45 minutes'."""
    if seconds <= 0:
        return _("at once")
    parts = []
    for label, size in (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60),
                        ("second", 1)):
        if label == "week" and seconds % 604800:
            continue  # 10 days reads better than 1 week 3 days
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(_UNITS[label](count))
    return " ".join(parts[:2])


# Each unit counted in the owner's language ("3 days", "3 Tage").
_UNITS: dict[str, Callable[[int], str]] = {
    "week": lambda n: ngettext("%(num)s week", "%(num)s weeks", n),
    "day": lambda n: ngettext("%(num)s day", "%(num)s days", n),
    "hour": lambda n: ngettext("%(num)s hour", "%(num)s hours", n),
    "minute": lambda n: ngettext("%(num)s minute", "%(num)s minutes", n),
    "second": lambda n: ngettext("%(num)s second", "%(num)s seconds", n),
}
