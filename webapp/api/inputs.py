"""Checking what an API client sent, before any domain function sees it.

Each refusal is a `ValidationError` (422) whose message names the field or parameter. Three
things are refused here that would otherwise go wrong further down:

- an unknown key in a body or an unknown query parameter: a typo (`"subjct"`, `?stauts=`)
  would otherwise be ignored, and a PATCH or a filter would quietly do nothing;
- an id that is not a whole number from 1 to 2**31 - 1: beyond that, SQLite and PostgreSQL
  raise instead of finding nothing (the same bound `webapp.params` puts on URL ids);
- a value of the wrong JSON type (the domain's cleaners expect text where text is due).

Query parameters are declared, not looked for: a view names the ones it reads with
`@takes_query(...)`, and `check_query_parameters` (run before every API view) refuses any
other, so a new endpoint refuses `?stauts=` without remembering to. Paging is one rule,
`page_args`: `after` a whole number from 0, `limit` from 1 to the endpoint's maximum, else 422.

Numbers: JSON Schema counts `1.0` as an integer, so a client generated from the document may
send one. `whole_numbers` turns every integer-valued number of a body into an int before
any field is read; `1.5` stays a float and every integer field's check refuses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar

from flask import request

from broadside.core.errors import ValidationError
from webapp.params import MAX_DATABASE_ID, int_arg

View = TypeVar("View", bound=Callable[..., Any])


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


def null_only_for(data: dict[str, Any], nullable: Iterable[str] = (), *,
                  documented: Iterable[str] | None = None) -> None:
    """A null is a value only where the document says `null` is one (a key in `nullable`);
    elsewhere it was taken as "left out", which the document does not promise. For an open
    body (extra fields allowed and ignored), only its `documented` fields are judged: a null
    in a field the server never reads is ignored like any other value there
    (tests/webapp/test_api_document_rules.py holds each list to the document's properties)."""
    nullable = tuple(nullable)
    documented = None if documented is None else frozenset(documented)
    nulls = sorted(k for k, v in data.items() if v is None and k not in nullable
                   and (documented is None or k in documented))
    if nulls:
        raise ValidationError(f"'{nulls[0]}' cannot be null: give a value, or leave it out.",
                              field=nulls[0])


# The open bodies' documented fields (webapp/apidocs: ListInput, SubscriberInput, BroadcastInput).
LIST_FIELDS = ("name", "description")
SUBSCRIBER_FIELDS = ("email", "name", "attributes", "lists", "welcome", "locale", "timezone")
BROADCAST_FIELDS = ("subject", "body", "format", "preheader", "list_id", "segment_id",
                    "identity_id", "skip_if_received_within_hours", "codes", "attachments",
                    "versions", "ab_test")


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


def whole_numbers(value: Any) -> Any:
    """`value` (a parsed body) with every integer-valued float (`1.0`, `1e2`) as an int,
    walked without recursion (bodies may nest as deep as the parser allows)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    stack = [value] if isinstance(value, dict | list) else []
    while stack:
        node = stack.pop()
        keys = node.keys() if isinstance(node, dict) else range(len(node))
        for key in keys:
            item = node[key]
            if isinstance(item, float) and item.is_integer():
                node[key] = int(item)
            elif isinstance(item, dict | list):
                stack.append(item)
    return value


def takes_query(*names: str, form_fields: Iterable[str] = ()) -> Callable[[View], View]:
    """Declares the query parameters a view reads (and, for a multipart view, the form fields
    a client might wrongly put in the URL); `check_query_parameters` refuses the rest."""
    def mark(view: View) -> View:
        view.query_parameters = names  # type: ignore[attr-defined]
        view.form_fields = tuple(form_fields)  # type: ignore[attr-defined]
        return view
    return mark


def check_query_parameters(view: Callable[..., Any]) -> None:
    """Before every API view: a query parameter `view` does not declare is a 422."""
    for name in getattr(view, "form_fields", ()):
        if name in request.args:
            raise ValidationError(f'Send "{name}" as a form field next to "file", not in the URL.')
    only_query_args(getattr(view, "query_parameters", ()))


def only_query_args(allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    unknown = sorted(k for k in request.args if k not in allowed)
    if unknown:
        takes = f"takes {_names(allowed)}" if allowed else "takes no query parameters"
        raise ValidationError(f"Unknown query parameter {_names(unknown[:3])}; this request "
                              f"{takes}.")
    repeated = sorted(k for k in request.args if len(request.args.getlist(k)) > 1)
    if repeated:
        raise ValidationError(f"Give {_names(repeated[:1])} once.")


def query_id(name: str) -> int | None:
    """An id from the query string, or None when absent; anything else is refused."""
    return int_arg(name, None, minimum=1, strict=True)


def page_args(*, default_limit: int, max_limit: int) -> tuple[int | None, int]:
    """`after` (a cursor: the `next` of the previous page; None when absent) and `limit`,
    one rule for every list: `after` from 0, `limit` from 1 to `max_limit`, else a 422."""
    after = int_arg("after", None, minimum=0, strict=True)
    limit = int_arg("limit", default_limit, minimum=1, maximum=max_limit, strict=True)
    assert limit is not None
    return after, limit
