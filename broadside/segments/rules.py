"""Segment rules: the JSON rule tree, validated, and compiled to one SQL condition.

The format (the same in the builder, the API and the database):

    {"all": [{"field": "attributes.city", "op": "equals", "value": "Berlin"},
             {"any": [{"field": "joined", "op": "within_days", "value": 30},
                      {"field": "received", "op": "is_not", "value": 12}]}]}

A group is an object with one key, `all` or `any`, holding a non-empty list of conditions
and groups, nested at most MAX_DEPTH deep. `parse` refuses anything else with a message that
names the condition ("condition 2.1 (attributes.age gt): ..."), numbered as an outline.

`compile_rules` turns a parsed tree into a SQLAlchemy condition over `subscribers`: every value
from the owner travels as a bound parameter (nothing is built into SQL text from their input),
list and history conditions are EXISTS subqueries on the indexed foreign keys (the unique
(subscriber, list) and (broadcast, subscriber) pairs and deliveries' subscriber index), and
attribute conditions use each database's JSON function (json_extract on SQLite, ->> on
PostgreSQL). Text comparisons ignore case (addresses are stored lower-cased). The comparisons
themselves are `comparisons`; who a segment reaches (the rules among people active on a list
and not suppressed) is `reach`.

Semantics an owner would expect, where the format alone does not decide:
- `attributes.KEY exists` means "has a non-empty value"; `not_equals` matches people who do
  not have the attribute at all (they are not in Berlin).
- `gt`/`lt` compare numbers; a value that is not a number never matches either. `before`/
  `after` compare the first ten characters of an ISO date (YYYY-MM-DD), strictly.
- `joined` looks at the person's active subscriptions (any list, or the condition's optional
  `"list"`), at when the subscription became active (confirmed, else created); its dates are
  days in the owner's time zone.
- `received` and `last_received` count deliveries that were sent; a delivery in `unknown`
  (may or may not have arrived) does not count as received.
- `opened`, `clicked`, `opened_any`, `clicked_any`, `never_opened`: `engagement`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import (
    ColumnElement,
    and_,
    exists,
    false,
    func,
    not_,
    or_,
    true,
)

from broadside.core.errors import ValidationError
from broadside.core.i18n import _l
from broadside.core.models import Delivery, Subscriber, Subscription
from broadside.core.models.sending import DeliveryStatus
from broadside.segments import engagement
from broadside.segments.comparisons import attribute_condition, text_condition

MAX_DEPTH = 5  # groups inside groups: the top group is depth 1
MAX_CONDITIONS = 50
MAX_TEXT = 320
MAX_DAYS = 36500
MAX_ID = 2**31 - 1  # ids are 32-bit integers on PostgreSQL
MAX_KEY = 100  # as long as an attribute name may be (broadside.audience.subscribers.service)

TEXT_OPS = ("equals", "contains", "ends_with")
ATTRIBUTE_OPS = ("equals", "not_equals", "contains", "exists", "not_exists", "gt", "lt",
                 "before", "after")

# field -> operators it takes (attributes.KEY is matched by its prefix)
OPERATORS: dict[str, tuple[str, ...]] = {
    "list": ("is_on", "is_not_on"),
    "email": TEXT_OPS,
    "name": TEXT_OPS,
    "attributes": ATTRIBUTE_OPS,
    "joined": ("before", "after", "within_days"),
    "received": ("is", "is_not"),
    "last_received": ("within_days", "not_within_days"),
    **engagement.OPERATORS,  # opened, clicked, ... : segments/engagement.py
}

# Words for the builder and for messages.
FIELD_LABELS = {
    "list": _l("List"),
    "email": _l("Email address"),
    "name": _l("Name"),
    "attributes": _l("Attribute"),
    "joined": _l("Joined a list"),
    "received": _l("Received broadcast"),
    "last_received": _l("Last received anything"),
    **engagement.FIELD_LABELS,
}
OPERATOR_LABELS = {
    "is_on": _l("is active on"),
    "is_not_on": _l("is not on"),
    "equals": _l("is"),
    "not_equals": _l("is not"),
    "contains": _l("contains"),
    "ends_with": _l("ends with"),
    "exists": _l("has a value"),
    "not_exists": _l("has no value"),
    "gt": _l("is greater than"),
    "lt": _l("is less than"),
    "before": _l("is before"),
    "after": _l("is after"),
    "within_days": _l("within the last N days"),
    "not_within_days": _l("not within the last N days"),
    "is": _l("did receive"),
    "is_not": _l("did not receive"),
}
NO_VALUE_OPS = ("exists", "not_exists")


class RuleError(ValidationError):
    """A rule tree that cannot be saved; the message names the condition."""


@dataclass(frozen=True)
class Condition:
    field: str  # "list", "email", ..., or "attributes.KEY"
    op: str
    value: Any  # normalised: int for ids and days, str for text and dates, float for numbers
    label: str  # "condition 2.1"
    list_id: int | None = None  # `joined` may name the list

    @property
    def kind(self) -> str:
        return "attributes" if self.field.startswith("attributes.") else self.field

    @property
    def key(self) -> str:
        return self.field.partition(".")[2]

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"field": self.field, "op": self.op}
        if self.op not in NO_VALUE_OPS:
            data["value"] = self.value
        if self.list_id is not None:
            data["list"] = self.list_id
        return data


@dataclass(frozen=True)
class Group:
    kind: str  # all | any
    items: tuple[Condition | Group, ...]
    label: str

    def as_json(self) -> dict[str, Any]:
        return {self.kind: [item.as_json() for item in self.items]}

    def conditions(self) -> Iterator[Condition]:
        for item in self.items:
            if isinstance(item, Group):
                yield from item.conditions()
            else:
                yield item


# ------------------------------------------------------------------ parsing and validation


def _describe(label: str, raw: dict[str, Any]) -> str:
    field = raw.get("field")
    op = raw.get("op")
    what = " ".join(str(x) for x in (field, op) if isinstance(x, str) and x)
    name = label[0].upper() + label[1:]
    return f"{name} ({what[:80]})" if what else name


def _whole_number(value: Any, where: str, what: str, low: int, high: int) -> int:
    if isinstance(value, bool):
        raise RuleError(f"{where}: {what} must be a whole number.")
    if isinstance(value, str) and re.fullmatch(r"\s*\d{1,12}\s*", value):
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise RuleError(f"{where}: {what} must be a whole number.")
    if not low <= value <= high:
        raise RuleError(f"{where}: {what} must be between {low} and {high}.")
    return value


def _text(value: Any, where: str, *, numbers_allowed: bool = False) -> str:
    if numbers_allowed and isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise RuleError(f"{where}: the value must be text.")
    value = value.strip()
    if not value:
        raise RuleError(f"{where}: type a value to compare with.")
    if len(value) > MAX_TEXT:
        raise RuleError(f"{where}: the value can be at most {MAX_TEXT} characters.")
    if "\x00" in value:
        raise RuleError(f"{where}: the value cannot contain a NUL character.")
    return value


def _number(value: Any, where: str) -> float | int:
    if isinstance(value, bool):
        raise RuleError(f"{where}: the value must be a number.")
    if isinstance(value, str):
        try:
            value = float(value.strip()) if value.strip() else None
        except ValueError:
            value = None
        if value is None:
            raise RuleError(f"{where}: the value must be a number, like 42 or 9.5.")
    if not isinstance(value, int | float) or value != value or value in (float("inf"), float("-inf")):
        raise RuleError(f"{where}: the value must be a number, like 42 or 9.5.")
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    elif isinstance(value, int) and abs(value) >= 2**53:
        # Beyond what a database integer (or a float, exactly) holds: compared as a float, the
        # way the attribute's number is read; beyond a float's range, refused.
        try:
            value = float(value)
        except OverflowError:
            raise RuleError(f"{where}: that number is too large.") from None
    return value


def _iso_date(value: Any, where: str) -> str:
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip()).isoformat()
        except ValueError:
            pass
    raise RuleError(f"{where}: the value must be a date written as YYYY-MM-DD.")


def _condition(raw: dict[str, Any], label: str) -> Condition:
    where = _describe(label, raw)
    unknown = set(raw) - {"field", "op", "value", "list"}
    if unknown:
        raise RuleError(f"{where}: unknown key {sorted(unknown)[0]!r} (a condition has "
                        "field, op and value).")
    field, op = raw.get("field"), raw.get("op")
    if not isinstance(field, str) or not field:
        raise RuleError(f"{where}: choose a field.")
    kind = "attributes" if field.startswith("attributes.") else field
    if kind not in OPERATORS:
        known = ", ".join(f for f in OPERATORS if f != "attributes")
        raise RuleError(f"{where}: unknown field {field[:80]!r}. Known fields: {known}, "
                        "and attributes.NAME.")
    if kind == "attributes":
        key = field.partition(".")[2].strip()
        if not key:
            raise RuleError(f"{where}: name the attribute, as in attributes.city.")
        if len(key) > MAX_KEY or any(c in key for c in '"\\') or any(ord(c) < 32 for c in key):
            raise RuleError(f"{where}: an attribute name can be at most {MAX_KEY} characters "
                            "and cannot contain quotes, backslashes or control characters.")
        field = f"attributes.{key}"
    if not isinstance(op, str) or op not in OPERATORS[kind]:
        allowed = ", ".join(OPERATORS[kind])
        raise RuleError(f"{where}: the operator does not fit this field; use one of: {allowed}.")
    list_id = None
    if "list" in raw and raw["list"] not in (None, ""):
        if kind != "joined":
            raise RuleError(f"{where}: only a `joined` condition can name a list.")
        list_id = _whole_number(raw["list"], where, "the list", 1, MAX_ID)
    value = raw.get("value")
    if op in NO_VALUE_OPS:
        if value not in (None, ""):
            raise RuleError(f"{where}: this operator takes no value.")
        value = None
    elif kind == "list":
        value = _whole_number(value, where, "the list", 1, MAX_ID)
    elif kind in ("received", *engagement.BROADCAST_FIELDS):
        value = _whole_number(value, where, "the broadcast", 1, MAX_ID)
    elif kind == "never_opened":
        if engagement.clean_never(value) is None:
            raise RuleError(f"{where}: the value must be true (for people who opened something, "
                            "use opened_any).")
        value = True
    elif op in ("within_days", "not_within_days"):
        high = engagement.MAX_DAYS if kind in engagement.OPERATORS else MAX_DAYS
        value = _whole_number(value, where, "the number of days", 1, high)
    elif op in ("before", "after"):
        value = _iso_date(value, where)
    elif op in ("gt", "lt"):
        value = _number(value, where)
    else:
        value = _text(value, where, numbers_allowed=kind == "attributes")
    return Condition(field, op, value, label, list_id)


def _group(raw: Any, label: str, number: str, depth: int, counter: list[int]) -> Group:
    """`label`: how messages name this group; `number`: its outline number ("" at the top)."""
    name = label[0].upper() + label[1:]
    if not isinstance(raw, dict) or len(raw) != 1 or next(iter(raw)) not in ("all", "any"):
        raise RuleError(f"{name}: a group is an object with one key, \"all\" or \"any\", "
                        "holding a list of conditions.")
    if depth > MAX_DEPTH:
        raise RuleError(f"{name}: groups can be nested at most {MAX_DEPTH} deep.")
    kind, items = next(iter(raw.items()))
    if not isinstance(items, list):
        raise RuleError(f"{name}: \"{kind}\" must hold a list of conditions.")
    if not items:
        raise RuleError(f"{name} is empty: add a condition or remove the group.")
    parsed: list[Condition | Group] = []
    for index, item in enumerate(items, start=1):
        outline = f"{number}.{index}" if number else str(index)
        if isinstance(item, dict) and len(item) == 1 and next(iter(item)) in ("all", "any"):
            parsed.append(_group(item, f"group {outline}", outline, depth + 1, counter))
        elif isinstance(item, dict):
            counter[0] += 1
            if counter[0] > MAX_CONDITIONS:
                raise RuleError(f"A segment can have at most {MAX_CONDITIONS} conditions.")
            parsed.append(_condition(item, f"condition {outline}"))
        else:
            raise RuleError(f"Condition {outline}: expected a condition (field, op, value) "
                            "or a group.")
    return Group(kind, tuple(parsed), label)


def parse(rules: Any) -> Group:
    """The rule tree, validated and normalised; RuleError names the first thing wrong."""
    return _group(rules, "the segment", "", 1, [0])


# ------------------------------------------------------------------ compiling to SQL

ACTIVE = "active"
SENT = DeliveryStatus.SENT.value


@dataclass(frozen=True)
class Context:
    """What a compilation depends on besides the rules."""

    dialect: str  # sqlite | postgresql
    now: datetime  # naive UTC
    zone: ZoneInfo = ZoneInfo("UTC")  # the owner's: dates in rules are their days

    def day_start(self, iso: str) -> datetime:
        """Midnight at the start of this day in the owner's zone, as naive UTC."""
        local = datetime.combine(date.fromisoformat(iso), time(), tzinfo=self.zone)
        return local.astimezone(UTC).replace(tzinfo=None)


