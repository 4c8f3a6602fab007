"""The visual rule builder as one HTML form: posted fields -> a tree -> rule JSON, and back.

The builder works without JavaScript because it is a plain form: every group and condition is
a handful of fields named by its outline number, the numbering `broadside.segments.rules`
uses in its messages ("Condition 2.1 (...)"), so a refusal can point at its row:

    g-top-kind          the top group: "all" (Match all of) or "any" (Match any of)
    g-2-kind            group 2, the second item of the top group
    c-2.1-field         condition 2.1: list, email, name, attributes, joined, received,
                        last_received, opened, clicked, opened_any, clicked_any,
                        never_opened (the keys of rules.OPERATORS)
    c-2.1-key           its attribute name, for field "attributes" (saved as attributes.KEY)
    c-2.1-op            its operator
    c-2.1-value         its value, as typed or chosen
    c-2.1-list          the optional list of a "joined" condition ("" for any list)
    action              the button pressed: add-condition:PATH, add-group:PATH, remove:PATH
                        (PATH is "top" or an outline number), load-json, preview, save
    rules_json          "Edit as JSON": the rules as JSON, which saving uses when the owner
                        changed it last (`submission` says how that is told)
    rules_json_shown    the JSON the page showed, to tell an edit from a stale copy
    rules_source        "builder" or "json": what the owner changed last, set by
                        static/segments.js; empty without JavaScript

`from_form` reads the fields into a `Box` of `Row`s, keeping every value as typed: nothing is
validated here, the domain's `validate` does it and names the condition. `to_rules` writes the
rule JSON (ids, days and numbers as numbers when they are numbers), `from_rules` reads rule
JSON back for the template to render; rendering a saved segment and posting the form unchanged
gives back the same JSON. Each request builds a fresh tree, so `apply_action` may change it.
What one submission means as a whole (the JSON box against the builder) is in `submission`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from broadside.segments.engagement import BROADCAST_FIELDS
from broadside.segments.rules import MAX_CONDITIONS, MAX_DEPTH, NO_VALUE_OPS, OPERATORS

TOP = "top"
KINDS = ("all", "any")
DAY_OPS = ("within_days", "not_within_days")
BROADCAST_ROWS = ("received", *BROADCAST_FIELDS)  # rows whose value is a broadcast
ALWAYS_TRUE = ("never_opened",)  # rows whose value is always true: no control
# A form never needs more nodes than this; more is not a builder's doing.
MAX_NODES = 4 * MAX_CONDITIONS

_PATH = rf"\d{{1,3}}(?:\.\d{{1,3}}){{0,{MAX_DEPTH - 1}}}"
_FIELD_NAME = re.compile(rf"^(?:g-({TOP}|{_PATH})-kind|c-({_PATH})-(field|key|op|value|list))$")
_ACTION = re.compile(rf"^(add-condition|add-group|remove):({TOP}|{_PATH})$")
_ROW_PATH = re.compile(rf"^{_PATH}$")
_LABEL = re.compile(r"^(?:Condition|Group) (\d+(?:\.\d+)*)\b")


class BuilderError(Exception):
    """Posted fields or JSON the builder cannot show; the message is safe to show."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclasses.dataclass
class Row:
    """One condition as the owner is editing it; every value is the text of its control."""

    field: str = ""  # a key of rules.OPERATORS, or "" before one is chosen
    key: str = ""
    op: str = ""
    value: str = ""
    list_id: str = ""
    is_group = False

    @property
    def operators(self) -> tuple[str, ...]:
        return OPERATORS.get(self.field, ())

    @property
    def shown_op(self) -> str:
        """The operator the select shows: the posted one when it fits the field, else the
        field's first (after the field changed)."""
        ops = self.operators
        return self.op if self.op in ops else (ops[0] if ops else "")

    @property
    def control(self) -> str:
        """Which value control fits: none, list, broadcast, tracked_broadcast (one sent with
        per-person tracking), date, days, number or text."""
        op = self.shown_op
        if not self.field or op in NO_VALUE_OPS or self.field in ALWAYS_TRUE:
            return "none"
        if self.field == "list":
            return "list"
        if self.field == "received":
            return "broadcast"
        if self.field in BROADCAST_FIELDS:
            return "tracked_broadcast"
        if op in DAY_OPS:
            return "days"
        if op in ("before", "after"):
            return "date"
        if op in ("gt", "lt"):
            return "number"
        return "text"

    @property
    def value_fits(self) -> bool:
        """Whether the value control can hold the value: a browser empties a date or number
        input given anything else (so a refused value is shown in a text input instead), and
        a select of lists or broadcasts holds ids."""
        text = self.value.strip()
        if not text or self.control in ("none", "text"):
            return True
        if self.control in ("list", "broadcast", "tracked_broadcast"):
            return re.fullmatch(r"[0-9]{1,19}", text) is not None
        if self.control == "date":
            return re.fullmatch(r"\d{4}-\d{2}-\d{2}", text) is not None
        return isinstance(_number(text), int | float)


