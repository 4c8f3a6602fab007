"""A/B tests: up to four variants of a broadcast's subject (or subject and body), tried on a
share of its audience; after a wait the variant with the best rate of human unique opens (or
clicks) goes to the rest.

As written (`Broadcast.ab_test`): `{"variants": [{"subject", "preheader", "body"}, ...],
"share", "measure", "wait_hours", "default"}`; variant 0 (A) is the broadcast's own subject,
preheader and body, and a variant's empty body or preheader is A's. Frozen at Send: variant 0
is the revision's columns, the others `Revision.variants` (`{"1": message, ...}`).

Who gets what is fixed when their delivery row is written (the snapshot, `split_expression`):
a pseudo-random draw from the seed recorded at Send and their subscriber id puts them in the
test (a variant 0..k-1, each as likely) or in the rest (`REST`, -1). The worker claims no row
of the rest until the winner is written (once, by a guarded UPDATE: `decide`); a row of the
rest is then sent the winner. So each reader gets exactly one variant, across crashes.

The statistics (`results`): each variant's rate with a 95% Wilson interval, and a
two-proportion z-test of the best variant against each other one (pooled, two-sided); the
difference is clear when every such test has p < 0.05. Otherwise the owner's default wins and
the page says there was no clear winner. Opens and clicks are read from per-person tracking
(`PersonActivity`, never machine hits), so an A/B test needs it: the lists' switch and the
broadcast's per-person mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from broadside.core.errors import ValidationError
from broadside.core.i18n import _

MAX_VARIANTS = 4
MEASURES = ("opens", "clicks")
REST = -1  # a delivery of the audience outside the test: sent the winner once it is chosen
SHARE_RANGE = (5, 50)  # percent of the audience in the test
WAIT_RANGE = (1, 72)  # hours between the test's last copy and the winner's choice
LETTERS = "ABCD"
Z_95 = 1.959963984540054
MAX_LINE_CHARS = 300
MAX_BODY_CHARS = 1_000_000


def letter(variant: int) -> str:
    """A variant as the pages name it: A, B, C, D."""
    return LETTERS[variant]


def clean_ab_test(raw: Any) -> dict[str, Any] | None:
    """The A/B test as stored, or None for none. Raises ValidationError (field `ab_test`)
    naming what is wrong: not an object, fewer than 2 or more than 4 variants, a variant
    without a subject, a share outside 5-50 %, a measure other than opens or clicks, a wait
    outside 1-72 hours, a default that is no variant."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValidationError(_("The A/B test must be an object with variants, a share, a "
                                "measure and a wait."), field="ab_test")
    variants = raw.get("variants")
    if not isinstance(variants, list) or not 2 <= len(variants) <= MAX_VARIANTS:
        raise ValidationError(_("An A/B test has from 2 to %(n)s variants.", n=MAX_VARIANTS),
                              field="ab_test")
    cleaned = []
    for index, item in enumerate(variants):
        if not isinstance(item, dict):
            raise ValidationError(_("Variant %(letter)s must be an object with a subject.",
                                    letter=letter(index)), field="ab_test")
        fields: dict[str, str] = {}
        for name, limit in (("subject", MAX_LINE_CHARS), ("preheader", MAX_LINE_CHARS),
                            ("body", MAX_BODY_CHARS)):
            value = item.get(name)
            if value is None:
                value = ""
            if not isinstance(value, str):
                raise ValidationError(_("Variant %(letter)s: the %(field)s must be text.",
                                        letter=letter(index), field=name), field="ab_test")
            if len(value) > limit:
                raise ValidationError(_("Variant %(letter)s: the %(field)s is longer than "
                                        "%(n)s characters.", letter=letter(index), field=name,
                                        n=limit), field="ab_test")
            fields[name] = value.strip() if name != "body" else value
        if not fields["subject"]:
            raise ValidationError(_("Variant %(letter)s needs a subject.", letter=letter(index)),
                                  field="ab_test")
        cleaned.append(fields)
    if len({(v["subject"], v["preheader"], v["body"]) for v in cleaned}) < len(cleaned):
        raise ValidationError(_("Two variants are the same: make each one different."),
                              field="ab_test")
    share = _whole(raw.get("share", 20), *SHARE_RANGE,
                   _("The test share must be a whole percentage from %(lo)s to %(hi)s.",
                     lo=SHARE_RANGE[0], hi=SHARE_RANGE[1]))
    measure = raw.get("measure", "opens")
    if measure not in MEASURES:
        raise ValidationError(_("The A/B test's measure is opens or clicks."), field="ab_test")
    wait = _whole(raw.get("wait_hours", 4), *WAIT_RANGE,
                  _("The wait must be a whole number of hours from %(lo)s to %(hi)s.",
                    lo=WAIT_RANGE[0], hi=WAIT_RANGE[1]))
    default = _whole(raw.get("default", 0), 0, len(cleaned) - 1,
                     _("The default winner must be one of the variants."))
    return {"variants": cleaned, "share": share, "measure": measure, "wait_hours": wait,
            "default": default}


