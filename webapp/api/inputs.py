"""Checking what an API client sent, before any domain function sees it.

Each refusal is a `ValidationError` (422) whose message names the field or parameter. Three
things are refused here that would otherwise go wrong further down:

- an unknown key in a body or an unknown query parameter: a typo (`"subjct"`, `?stauts=`)
  would otherwise be ignored, and a PATCH or a filter would quietly do nothing;
- an id that is not a whole number from 1 to 2**31 - 1: beyond that, SQLite and PostgreSQL
  raise instead of finding nothing (the same bound `webapp.params` puts on URL ids);
- a value of the wrong JSON type (the domain's cleaners expect text where text is due).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from flask import request

from broadside.core.errors import ValidationError
from webapp.params import MAX_DATABASE_ID, int_arg


def iso(moment: datetime | None) -> str | None:
    """A stored (naive UTC) moment as ISO 8601 with a Z, as the whole API writes times."""
    return moment.isoformat() + "Z" if moment else None


def _names(keys: Iterable[str]) -> str:
    return ", ".join(f"'{k}'" for k in keys)


def only_keys(data: dict[str, Any], allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    unknown = sorted(k for k in data if k not in allowed)
    if unknown:
        raise ValidationError(f"Unknown field {_names(unknown[:3])}; this request takes "
                              f"{_names(allowed)}.")


def require_keys(data: dict[str, Any], required: Iterable[str]) -> None:
    for key in required:
        if key not in data:
            raise ValidationError(f"'{key}' is required.")


def require_some(data: dict[str, Any], allowed: Iterable[str]) -> None:
    """A PATCH must change something: an empty one is almost always a client's mistake."""
    allowed = tuple(allowed)
    if not any(key in data for key in allowed):
        raise ValidationError(f"Nothing to change: give at least one of {_names(allowed)}.")


def is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_DATABASE_ID


def id_field(data: dict[str, Any], key: str) -> int | None:
    """`data[key]` as an id; None when absent or null."""
    value = data.get(key)
    if value is None:
        return None
    if not is_id(value):
        raise ValidationError(f"'{key}' must be an id: a whole number from 1 to {MAX_DATABASE_ID}.")
    return value


def text_field(data: dict[str, Any], key: str, *, non_empty: bool = False) -> str:
    value = data.get(key)
    if not isinstance(value, str) or (non_empty and not value.strip()):
        raise ValidationError(f"'{key}' must be a {'non-empty ' if non_empty else ''}string.")
    return value


def cap_hours_field(data: dict[str, Any], key: str = "skip_if_received_within_hours") -> int | None:
    """The frequency cap's type: a whole number or null (its range is the domain's to check)."""
    value = data.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValidationError(f"'{key}' must be a whole number of hours, or null.")
    return value


def only_query_args(allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    unknown = sorted(k for k in request.args if k not in allowed)
    if unknown:
        raise ValidationError(f"Unknown query parameter {_names(unknown[:3])}; this request takes "
                              f"{_names(allowed)}.")
    repeated = sorted(k for k in request.args if len(request.args.getlist(k)) > 1)
    if repeated:
        raise ValidationError(f"Give {_names(repeated[:1])} once.")


def query_id(name: str) -> int | None:
    """An id from the query string, or None when absent; anything else is refused."""
    return int_arg(name, None, minimum=1, strict=True)


def page_args(*, default_limit: int, max_limit: int, min_after: int = 0) -> tuple[int | None, int]:
    """`after` (a cursor: the `next` of the previous page) and `limit`, both checked."""
    after = int_arg("after", None, minimum=min_after, strict=True)
    limit = int_arg("limit", default_limit, minimum=1, maximum=max_limit, strict=True)
    assert limit is not None
    return after, limit