@dataclasses.dataclass
class Box:
    """A group: "all" or "any" of its items."""

    kind: str = "all"
    items: list[Row | Box] = dataclasses.field(default_factory=list)
    is_group = True


def starting_tree() -> Box:
    """A new segment: match all of one condition still to be chosen."""
    return Box("all", [Row()])


def path_text(path: tuple[int, ...]) -> str:
    return ".".join(str(n) for n in path) or TOP


def _path(text: str) -> tuple[int, ...]:
    return () if text == TOP else tuple(int(n) for n in text.split("."))


# ------------------------------------------------------------------ form -> tree


def from_form(form: Mapping[str, str]) -> Box:
    """The tree the posted builder fields describe, items in outline order. Gaps in the
    numbering are closed; a condition whose number is also a group's is dropped."""
    root = Box(kind="all")
    groups: dict[tuple[int, ...], str] = {}
    rows: dict[tuple[int, ...], dict[str, str]] = {}
    for name in form.keys():
        match = _FIELD_NAME.match(name)
        if not match:
            continue
        group, row, part = match.groups()
        value = form.get(name) or ""
        if group is not None:
            kind = value if value in KINDS else "all"
            if group == TOP:
                root.kind = kind
            else:
                groups[_path(group)] = kind
        else:
            rows.setdefault(_path(row), {})[part] = value
    if len(groups) + len(rows) > MAX_NODES:
        raise BuilderError(f"A segment can have at most {MAX_CONDITIONS} conditions.")

    boxes: dict[tuple[int, ...], Box] = {(): root}
    children: dict[tuple[int, ...], dict[int, Row | Box]] = {(): {}}

    def box_at(path: tuple[int, ...]) -> Box:
        if path not in boxes:
            parent = path[:-1]
            box_at(parent)
            boxes[path] = Box(kind=groups.get(path, "all"))
            children[path] = {}
            children[parent][path[-1]] = boxes[path]
        return boxes[path]

    for path in sorted(groups, key=len):
        box_at(path)
    # Deepest first: a condition's parent becomes a group before a shallower condition could
    # take its number.
    for path in sorted(rows, key=len, reverse=True):
        if path in boxes:
            continue
        box_at(path[:-1])
        parts = rows[path]
        field = parts.get("field", "").strip()
        field = field if field in OPERATORS else ""
        # No operator posted: the field was chosen without JavaScript and its operators were
        # never shown; take the one the select will show first.
        op = parts.get("op", "") or (OPERATORS[field][0] if field else "")
        children[path[:-1]][path[-1]] = Row(field=field, key=parts.get("key", ""), op=op,
                                            value=parts.get("value", ""),
                                            list_id=parts.get("list", ""))
    for path, box in boxes.items():
        box.items = [children[path][n] for n in sorted(children[path])]
    return root


# ------------------------------------------------------------------ tree <-> rule JSON


def _whole(text: str) -> int | str:
    stripped = text.strip()
    return int(stripped) if re.fullmatch(r"[0-9]{1,19}", stripped) else text


def _number(text: str) -> float | int | str:
    try:
        number = float(text.strip())
    except ValueError:
        return text
    if not math.isfinite(number):
        return text
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def _value(row: Row) -> Any:
    if row.field in ALWAYS_TRUE:
        return True
    if row.field in ("list", *BROADCAST_ROWS) or row.op in DAY_OPS:
        return _whole(row.value)
    if row.op in ("gt", "lt"):
        return _number(row.value)
    return row.value


def to_rules(box: Box) -> dict[str, Any]:
    """The rule JSON for the tree, complete or not (the domain says what is missing)."""
    items: list[dict[str, Any]] = []
    for item in box.items:
        if isinstance(item, Box):
            items.append(to_rules(item))
            continue
        field = f"attributes.{item.key}" if item.field == "attributes" else item.field
        condition: dict[str, Any] = {"field": field, "op": item.op}
        if item.op not in NO_VALUE_OPS:
            condition["value"] = _value(item)
        if item.field == "joined" and item.list_id.strip():
            condition["list"] = _whole(item.list_id)
        items.append(condition)
    return {box.kind: items}


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value)


