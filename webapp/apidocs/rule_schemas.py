"""The OpenAPI document's schemas for a segment's rules (`RuleGroup`, `RuleCondition`, ...),
merged into the document by `document.py`. The fields, operators and limits come from
`broadside.segments.rules`, which enforces them; where a rule depends on the operator (which
conditions take a value, and of what kind) the schema says it with if/then.
"""

from __future__ import annotations

from typing import Any

from broadside.segments import engagement, rules
from webapp.apidocs.schemas import ID, NOT_BLANK, ref

DAYS = {"type": "integer", "minimum": 1, "maximum": rules.MAX_DAYS}
ENGAGEMENT_DAYS = {"type": "integer", "minimum": 1, "maximum": engagement.MAX_DAYS}
PER_PERSON_ONLY = (" Read from per-person tracking only: a broadcast sent with per-person "
                   "tracking to a list that has it on; machine opens and clicks (privacy "
                   "proxies, link scanners) never count.")
DAY = {"type": "string", "format": "date", "description": "YYYY-MM-DD, a day in the owner's time zone."}
# Text to compare with: not blank (it is compared without its outer spaces).
RULE_TEXT = {"type": "string", "minLength": 1, "maxLength": rules.MAX_TEXT, "pattern": NOT_BLANK}
# A number, or text that reads as one (gt and lt on an attribute).
# Bounded digits: a longer number (1e400) is no finite number and is refused.
_SPACE = r"[ \t\n\r\f\v]*"
NUMERIC = {"type": ["number", "string"],
           "pattern": (rf"^{_SPACE}[-+]?([0-9]{{1,15}}\.?[0-9]{{0,15}}|\.[0-9]{{1,15}})"
                       rf"([eE][-+]?[0-9]{{1,2}})?{_SPACE}$")}


def _when(ops: tuple[str, ...] | list[str], then: dict[str, Any]) -> dict[str, Any]:
    return {"if": {"required": ["op"], "properties": {"op": {"enum": list(ops)}}}, "then": then}


# An attribute's value by operator: none for exists / not_exists, a date for before / after,
# a number for gt / lt, else text or a number (compared as text).
ATTRIBUTE_VALUE_RULES = [
    _when(rules.NO_VALUE_OPS, {"properties": {"value": {"enum": [None, ""]}}}),
    _when([op for op in rules.OPERATORS["attributes"] if op not in rules.NO_VALUE_OPS],
          {"required": ["value"]}),
    _when(("before", "after"), {"properties": {"value": DAY}}),
    _when(("gt", "lt"), {"properties": {"value": NUMERIC}}),
    _when([op for op in rules.OPERATORS["attributes"]
           if op not in (*rules.NO_VALUE_OPS, "before", "after", "gt", "lt")],
          {"properties": {"value": {"anyOf": [{"type": "number"}, RULE_TEXT]}}}),
]
FIXED_FIELDS = [f for f in rules.OPERATORS if f != "attributes"]
# Its name: not blank, no quote, backslash or control character.
ATTRIBUTE_FIELD = (r'^attributes\.[^"\\\s\x00-\x20\x85][^"\\\x00-\x1f]{0,' + str(rules.MAX_KEY - 1)
                   + "}$")
ALL_OPERATORS = list(dict.fromkeys(op for ops in rules.OPERATORS.values() for op in ops))


def _condition(field: str, value: dict[str, Any] | None, description: str, *,
               named_list: bool = False) -> dict[str, Any]:
    ops = list(rules.OPERATORS[field])
    field_schema = ({"type": "string", "pattern": ATTRIBUTE_FIELD} if field == "attributes"
                    else {"const": field})
    variant: dict[str, Any] = {
        "title": f"{rules.FIELD_LABELS[field]} condition",
        "description": description,
        "properties": {"field": field_schema, "op": {"enum": ops}},
    }
    if value is not None:
        variant["properties"]["value"] = value
        variant["required"] = ["value"]  # every operator of these fields compares with one
        if field == "joined":  # a day for before / after, a number of days for within_days
            variant["allOf"] = [_when(("before", "after"), {"properties": {"value": DAY}}),
                                _when(("within_days",), {"properties": {"value": DAYS}})]
    else:
        variant["allOf"] = ATTRIBUTE_VALUE_RULES
    if not named_list:
        variant["not"] = {"required": ["list"]}
    return variant


