"""Numbers from URLs, bounded to what the database's integer columns hold.

An id beyond 2**31 - 1 made SQLite and PostgreSQL raise, so the page answered 500. Path
segments go through `DatabaseIdConverter` (registered as `<int:...>`), query strings through
`int_arg`; a number out of range is treated like a missing one by the pages, and refused with
a message by the API (`int_arg(..., strict=True)`).

The converter bounds ids in its regular expression, not in `to_python`: Werkzeug checks a
rule's methods before converting its values, so a bound in `to_python` let the GET rule of a
path refuse the method first and the PUT rule refuse the value second, and an out-of-range
id answered 405 (wrongly naming GET as allowed) where GET answered 404. Matched by the
pattern, a number out of range matches no rule of any method: 404 for every method.
"""

from __future__ import annotations

from flask import request
from werkzeug.routing import IntegerConverter

from broadside.core.errors import ValidationError

MAX_DATABASE_ID = 2**31 - 1


def digits_up_to(bound: int) -> str:
    """A regular expression (no capturing groups) for the decimal numbers 0..`bound`, with
    any leading zeros: `digits_up_to(253)` is `0*(?:\\d{1,2}|1\\d{2}|2[0-4]\\d|25[0-3])`."""
    text = str(bound)
    shorter = [rf"\d{{1,{len(text) - 1}}}"] if len(text) > 1 else []
    same_length = []
    for at, digit in enumerate(text):
        low = "1" if at == 0 else "0"
        rest = len(text) - at - 1
        if int(digit) > int(low):
            below = low if int(digit) - 1 == int(low) else f"[{low}-{int(digit) - 1}]"
            same_length.append(text[:at] + below + (rf"\d{{{rest}}}" if rest else ""))
    same_length.append(text)
    if len(text) == 1:  # one digit: 0..bound
        return f"0*[0-{text}]"
    return "0*(?:" + "|".join(shorter + same_length) + ")"


class DatabaseIdConverter(IntegerConverter):
    """`<int:...>`: a whole number from 0 to MAX_DATABASE_ID, or no match at all."""

    regex = digits_up_to(MAX_DATABASE_ID)

    def __init__(self, map, *args, **kwargs) -> None:
        kwargs.setdefault("max", MAX_DATABASE_ID)
        super().__init__(map, *args, **kwargs)


def int_arg(name: str, default: int | None = None, *, minimum: int = 0,
            maximum: int = MAX_DATABASE_ID, strict: bool = False) -> int | None:
    """The query-string parameter `name` as a whole number in [minimum, maximum]; `default`
    when it is absent, or (unless `strict`) not such a number."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    value = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 10 else None
    if value is not None and minimum <= value <= maximum:
        return value
    if strict:
        raise ValidationError(f"'{name}' must be a whole number from {minimum} to {maximum}.")
    return default
