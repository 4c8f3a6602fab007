"""A broadcast's opens and clicks over its first days as shapes for an inline SVG
(`templates/analytics/_broadcast.html`), in the house style of the dashboard's growth chart
(webapp/dashboard/chart.py): drawn on the server, no JavaScript, numbers beside it in a table.

One slot per day after sending started; in each, a bar for opens and one for clicks, each a
reader part (solid) with the suspected-bot part stacked on top (pale). One scale for all bars.
"""

from __future__ import annotations

from dataclasses import dataclass

from broadside.campaigns.analytics.report import Day, Report

WIDTH = 300
HEIGHT = 100
GAP = 0.25  # of a slot, between days
MIN_BAR = 2.0  # one hit still shows


@dataclass(frozen=True)
class Bar:
    day: int
    kind: str  # opens | bot-opens | clicks | bot-clicks
    count: int
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class Chart:
    report: Report
    bars: list[Bar]
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def busiest(self) -> Day | None:
        days = [d for d in self.report.days if d.opens]
        return max(days, key=lambda d: (d.opens, -d.day)) if days else None


def chart(report: Report) -> Chart:
    top = max((max(d.opens + d.bot_opens, d.clicks + d.bot_clicks) for d in report.days), default=0)
    scale = HEIGHT / top if top else 0.0
    slot = WIDTH / max(len(report.days), 1)
    bar_width = slot * (1 - GAP) / 2
    bars: list[Bar] = []
    for n, day in enumerate(report.days):
        for side, (human, bots, kind) in enumerate(((day.opens, day.bot_opens, "opens"),
                                                     (day.clicks, day.bot_clicks, "clicks"))):
            x = round(n * slot + slot * GAP / 2 + side * bar_width, 2)
            bottom = float(HEIGHT)
            for count, name in ((human, kind), (bots, "bot-" + kind)):
                if not count:
                    continue
                height = min(max(count * scale, MIN_BAR), bottom)
                bottom -= height
                bars.append(Bar(day.day, name, count, x, round(bottom, 2), round(bar_width, 2),
                                round(height, 2)))
    return Chart(report, bars)