def _joined_condition(condition: Condition, ctx: Context) -> ColumnElement[bool]:
    became_active = func.coalesce(Subscription.confirmed_at, Subscription.created_at)
    if condition.op == "within_days":
        moment = became_active >= ctx.now - timedelta(days=condition.value)
    elif condition.op == "before":
        moment = became_active < ctx.day_start(condition.value)
    else:  # after: from the start of the next day
        next_day = (date.fromisoformat(condition.value) + timedelta(days=1)).isoformat()
        moment = became_active >= ctx.day_start(next_day)
    where = [Subscription.subscriber_id == Subscriber.id, Subscription.status == ACTIVE, moment]
    if condition.list_id is not None:
        where.append(Subscription.list_id == condition.list_id)
    return exists().where(*where)


def _condition_sql(condition: Condition, ctx: Context) -> ColumnElement[bool]:
    kind, op, value = condition.kind, condition.op, condition.value
    if kind == "list":
        on_list = exists().where(Subscription.subscriber_id == Subscriber.id,
                                 Subscription.list_id == value, Subscription.status == ACTIVE)
        return on_list if op == "is_on" else not_(on_list)
    if kind in ("email", "name"):
        column = Subscriber.email if kind == "email" else Subscriber.name
        return text_condition(column, op, value)
    if kind == "attributes":
        return attribute_condition(condition.key, op, value, ctx.dialect)
    if kind == "joined":
        return _joined_condition(condition, ctx)
    if kind == "received":
        got_it = exists().where(Delivery.broadcast_id == value,
                                Delivery.subscriber_id == Subscriber.id, Delivery.status == SENT)
        return got_it if op == "is" else not_(got_it)
    if kind == "last_received":
        recent = exists().where(Delivery.subscriber_id == Subscriber.id, Delivery.status == SENT,
                                Delivery.sent_at >= ctx.now - timedelta(days=value))
        return recent if op == "within_days" else not_(recent)
    if kind in engagement.OPERATORS:
        return engagement.condition(kind, op, value, ctx.now)
    raise AssertionError(kind)


def compile_rules(group: Group, ctx: Context) -> ColumnElement[bool]:
    """The rule tree as one condition over `subscribers` (bound parameters only)."""
    parts = [compile_rules(item, ctx) if isinstance(item, Group) else _condition_sql(item, ctx)
             for item in group.items]
    return and_(true(), *parts) if group.kind == "all" else or_(false(), *parts)
