"""The OpenAPI document's `ab_test` of a broadcast and its `ab_result` (webapp/api/ab_tests.py),
with the limits `broadside.campaigns.broadcasts.ab_tests.clean_ab_test` enforces."""

from __future__ import annotations

from typing import Any

from broadside.campaigns.broadcasts.ab_tests import (
    LETTERS,
    MAX_BODY_CHARS,
    MAX_LINE_CHARS,
    MAX_VARIANTS,
    MEASURES,
    SHARE_RANGE,
    WAIT_RANGE,
)

LETTER = {"type": "string", "enum": list(LETTERS[:MAX_VARIANTS])}
# A test copy's variant (POST /api/broadcasts/{id}/test).
TEST_VARIANT = {**LETTER, "description": "With an A/B test: the variant the copy is (its subject "
                "starts with [Test B]). Left out: A, the broadcast's own. 422 for a letter the "
                "test does not have."}
# A character str.strip() keeps: schemas.NOT_BLANK (which imports this module, hence again here).
NOT_BLANK = r"[^\s\x1c-\x1f\x85]"
BLANK = r"[\s\x1c-\x1f\x85]"
# What clean_ab_test reads of a variant: text or null (as empty); other keys are ignored.
_TEXT = {"type": ["string", "null"]}
_VARIANT: dict[str, Any] = {"type": "object", "additionalProperties": True, "properties": {
    "subject": {**_TEXT, "maxLength": MAX_LINE_CHARS},
    "preheader": {**_TEXT, "maxLength": MAX_LINE_CHARS, "description": "Empty: variant A's."},
    "body": {**_TEXT, "maxLength": MAX_BODY_CHARS,
             "description": "In the broadcast's format; empty: variant A's (the broadcast's)."}}}
# Variant A: the broadcast itself (its subject and preheader, if given, must be the
# broadcast's: a rule across fields, refused with a 422 naming it); no body of its own.
_VARIANT_A = {**_VARIANT, "properties": {**_VARIANT["properties"], "body": {
    **_TEXT, "pattern": rf"^{BLANK}*$", "description": "None: A's body is the broadcast's."}}}
# B to D: a subject of one line that is not blank (what drafts' subjects are).
_VARIANT_OTHER = {**_VARIANT, "required": ["subject"], "properties": {
    **_VARIANT["properties"], "subject": {"type": "string", "minLength": 1,
                                          "maxLength": MAX_LINE_CHARS,
                                          "pattern": rf"^[^\r\n]*{NOT_BLANK}[^\r\n]*$"}}}
_FIELDS: dict[str, Any] = {
    "share": {"type": "integer", "minimum": SHARE_RANGE[0], "maximum": SHARE_RANGE[1],
              "description": "The percentage of the audience in the test, split at random into "
                             "one group per variant."},
    "measure": {"type": "string", "enum": list(MEASURES),
                "description": "Unique opens or unique clicks by people (machines never count)."},
    "wait_hours": {"type": "integer", "minimum": WAIT_RANGE[0], "maximum": WAIT_RANGE[1],
                   "description": "Hours after the test's last copy before the winner is chosen."},
    "default": {**LETTER, "description": "The letter of the variant that goes to the rest when "
                "no difference is clear."},
}
AB_TEST_EXAMPLE = {"variants": [{"subject": "November news"},
                                {"subject": "What's new in November"}],
                   "share": 20, "measure": "opens", "wait_hours": 4, "default": "A"}
AB_TEST_INPUT = {
    "type": ["object", "null"], "additionalProperties": True, "required": ["variants"],
    "properties": {"variants": {"type": "array", "minItems": 2, "maxItems": MAX_VARIANTS,
                                "prefixItems": [_VARIANT_A], "items": _VARIANT_OTHER}, **_FIELDS},
    "description": (
        "An A/B test: the variants are A (the broadcast itself: leave its subject and "
        "preheader out or give the broadcast's, and no body), then B to D, each with its own "
        "subject (and if you like preheader and body). The share (default 20), measure "
        "(default opens), wait (default 4) and default (a letter, default \"A\") follow. "
        "Editing the broadcast's subject moves variant A with it. null: no test (removes it). "
        "A refusal is 422 naming the field, as `ab_test.variants[1].subject` or "
        "`ab_test.share`. A test needs per-person tracking, one language and no reader's hour: "
        "Send refuses it otherwise."),
    "example": AB_TEST_EXAMPLE}
AB_TEST = {
    "type": ["object", "null"], "additionalProperties": False,
    "required": ["variants", *_FIELDS],
    "properties": {"variants": {"type": "array", "items": {
        "type": "object", "additionalProperties": False,
        "required": ["subject", "preheader", "body"],
        "properties": {name: {"type": "string"} for name in ("subject", "preheader", "body")}}},
        **_FIELDS},
    "description": "The A/B test as stored (variant A first: the broadcast's own subject and "
                   "preheader, an empty body), or null."}
_RATE = {"type": "number", "minimum": 0, "maximum": 1}
AB_RESULT = {
    "type": ["object", "null"], "additionalProperties": False,
    "required": ["phase", "wait_until", "decided_at", "winner", "clear", "p_value", "variants"],
    "properties": {
        "phase": {"type": "string", "enum": ["testing", "waiting", "decided"]},
        "wait_until": {"type": ["string", "null"], "format": "date-time",
                       "description": "When the winner is chosen, once the test's copies are "
                                      "all sent."},
        "decided_at": {"type": ["string", "null"], "format": "date-time"},
        "winner": {**LETTER, "type": ["string", "null"], "enum": [*LETTERS[:MAX_VARIANTS], None],
                   "description": "The variant sent to the rest; null until decided."},
        "clear": {"type": ["boolean", "null"], "description": "Whether the best variant beat "
                  "every other one (two-proportion test, p < 0.05); when not, the default won."},
        "p_value": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "variants": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["variant", "subject", "sent", "hits", "rate", "low", "high"],
            "properties": {"variant": LETTER, "subject": {"type": "string"},
                           "sent": {"type": "integer", "minimum": 0},
                           "hits": {"type": "integer", "minimum": 0,
                                    "description": "Unique human opens or clicks (the measure)."},
                           "rate": _RATE, "low": {**_RATE, "description": "95% Wilson interval"},
                           "high": _RATE}}}},
    "description": "Where the A/B test stands once the broadcast is sent; null before, or "
                   "without a test."}
