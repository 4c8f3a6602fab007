"""The A/B test on the pages: its section in the broadcast editor, what the send page says
of it, and its result on a sent broadcast's page (templates/broadcasts/_ab_test*.html).

The editor posts `ab-shown` (the section was on the page; without it the test is left as
it is), `ab-on` (the box: without it the test is removed), variant B..D as `ab-<n>-subject`,
`-preheader` and `-body` (n 1..3; A is the broadcast's own subject), `ab-share`,
`ab-measure`, `ab-wait` and `ab-default` (a variant's index). `stage_posted` writes it into
the draft in the save's transaction (broadside.campaigns.broadcasts.ab_drafts), so the
draft and its test are saved together or not at all; a refusal's field
(`ab_test.variants[1].subject`) is the input it is shown at (`input_of`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from babel.numbers import format_decimal
from flask import Blueprint, request
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import ab_drafts, ab_results
from broadside.campaigns.broadcasts.ab_tests import (
    LETTERS,
    MAX_VARIANTS,
    SHARE_RANGE,
    WAIT_RANGE,
    VariantFigures,
    Verdict,
    clean_ab_test,
    judge,
    letter,
)
from broadside.core.errors import ValidationError
from broadside.core.i18n import current_locale
from broadside.core.models import Broadcast
from webapp.compose.languages import decimal1
from webapp.extensions import db

KEEP = object()  # the section was not on the page: the test stays as it is
OTHERS = range(1, MAX_VARIANTS)  # B, C, D: the variants typed in the editor
DEFAULTS = {"share": 20, "measure": "opens", "wait_hours": 4, "default": 0}
_SCALAR_INPUTS = {"share": "ab-share", "measure": "ab-measure", "wait_hours": "ab-wait",
                  "default": "ab-default"}
_MAX_TEXT = 1_100_000  # longer than any valid value: clean_ab_test says what is too long


def _text(form: Any, key: str) -> str:
    value = form.get(key, "")
    return value[:_MAX_TEXT].replace("\r\n", "\n") if isinstance(value, str) else ""


def posted(form: Any) -> Any:
    """The test the editor posted (None: off), or KEEP when the section was not there.
    Variant A is left empty: ab_drafts fills it with the broadcast's own."""
    if "ab-shown" not in form:
        return KEEP
    if "ab-on" not in form:
        return None
    filled = [n for n in OTHERS
              if any(_text(form, f"ab-{n}-{part}").strip() for part in ("subject", "preheader", "body"))]
    last = max(filled, default=1)  # B always; C when C or D is written, D when D is
    variants: list[dict[str, str]] = [{}]
    for n in range(1, last + 1):
        variants.append({part: _text(form, f"ab-{n}-{part}")
                         for part in ("subject", "preheader", "body")})
    return {"variants": variants, "share": _text(form, "ab-share").strip(),
            "measure": _text(form, "ab-measure"), "wait_hours": _text(form, "ab-wait").strip(),
            "default": _text(form, "ab-default").strip()}


def stage_posted(session: Session, broadcast_id: int, form: Any, *, typing: bool = False) -> None:
    """Write the posted test into the draft, uncommitted (the draft's save commits it).
    `typing` (autosave): a test just switched on with no variant written yet is left as it
    was, so ticking the box does not stop the rest of the draft being saved; Save says what
    is missing."""
    raw = posted(form)
    if raw is KEEP or (typing and raw is not None and not any(
            any(variant.values()) for variant in raw["variants"][1:])):
        return
    ab_drafts.stage_ab_test(session, broadcast_id, raw, subject=_text(form, "subject"),
                            preheader=_text(form, "preheader"))


def input_of(field_path: str | None) -> str | None:
    """The editor's input a refusal's field is about ("" the section), None: not the test's."""
    if not field_path or not field_path.startswith(ab_drafts.FIELD):
        return None
    found = re.match(r"^ab_test\.variants\[(\d)\](?:\.(subject|preheader|body))?$", field_path)
    if found and int(found.group(1)) > 0:
        return f"ab-{found.group(1)}-{found.group(2) or 'subject'}"
    name = field_path.removeprefix(f"{ab_drafts.FIELD}.")
    return _SCALAR_INPUTS.get(name, "")


@dataclass
class Editor:
    """What the editor's section draws."""

    refusal: str | None
    stored: bool  # the draft has a test (shown even when refused: it can be removed)
    on: bool
    variants: list[dict[str, str]]  # B..D, each subject, preheader, body (A: the broadcast)
    share: Any
    measure: str
    wait_hours: Any
    default: int
    errors: dict[str, str] = field(default_factory=dict)  # input name ("" the section) -> message
    share_range: tuple[int, int] = SHARE_RANGE
    wait_range: tuple[int, int] = WAIT_RANGE
    letters: str = LETTERS