def _whole(value: Any, lo: int, hi: int, message: str) -> int:
    if isinstance(value, bool):
        raise ValidationError(message, field="ab_test")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or not lo <= value <= hi:
        raise ValidationError(message, field="ab_test")
    return value


# ---------------------------------------------------------------- statistics


@dataclass(frozen=True)
class VariantFigures:
    variant: int
    sent: int
    hits: int  # human unique opens or clicks, by the test's measure

    @property
    def letter(self) -> str:
        return letter(self.variant)

    @property
    def rate(self) -> float:
        return self.hits / self.sent if self.sent else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.hits, self.sent)


def wilson_interval(hits: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% by default); (0, 0) for no sends."""
    if n <= 0:
        return (0.0, 0.0)
    p = hits / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def two_proportion_p(hits_a: int, n_a: int, hits_b: int, n_b: int) -> float:
    """The two-sided p-value of a pooled two-proportion z-test; 1.0 when it cannot tell."""
    if n_a <= 0 or n_b <= 0:
        return 1.0
    pooled = (hits_a + hits_b) / (n_a + n_b)
    spread = math.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    if spread == 0:
        return 1.0
    z = (hits_a / n_a - hits_b / n_b) / spread
    return math.erfc(abs(z) / math.sqrt(2))


@dataclass(frozen=True)
class Verdict:
    winner: int
    clear: bool  # the best variant beat every other one with p < 0.05
    p_value: float  # the largest p of the best against the others
    best: int  # the variant with the highest rate (the winner only when clear)


def judge(figures: list[VariantFigures], default: int, alpha: float = 0.05) -> Verdict:
    """The winner: the highest rate when it differs clearly from every other variant's,
    else the owner's default. Ties on rate go to the earlier variant."""
    best = max(figures, key=lambda f: (f.rate, -f.variant))
    p_values = [two_proportion_p(best.hits, best.sent, other.hits, other.sent)
                for other in figures if other.variant != best.variant]
    worst = max(p_values) if p_values else 1.0
    clear = worst < alpha and best.hits > 0
    return Verdict(winner=best.variant if clear else default, clear=clear, p_value=worst,
                   best=best.variant)


def result_record(figures: list[VariantFigures], verdict: Verdict, measure: str) -> dict[str, Any]:
    """What `Broadcast.ab_result` keeps of the decision: the figures it was made on."""
    return {
        "measure": measure,
        "clear": verdict.clear,
        "p_value": round(verdict.p_value, 6),
        "best": verdict.best,
        "winner": verdict.winner,
        "variants": [{"variant": f.variant, "sent": f.sent, "hits": f.hits,
                      "rate": round(f.rate, 6), "low": round(f.interval[0], 6),
                      "high": round(f.interval[1], 6)} for f in figures],
    }
