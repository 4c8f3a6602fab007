"""A condition's comparison as SQL on both databases (SQLite and PostgreSQL): text ignoring
case (LIKE patterns escaped), and a subscriber's JSON attribute compared as text, as a number
or as an ISO date. Every value travels as a bound parameter.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, case, cast, func, literal, not_, or_
from sqlalchemy.types import Float

from broadside.core.models import Subscriber


def _attribute_text(key: str) -> ColumnElement[Any]:
    """The attribute as text on both databases (CAST(json_extract(...)) on SQLite, CAST(->>)
    on PostgreSQL), so numbers compare by their text on both. SQLAlchemy binds the key or its
    path as a parameter; parse() refused quotes in the key."""
    return Subscriber.attributes[key].as_string()


def _looks_numeric(text_value: ColumnElement[Any], dialect: str) -> ColumnElement[bool]:
    if dialect == "postgresql":
        return text_value.op("~")(literal(r"^\s*-?([0-9]+\.?[0-9]*|\.[0-9]+)\s*$"))
    # SQLite has no regular expressions by default: an optional minus, digits and at most one dot.
    unsigned = case((func.substr(func.trim(text_value), 1, 1) == "-",
                     func.substr(func.trim(text_value), 2)), else_=func.trim(text_value))
    return and_(
        unsigned.op("GLOB")(literal("*[0-9]*")),
        not_(unsigned.op("GLOB")(literal("*[^0-9.]*"))),
        not_(unsigned.op("GLOB")(literal("*.*.*"))),
    )


def _looks_like_date(text_value: ColumnElement[Any], dialect: str) -> ColumnElement[bool]:
    if dialect == "postgresql":
        return text_value.op("~")(literal(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"))
    return text_value.op("GLOB")(literal("[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*"))


def _like_pattern(value: str, *, prefix: bool, suffix: bool) -> str:
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return ("%" if prefix else "") + escaped + ("%" if suffix else "")


def text_condition(column: Any, op: str, value: str) -> ColumnElement[bool]:
    """`column op value`, ignoring case; `not_equals` matches a NULL too."""
    lowered = func.lower(column)
    needle = value.lower()
    if op == "equals":
        return lowered == needle
    if op == "not_equals":
        return func.coalesce(lowered, "") != needle
    if op == "contains":
        return lowered.like(_like_pattern(needle, prefix=True, suffix=True), escape="\\")
    if op == "ends_with":
        return lowered.like(_like_pattern(needle, prefix=True, suffix=False), escape="\\")
    raise AssertionError(op)


def attribute_condition(key: str, op: str, value: Any, dialect: str) -> ColumnElement[bool]:
    """`attributes.KEY op value` (parsed by `rules.parse`): text compares ignoring case, `gt`/`lt`
    only values that look like numbers, `before`/`after` only ones that look like dates."""
    text_value = _attribute_text(key)
    if op in ("equals", "not_equals", "contains"):
        return text_condition(text_value, op, value)
    if op == "exists":
        return and_(text_value.is_not(None), text_value != "")
    if op == "not_exists":
        return or_(text_value.is_(None), text_value == "")
    if op in ("gt", "lt"):
        number = case((_looks_numeric(text_value, dialect), cast(func.trim(text_value), Float)),
                      else_=None)
        return number > value if op == "gt" else number < value
    day = func.substr(text_value, 1, 10)
    if op in ("before", "after"):
        compared = day < value if op == "before" else day > value
        return and_(_looks_like_date(text_value, dialect), compared)
    raise AssertionError(op)
