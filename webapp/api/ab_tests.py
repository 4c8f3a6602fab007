"""A broadcast's A/B test over the API (described in `webapp/apidocs/ab_tests.py`).

In: `"ab_test": {"variants": [{"subject", "preheader"?, "body"?}, ...], "share", "measure",
"wait_hours", "default"?}` on POST /api/broadcasts and PATCH /api/broadcasts/<id>; null
removes it. The first variant is A, the broadcast itself: its subject and preheader may be
left out (or given as the broadcast's), its body always is. `default` is a variant's letter,
"A" to "D" (as the pages name them and as the result names the winner); left out, "A".
Out: the test as stored, `default` a letter, and on GET /api/broadcasts/<id> `ab_result`:
null until the broadcast is sent, then where the test stands (broadside's `ab_results`).
"""

from __future__ import annotations

from typing import Any

from broadside.campaigns.broadcasts import ab_results
from broadside.campaigns.broadcasts.ab_tests import LETTERS, letter
from broadside.core.errors import ValidationError
from webapp.api.inputs import iso
from webapp.extensions import db

FIELD = "ab_test"


def ab_test_input(value: Any) -> Any:
    """The API's test as the domain takes it (`default` an index), or None; the rest is
    judged by broadside.campaigns.broadcasts.ab_drafts."""
    if not isinstance(value, dict):
        return value
    for key in ("share", "wait_hours"):  # the pages post digits; the API takes numbers only
        if key in value and (not isinstance(value[key], int) or isinstance(value[key], bool)):
            raise ValidationError(f"'ab_test.{key}' must be a whole number.", field=f"{FIELD}.{key}")
    if "default" not in value:
        return value
    given = value["default"]
    if not isinstance(given, str) or given not in LETTERS:
        raise ValidationError("'ab_test.default' is the letter of the variant that wins when "
                              "no difference is clear: \"A\" to \"D\".", field=f"{FIELD}.default")
    return {**value, "default": LETTERS.index(given)}


def ab_test_json(test: dict[str, Any] | None) -> dict[str, Any] | None:
    if not test:
        return None
    return {"variants": [{"subject": v["subject"], "preheader": v["preheader"], "body": v["body"]}
                         for v in test["variants"]],
            "share": test["share"], "measure": test["measure"],
            "wait_hours": test["wait_hours"], "default": letter(test["default"])}


def ab_result_json(broadcast_id: int) -> dict[str, Any] | None:
    report = ab_results.report(db.session, broadcast_id)
    if report is None:
        return None
    verdict = report.verdict
    return {
        "phase": report.phase,
        "wait_until": iso(report.wait_until),
        "decided_at": iso(report.decided_at),
        "winner": letter(verdict.winner) if verdict is not None else None,
        "clear": verdict.clear if verdict is not None else None,
        "p_value": round(verdict.p_value, 6) if verdict is not None else None,
        "variants": [{"variant": v.figures.letter, "subject": v.subject, "sent": v.figures.sent,
                      "hits": v.figures.hits, "rate": round(v.figures.rate, 6),
                      "low": round(v.figures.interval[0], 6),
                      "high": round(v.figures.interval[1], 6)} for v in report.variants],
    }
