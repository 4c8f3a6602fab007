"""The lines an identity's rates are judged against (Settings, in percent; Gmail's by default:
complaints 0.1 % warning and 0.3 % limit, hard bounces 2 % and 5 %), and the judgement."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from broadside.core.models import SiteSettings
from broadside.feedback.reputation.figures import Figures

# Below this many sends in the window a rate says little (1 bounce in 10 sends is 10 %): the
# guard waits for at least this many before it pauses; the page says "too few to judge".
MIN_SENDS = 100
GUARD_PREFIX = "Paused by the reputation guard"


@dataclass(frozen=True)
class Lines:
    complaint_warning: float = 0.1
    complaint_limit: float = 0.3
    bounce_warning: float = 2.0
    bounce_limit: float = 5.0

    def as_data(self) -> dict[str, float]:
        return {"complaint_warning_pct": self.complaint_warning,
                "complaint_limit_pct": self.complaint_limit,
                "hard_bounce_warning_pct": self.bounce_warning,
                "hard_bounce_limit_pct": self.bounce_limit}


def lines(session: Session) -> Lines:
    """The lines in force (Settings' row read, never created: the defaults until it exists)."""
    settings = session.get(SiteSettings, 1)
    if settings is None:
        return Lines()
    return Lines(settings.complaint_warning_pct, settings.complaint_limit_pct,
                 settings.bounce_warning_pct, settings.bounce_limit_pct)


def pct(value: float) -> str:
    """A rate as the page and the reason say it: 5.4, 0.3, 12, 0.125, 1.67 (three significant
    figures at most, never more than three decimals, no trailing zeros)."""
    decimals = 1 if value >= 10 else 2 if value >= 1 else 3
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".")


def state(figures: Figures, judged_by: Lines) -> str:
    """fine | warning | limit (a rate at or over its limit) | few (too few sends to judge)."""
    if figures.sends < MIN_SENDS:
        return "few"
    if (figures.complaint_pct >= judged_by.complaint_limit
            or figures.bounce_pct >= judged_by.bounce_limit):
        return "limit"
    if (figures.complaint_pct >= judged_by.complaint_warning
            or figures.bounce_pct >= judged_by.bounce_warning):
        return "warning"
    return "fine"


def over_limit(figures: Figures, judged_by: Lines) -> str | None:
    """The guard's reason when a rate is at or over its limit with enough sends, else None:
    "Paused by the reputation guard: 5.4 % hard bounces over the last 1,000 sends (limit 5 %)."
    """
    if state(figures, judged_by) != "limit":
        return None
    over = f"over the last {figures.sends:,} sends"
    parts = []
    if figures.complaint_pct >= judged_by.complaint_limit:
        parts.append(f"{pct(figures.complaint_pct)} % complaints {over} "
                     f"(limit {pct(judged_by.complaint_limit)} %)")
    if figures.bounce_pct >= judged_by.bounce_limit:
        parts.append(f"{pct(figures.bounce_pct)} % hard bounces {over} "
                     f"(limit {pct(judged_by.bounce_limit)} %)")
    return f"{GUARD_PREFIX}: " + "; ".join(parts) + "."