def editor(broadcast: Broadcast, error: str | None = None,
           error_field: str | None = None) -> Editor:
    """The section: as posted when the save was refused, else as stored, else the defaults."""
    refused = refusal(broadcast)
    errors: dict[str, str] = {}
    spot = input_of(error_field)
    if error and spot is not None:
        errors[spot] = error
    form = request.form if request.method == "POST" else {}
    raw = posted(form) if error else KEEP
    test = broadcast.ab_test if raw is KEEP else raw
    on = bool(test)
    test = test or DEFAULTS
    others = [dict(v) for v in test.get("variants", [{}])[1:]] if on else []
    others += [{"subject": "", "preheader": "", "body": ""}] * (MAX_VARIANTS - 1 - len(others))
    default = test.get("default", 0)
    return Editor(refusal=refused, stored=bool(broadcast.ab_test), on=on, variants=others,
                  share=test.get("share", 20), measure=test.get("measure", "opens"),
                  wait_hours=test.get("wait_hours", 4),
                  default=int(default) if str(default).isdigit() else 0, errors=errors)


# ---------------------------------------------------------------- the send page


@dataclass(frozen=True)
class Plan:
    """How the test will run, with the numbers the send page can estimate now."""

    variants: list[dict[str, str]]  # the subjects, A first
    share: int
    measure: str
    wait_hours: int
    default: int
    tested: int  # about this many readers in the test
    per_variant: int
    rest: int
    letters: str = LETTERS


def plan(broadcast: Broadcast, active: int) -> Plan | None:
    try:  # as stored, read through the one definition (its defaults filled in)
        test = clean_ab_test(broadcast.ab_test) if broadcast.ab_test else None
    except ValidationError:
        test = None
    if not test:
        return None
    k = len(test["variants"])
    tested = round(active * test["share"] / 100)
    variants = [{"subject": broadcast.subject}, *test["variants"][1:]]
    return Plan(variants=variants, share=test["share"], measure=test["measure"],
                wait_hours=test["wait_hours"], default=test["default"], tested=tested,
                per_variant=tested // k if k else 0, rest=active - tested)


# ---------------------------------------------------------------- the result


@dataclass(frozen=True)
class Bar:
    """One variant's rate and 95% interval, in the scale's percent (0..100 of the width)."""

    letter: str
    subject: str
    figures: VariantFigures
    low: float
    high: float
    rate: float
    rate_x: float
    low_x: float
    high_x: float
    winner: bool


@dataclass(frozen=True)
class Result:
    report: ab_results.AbReport
    bars: list[Bar]
    scale: float  # the rate at the bars' right end (a round figure)
    winner: str | None
    default: str
    provisional: Verdict | None  # before the decision: what the figures so far say
    letters: str = LETTERS


NICE = (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.4, 0.5, 0.6, 0.8, 1.0)


def scale_for(highest: float) -> float:
    """The round rate the bars are drawn against: the smallest NICE one at or above."""
    return next((nice for nice in NICE if highest <= nice + 1e-12), 1.0)


def result(broadcast_id: int) -> Result | None:
    report = ab_results.report(db.session, broadcast_id)
    if report is None:
        return None
    highs = [v.figures.interval[1] for v in report.variants]
    scale = scale_for(max(highs, default=0.0))
    winner = report.verdict.winner if report.verdict is not None else None

    def x(rate: float) -> float:
        return round(min(100.0, 100.0 * rate / scale), 2)

    bars = []
    for variant in report.variants:
        figures = variant.figures
        low, high = figures.interval
        bars.append(Bar(letter=letter(figures.variant), subject=variant.subject, figures=figures,
                        low=low, high=high, rate=figures.rate, rate_x=x(figures.rate),
                        low_x=x(low), high_x=x(high), winner=figures.variant == winner))
    figures = [variant.figures for variant in report.variants]
    provisional = (judge(figures, report.default)
                   if report.verdict is None and any(f.sent for f in figures) else None)
    return Result(report=report, bars=bars, scale=scale,
                  winner=letter(winner) if winner is not None else None,
                  default=letter(report.default), provisional=provisional)


def percent1(rate: float) -> str:
    """A rate as the result shows it: one decimal (12.5 %)."""
    return decimal1(100 * rate) if not math.isnan(rate) else ""


def p_value(p: float) -> str:
    """A p-value as the result shows it: three decimals, "< 0.001" below that."""
    if p < 0.001:
        return "< " + format_decimal(0.001, "0.000", locale=current_locale())
    return format_decimal(p, "0.000", locale=current_locale())


def refusal(broadcast: Broadcast) -> str | None:
    return ab_results.ab_refusal(db.session, broadcast)


def install(bp: Blueprint) -> None:
    @bp.app_context_processor
    def ab_test_helpers() -> dict[str, Any]:
        return {"ab_editor": editor, "ab_plan": plan, "ab_result": result,
                "ab_percent": percent1, "ab_p": p_value, "ab_refusal": refusal}