def _row(raw: dict[str, Any]) -> Row:
    field = raw.get("field") if isinstance(raw.get("field"), str) else ""
    key = ""
    if field.startswith("attributes."):
        field, key = "attributes", field.partition(".")[2]
    op = raw.get("op") if isinstance(raw.get("op"), str) else ""
    return Row(field=field if field in OPERATORS else "", key=key, op=op,
               value=_text(raw.get("value")), list_id=_text(raw.get("list")))


def from_rules(rules: Any) -> Box:
    """Rule JSON as a tree for the builder. Incomplete conditions are fine (they are shown as
    they are); a shape that is not groups of conditions raises BuilderError."""
    count = [0]

    def group(raw: Any, depth: int) -> Box:
        if not (isinstance(raw, dict) and len(raw) == 1 and next(iter(raw)) in KINDS
                and isinstance(next(iter(raw.values())), list)):
            raise BuilderError('The rules must be a group: an object with one key, "all" or '
                               '"any", holding a list of conditions and groups.')
        if depth > MAX_DEPTH:
            raise BuilderError(f"Groups can be nested at most {MAX_DEPTH} deep.")
        kind, raw_items = next(iter(raw.items()))
        box = Box(kind=kind)
        for item in raw_items:
            count[0] += 1
            if count[0] > MAX_NODES:
                raise BuilderError(f"A segment can have at most {MAX_CONDITIONS} conditions.")
            if isinstance(item, dict) and len(item) == 1 and next(iter(item)) in KINDS:
                box.items.append(group(item, depth + 1))
            elif isinstance(item, dict):
                box.items.append(_row(item))
            else:
                raise BuilderError("Each item of a group must be a condition (an object with "
                                   "field, op and value) or a group.")
        return box

    return group(rules, 1)


def dumps(rules: Any) -> str:
    return json.dumps(rules, indent=2, ensure_ascii=False)


# ------------------------------------------------------------------ the buttons


def node_at(box: Box, path: tuple[int, ...]) -> Row | Box | None:
    node: Row | Box = box
    for number in path:
        if not isinstance(node, Box) or not 1 <= number <= len(node.items):
            return None
        node = node.items[number - 1]
    return node


def row_at(box: Box, path: str) -> Row | None:
    """The condition at an outline number such as "2.1", if there is one."""
    if not _ROW_PATH.match(path):
        return None
    node = node_at(box, _path(path))
    return node if isinstance(node, Row) else None


def _conditions(box: Box) -> int:
    return sum(_conditions(i) if isinstance(i, Box) else 1 for i in box.items)


def apply_action(box: Box, action: str) -> tuple[str | None, str | None]:
    """Apply an add or remove button to the tree: (the outline number of the condition to
    focus, a notice for the owner). Anything else leaves the tree alone."""
    match = _ACTION.match(action)
    if not match:
        return None, None
    verb, where = match.groups()
    path = _path(where)
    if verb == "remove":
        parent = node_at(box, path[:-1]) if path else None
        if not isinstance(parent, Box) or not 1 <= path[-1] <= len(parent.items):
            return None, "That part of the rules was already removed."
        del parent.items[path[-1] - 1]
        return None, None
    target = node_at(box, path)
    if not isinstance(target, Box):
        return None, "That group is not there any more."
    if _conditions(box) >= MAX_CONDITIONS:
        return None, f"A segment can have at most {MAX_CONDITIONS} conditions."
    if verb == "add-condition":
        target.items.append(Row())
        return path_text((*path, len(target.items))), None
    if len(path) + 2 > MAX_DEPTH:  # the top group is depth 1, the new one len(path) + 2
        return None, f"Groups can be nested at most {MAX_DEPTH} deep."
    # A group inside "all" is most often an "any" (and the other way round).
    target.items.append(Box("any" if target.kind == "all" else "all", [Row()]))
    return path_text((*path, len(target.items), 1)), None


def error_path(message: str | None) -> str | None:
    """The outline number a domain message names ("Condition 2.1 (...): ..."), or "top"."""
    if not message:
        return None
    match = _LABEL.match(message)
    if match:
        return match.group(1)
    return TOP if message.startswith("The segment") else None
