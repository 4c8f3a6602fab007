"""Segment rules in a sentence, for the segments list and the delete confirmation:
"city is Berlin and (on Weekly or joined within the last 30 days)".

Stored rules were validated when saved, so they are parsed again (`rules.parse`) and read as
normalised conditions; ids become list names and broadcast subjects, looked up for all the
segments of a page in one query each (`lookups.names`).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from broadside.core.i18n import _, _l, ngettext
from broadside.core.models import Segment
from broadside.segments.engagement import BROADCAST_FIELDS
from broadside.segments.engagement import OPERATORS as ENGAGEMENT
from broadside.segments.rules import OPERATOR_LABELS, Condition, Group, RuleError, parse
from webapp.segments.lookups import Names, names

MAX_SUMMARY = 240
SUBJECTS = {"email": _l("email"), "name": _l("name")}


def _condition(condition: Condition, known: Names) -> str:
    kind, op, value = condition.kind, condition.op, condition.value
    if kind == "list":
        return (_("on %(list)s", list=known.list_name(value)) if op == "is_on" else
                _("not on %(list)s", list=known.list_name(value)))
    if kind in ("email", "name", "attributes"):
        subject = condition.key if kind == "attributes" else str(SUBJECTS[kind])
        if value is None:
            return _("%(subject)s %(op)s", subject=subject, op=OPERATOR_LABELS[op])
        return _("%(subject)s %(op)s %(value)s", subject=subject, op=OPERATOR_LABELS[op],
                 value=value)
    if kind == "joined":
        return _joined(condition, known)
    if kind == "received":
        subject = known.broadcast_subject(value)
        return (_("received “%(subject)s”", subject=subject) if op == "is" else
                _("did not receive “%(subject)s”", subject=subject))
    if kind in ENGAGEMENT:
        return _engagement(condition, known)
    if kind == "last_received":
        if op == "within_days":
            return ngettext("received something within the last day",
                            "received something within the last %(num)s days", value)
        return ngettext("received nothing within the last day",
                        "received nothing within the last %(num)s days", value)
    return f"{condition.field} {op} {value}"


def _engagement(condition: Condition, known: Names) -> str:
    kind, op, value = condition.kind, condition.op, condition.value
    if kind == "never_opened":
        return _("never opened anything")
    if kind in BROADCAST_FIELDS:
        subject = known.broadcast_subject(value)
        if kind == "opened":
            return (_("opened “%(subject)s”", subject=subject) if op == "is" else
                    _("did not open “%(subject)s”", subject=subject))
        return (_("clicked in “%(subject)s”", subject=subject) if op == "is" else
                _("did not click in “%(subject)s”", subject=subject))
    if kind == "opened_any":
        if op == "within_days":
            return ngettext("opened something within the last day",
                            "opened something within the last %(num)s days", value)
        return ngettext("opened nothing within the last day",
                        "opened nothing within the last %(num)s days", value)
    if op == "within_days":
        return ngettext("clicked something within the last day",
                        "clicked something within the last %(num)s days", value)
    return ngettext("clicked nothing within the last day",
                    "clicked nothing within the last %(num)s days", value)


def _joined(condition: Condition, known: Names) -> str:
    op, value = condition.op, condition.value
    if condition.list_id:
        where = known.list_name(condition.list_id)
        if op == "within_days":
            return ngettext("joined %(list)s within the last day",
                            "joined %(list)s within the last %(num)s days", value, list=where)
        return (_("joined %(list)s before %(date)s", list=where, date=value) if op == "before"
                else _("joined %(list)s after %(date)s", list=where, date=value))
    if op == "within_days":
        return ngettext("joined within the last day", "joined within the last %(num)s days",
                        value)
    return (_("joined before %(date)s", date=value) if op == "before" else
            _("joined after %(date)s", date=value))


def _group(group: Group, known: Names, top: bool) -> str:
    parts = [_group(item, known, False) if isinstance(item, Group) else _condition(item, known)
             for item in group.items]
    text = (_(" and ") if group.kind == "all" else _(" or ")).join(parts)
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
        [c.value for c in conditions if c.kind in ("received", *BROADCAST_FIELDS)],
    )
    return {segment_id: sentence(group, known) if group else _("(these rules cannot be read)")
            for segment_id, group in parsed.items()}
