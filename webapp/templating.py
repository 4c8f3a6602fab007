"""Helpers every template can call, registered once for the whole app (`register_templating`):
times in the owner's time zone, numbers and rates as the page's language writes them (`num`,
`percent`: "—" when there is nothing to divide by; counts in words are ngettext's), a
broadcast's audience in words, and subjects as a reader reads them (`as_read`: "Hello {{ name
}}" filled in with the newest person a send could reach, else the sample reader Alex, read
once per page).

Every time a page shows goes through `local_time` (a stored moment) or `epoch_time` (a time
Redis keeps), both `broadside.core.timeutil.local_format`: the owner's zone, named by one label
wherever a format says `%Z` (`zone_label()` alone names it in a column's heading). Pages
differ only in the format they pass: `local_time(moment)` is `2025-03-01 14:05`; `WITH_ZONE`
adds the zone (`2025-03-01 14:05 GMT`), `SYSTEM_TIME` seconds and the zone, and so on. No
template calls `strftime` itself (tests/webapp/test_times.py reads them all).
"""

from __future__ import annotations

import functools
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from babel.dates import format_date
from babel.numbers import format_decimal, format_percent
from flask import Flask, g
from jinja2 import Template
from sqlalchemy.exc import SQLAlchemyError

from broadside.audience.subscribers.service import newest_reachable
from broadside.core.errors import ValidationError, shown
from broadside.core.i18n import current_locale
from broadside.core.site_settings import owner_zone as settings_zone
from broadside.core.timeutil import epoch_to_stored, in_zone, local_format, utcnow
from broadside.core.timeutil import zone_label as label_of
from broadside.mail.merge_fields import compile_template
from broadside.mail.merge_sandbox import TEXT_ENV, render_bounded
from broadside.mail.rendering import MAX_SUBJECT_CHARS, RENDER_ERRORS
from webapp.extensions import db

DEFAULT_TIME = "%Y-%m-%d %H:%M"
SYSTEM_TIME = "%Y-%m-%d %H:%M:%S %Z"
WITH_ZONE = "%Y-%m-%d %H:%M %Z"


def owner_zone() -> ZoneInfo:
    """The owner's time zone (Settings), read once per request."""
    if "owner_zone" not in g:
        try:
            g.owner_zone = settings_zone(db.session)
        except SQLAlchemyError:  # a page about an outage still renders its times
            db.session.rollback()
            g.owner_zone = ZoneInfo("UTC")
    return g.owner_zone


def local_time(moment: datetime | None, fmt: str = DEFAULT_TIME) -> str:
    """A stored (naive UTC) time in the owner's time zone; "" for None."""
    if moment is None:
        return ""
    return local_format(moment, owner_zone(), fmt)


def epoch_time(epoch: float | None, fmt: str = SYSTEM_TIME) -> str:
    """Epoch seconds (Redis keeps times so) in the owner's time zone; "" for None."""
    if epoch is None:
        return ""
    return local_format(epoch_to_stored(epoch), owner_zone(), fmt)


def zone_label(moment: datetime | None = None) -> str:
    """The owner's zone as `%Z` writes it, at a stored moment (now by default): for a column's
    heading, "When (GMT)"."""
    return label_of(in_zone(moment or utcnow(), owner_zone()))


def day_label(day: date, weekday: bool = False) -> str:
    """A day of the owner's (already in their zone): `3 Dec`, or `Wed 3 Dec`."""
    return format_date(day, "EEE d MMM" if weekday else "d MMM", locale=current_locale())


def num(value: float | None) -> str:
    """A number as the page's language writes it: 1,234 (English), 1.234 (German)."""
    return format_decimal(value or 0, locale=current_locale())


def percent(part: float | None, whole: float | None) -> str:
    """`part` of `whole` for a page: "41.2%", "5%", "<0.1%"; "—" when there is nothing to
    divide by."""
    if not whole:
        return "—"
    value = 100 * (part or 0) / whole
    if 0 < value < 0.05:
        return "<" + _percent(0.1)
    if 99.95 <= value < 100:  # not everyone: never rounded up to all
        return ">" + _percent(99.9)
    return _percent(round(value, 1))


def _percent(value: float) -> str:
    """41.2% (English), 41,2 % (German, French): Babel's, for the page's language."""
    return format_percent(value / 100, "#,##0.#%", locale=current_locale())


def audience_words(broadcast: Any, name: str | None) -> str:
    """Who a broadcast is for, in words: `name` (its list's, or "segment NAME"), else what
    became of it. A segment's rules are kept from the press (`audience_rules`), so a sent
    broadcast whose segment is gone still knows it had one; a broadcast pressed with neither
    (its snapshot reached someone) went to a list; a draft may have none chosen (a deleted
    list or segment leaves its drafts without one)."""
    if name:
        return name
    if broadcast.segment_id is not None or broadcast.audience_rules is not None:
        return "(segment deleted)"
    if broadcast.list_id is not None or broadcast.snapshot_until:
        return "(list deleted)"
    if broadcast.status == "draft":
        return "(no audience chosen)"
    return "(list or segment deleted)"


SAMPLE_READER: dict[str, Any] = {"email": "alex@example.com", "name": "Alex", "attributes": {}}


def sample_reader() -> dict[str, Any]:
    """Whose details fill the merge fields of the subjects a page shows: the newest person a
    send could reach now, else the sample reader Alex. Read once per request, and only by a
    page that shows a subject with merge fields."""
    if "sample_reader" not in g:
        try:
            person = newest_reachable(db.session)
        except SQLAlchemyError:  # a page about an outage still shows its subjects
            db.session.rollback()
            person = None
        g.sample_reader = SAMPLE_READER if person is None else {
            "email": person.email, "name": person.name or "",
            "attributes": dict(person.attributes or {})}
    return g.sample_reader


@functools.lru_cache(maxsize=256)
def _subject_template(source: str) -> Template:
    return compile_template(TEXT_ENV, source, "subject")


def as_read(subject: str | None, person: Any = None) -> str:
    """A subject as the sample reader reads it in their inbox ("Hello {{ name }}" -> "Hello
    Ana"), or as `person` (a subscriber: a page about one person shows what they read), filled
    in by the sandbox the worker uses. The source itself when it has no merge fields, when
    they cannot be filled in (a broken field never fails the page), or when they fill in to
    nothing."""
    source = subject or ""
    if "{" not in source:
        return source
    reader = sample_reader() if person is None else {
        "email": person.email, "name": person.name or "", "attributes": dict(person.attributes or {})}
    context = {**reader, "unsubscribe_url": "#", "view_url": ""}
    try:
        text = render_bounded(_subject_template(source), context, limit=MAX_SUBJECT_CHARS,
                              what="subject")
    except (ValidationError, RecursionError, MemoryError, *RENDER_ERRORS):
        return source
    return " ".join(text.split()) or source


def register_templating(app: Flask) -> None:
    # `|shown`: a recorded reason (a delivery's, a pause's) never shows Python's text.
    app.jinja_env.filters["shown"] = shown
    @app.context_processor
    def time_and_numbers() -> dict[str, Any]:
        return {"local_time": local_time, "epoch_time": epoch_time, "zone_label": zone_label,
                "day_label": day_label, "num": num, "SYSTEM_TIME": SYSTEM_TIME, "WITH_ZONE": WITH_ZONE,
                "audience_words": audience_words, "as_read": as_read, "percent": percent}
