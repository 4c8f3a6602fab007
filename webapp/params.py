"""Numbers from URLs, bounded to what the database's integer columns hold.

An id beyond 2**31 - 1 made SQLite and PostgreSQL raise, so the page answered 500. Path
segments go through `DatabaseIdConverter` (registered as `<int:...>`), query strings through
`int_arg`; a number out of range is treated like a missing one by the pages, and refused with
a message by the API (`int_arg(..., strict=True)`).
"""

from __future__ import annotations

from flask import request
from werkzeug.routing import IntegerConverter

from broadside.core.errors import ValidationError

MAX_DATABASE_ID = 2**31 - 1


class DatabaseIdConverter(IntegerConverter):
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
