"""Segment rules in a sentence, for the segments list and the delete confirmation:
"city is Berlin and (on Weekly or joined within the last 30 days)".

Stored rules were validated when saved, so they are parsed again (`rules.parse`) and read as
normalised conditions; ids become list names and broadcast subjects, looked up for all the
segments of a page in one query each (`lookups.names`).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from broadside.core.models import Segment
from broadside.segments.rules import OPERATOR_LABELS, Condition, Group, RuleError, parse
from webapp.segments.lookups import Names, names

MAX_SUMMARY = 240


def _days(count: int) -> str:
    return "the last day" if count == 1 else f"the last {count:,} days"


def _condition(condition: Condition, known: Names) -> str:
    kind, op, value = condition.kind, condition.op, condition.value
    if kind == "list":
        return ("on " if op == "is_on" else "not on ") + known.list_name(value)
    if kind in ("email", "name", "attributes"):
        subject = condition.key if kind == "attributes" else kind
        words = f"{subject} {OPERATOR_LABELS[op]}"
        return words if value is None else f"{words} {value}"
    if kind == "joined":
        where = f" {known.list_name(condition.list_id)}" if condition.list_id else ""
        if op == "within_days":
            return f"joined{where} within {_days(value)}"
        return f"joined{where} {op} {value}"
    if kind == "received":
        subject = f"“{known.broadcast_subject(value)}”"
        return f"received {subject}" if op == "is" else f"did not receive {subject}"
    if kind == "last_received":
        what = "something" if op == "within_days" else "nothing"
        return f"received {what} within {_days(value)}"
    return f"{condition.field} {op} {value}"


def _group(group: Group, known: Names, top: bool) -> str:
    parts = [_group(item, known, False) if isinstance(item, Group) else _condition(item, known)
             for item in group.items]
    text = (" and " if group.kind == "all" else " or ").join(parts)
    return text if top or len(parts) == 1 else f"({text})"


def sentence(group: Group, known: Names) -> str:
    text = _group(group, known, True)
    return text if len(text) <= MAX_SUMMARY else text[:MAX_SUMMARY - 1].rstrip() + "…"


def summaries(session: Session, segments: Iterable[Segment]) -> dict[int, str]:
    """Each segment's rules in a sentence, by segment id."""
    parsed: dict[int, Group | None] = {}
    for segment in segments:
        try:
            parsed[segment.id] = parse(segment.rules)
        except RuleError:
            parsed[segment.id] = None
    conditions = [c for group in parsed.values() if group for c in group.conditions()]
    known = names(
        session,
        [c.value if c.kind == "list" else c.list_id for c in conditions
         if c.kind == "list" or (c.kind == "joined" and c.list_id)],
        [c.value for c in conditions if c.kind == "received"],
    )
    return {segment_id: sentence(group, known) if group else "(these rules cannot be read)"
            for segment_id, group in parsed.items()}