def _op_label(field: str, op: str) -> str:
    return str(engagement.FIELD_OPERATOR_LABELS.get(f"{field}:{op}") or rules.OPERATOR_LABELS[op])


def _operator_help() -> str:
    lines = [f"- `{field}{'.KEY' if field == 'attributes' else ''}`: "
             + ", ".join(f"`{op}` ({_op_label(field, op)})" for op in ops)
             for field, ops in rules.OPERATORS.items()]
    return "The operators each field takes:\n\n" + "\n".join(lines)


RULE_SCHEMAS: dict[str, Any] = {
    "Rule": {
        "description": "One item of a group: a condition, or a group nested inside it.",
        "oneOf": [ref("RuleGroup"), ref("RuleCondition")],
    },
    "RuleGroup": {
        "description": (
            'An object with one key, "all" (every item must match) or "any" (at least one), '
            f"holding a non-empty list of conditions and groups. Groups nest at most "
            f"{rules.MAX_DEPTH} deep; a segment has at most {rules.MAX_CONDITIONS} conditions. "
            "A refused rule is 422 with a message naming the condition by its outline number, "
            'such as "Condition 2.1 (attributes.age gt): the value must be a number".'),
        "type": "object",
        "minProperties": 1,
        "maxProperties": 1,
        "additionalProperties": False,
        "properties": {key: {"type": "array", "minItems": 1, "items": ref("Rule")}
                       for key in ("all", "any")},
    },
    "RuleField": {
        "description": ("What a condition looks at: " + ", ".join(FIXED_FIELDS)
                        + ", or `attributes.KEY` for one of the subscriber's attributes."),
        "type": "string",
        "anyOf": [{"enum": FIXED_FIELDS}, {"pattern": ATTRIBUTE_FIELD}],
    },
    "RuleOperator": {"description": _operator_help(), "type": "string", "enum": ALL_OPERATORS},
    "RuleCondition": {
        "description": ("One test of one field. Text comparisons ignore case. Exactly one of "
                        "the variants below applies, chosen by `field`."),
        "type": "object",
        "required": ["field", "op"],
        "additionalProperties": False,
        "properties": {
            "field": ref("RuleField"),
            "op": ref("RuleOperator"),
            "value": {"description": "What to compare with; absent for exists / not_exists."},
            "list": {**ID, "type": ["integer", "null"],
                     "description": "Only `joined`: the list to look at (any list when absent or null)."},
        },
        "oneOf": [
            _condition("list", ID, "Is (not) active on the list with this id."),
            _condition("email", RULE_TEXT, "The address equals, contains or ends with the text."),
            _condition("name", RULE_TEXT, "The name equals, contains or ends with the text."),
            _condition("attributes", None,
                       "An attribute: text (equals, not_equals, contains), a number (gt, lt), a "
                       "date YYYY-MM-DD (before, after), or no value (exists, not_exists). "
                       "not_equals matches people without the attribute."),
            _condition("joined", {"oneOf": [DAY, DAYS]},
                       "When they became active on a list (any, or `list`): before or after a "
                       "day, or within the last N days.", named_list=True),
            _condition("received", ID, "Did (not) receive the broadcast with this id (sent; "
                       "an unknown delivery does not count)."),
            _condition("last_received", DAYS,
                       "Received any broadcast within (or not within) the last N days."),
            _condition("opened", ID, "Did (not) open the broadcast with this id. `is_not` "
                       "also matches people it never reached: add `received` for those it "
                       "reached." + PER_PERSON_ONLY),
            _condition("clicked", ID, "Did (not) click a link in the broadcast with this id."
                       + PER_PERSON_ONLY),
            _condition("opened_any", ENGAGEMENT_DAYS, "First opened any broadcast within (or "
                       "not within) the last N days." + PER_PERSON_ONLY),
            _condition("clicked_any", ENGAGEMENT_DAYS, "First clicked in any broadcast within "
                       "(or not within) the last N days." + PER_PERSON_ONLY),
            _condition("never_opened", {"const": True}, "`{\"field\": \"never_opened\", "
                       "\"op\": \"is\", \"value\": true}`: reached by at least one broadcast "
                       "tracked per person, and opened none. People never reached by one do "
                       "not match." + PER_PERSON_ONLY),
        ],
    },
}
