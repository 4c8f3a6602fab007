"""A rate per day as shapes for an inline SVG (`templates/deliverability/_chart.html`), drawn
like the dashboard's growth chart (webapp/dashboard/chart.py): no JavaScript, no library.

One slot per day, oldest on the left: a bar for the day's rate (its bounces or complaints over
its sends; a day without sends has no bar), and two horizontal lines, the warning and the
limit. The scale leaves room above the limit line (and above the highest bar), so the lines
always show where they are and a bar over the limit stands out.
"""

from __future__ import annotations

from dataclasses import dataclass

from broadside.feedback.reputation.figures import Day

WIDTH = 300
HEIGHT = 100
GAP = 0.2
MIN_BAR = 1.5  # a day with one bounce in many sends still shows


@dataclass(frozen=True)
class Bar:
    day: Day
    rate: float  # percent
    count: int
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class RateChart:
    kind: str  # bounce | complaint
    bars: list[Bar]
    warning: float
    limit: float
    warning_y: float
    limit_y: float
    top: float  # the rate at the top of the box
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def worst(self) -> Bar | None:
        return max(self.bars, key=lambda b: (b.rate, b.day.label_day)) if self.bars else None


def _y(rate: float, top: float) -> float:
    return round(HEIGHT - HEIGHT * min(rate, top) / top, 2)


def rate_chart(days: list[Day], kind: str, warning: float, limit: float) -> RateChart:
    def of(day: Day) -> tuple[float, int]:
        f = day.figures
        return (f.bounce_pct, f.bounced) if kind == "bounce" else (f.complaint_pct, f.complained)

    highest = max((of(d)[0] for d in days if d.figures.sends), default=0.0)
    top = max(limit * 1.25, highest * 1.05) or 1.0
    slot = WIDTH / max(len(days), 1)
    width = round(slot * (1 - GAP), 2)
    bars = []
    for n, day in enumerate(days):
        if not day.figures.sends:
            continue
        rate, count = of(day)
        height = max(HEIGHT * min(rate, top) / top, MIN_BAR if count else 0.0)
        bars.append(Bar(day, rate, count, round(n * slot + slot * GAP / 2, 2),
                        round(HEIGHT - height, 2), width, round(height, 2)))
    return RateChart(kind, bars, warning, limit, _y(warning, top), _y(limit, top), top)
