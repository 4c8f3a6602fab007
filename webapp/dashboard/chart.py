"""The dashboard's growth chart as shapes for an inline SVG (`templates/dashboard/_growth.html`):
no JavaScript and no chart library, the page arrives drawn.

One slot per day, oldest on the left: a bar up for the people who joined, a bar down for those
who left, from one baseline. The two sides share one scale, so a day's bars compare at a
glance; the baseline sits where the larger side leaves it (a day with one person still shows
a bar `MIN_BAR` high). Coordinates are in the SVG's own units (`WIDTH` x `HEIGHT`); the page
stretches it to the card's width.
"""

from __future__ import annotations

from dataclasses import dataclass

from broadside.audience.subscribers.growth import Growth, GrowthDay

WIDTH = 300
HEIGHT = 100
GAP = 0.2  # of a slot, between bars
MIN_BAR = 3.0  # a day with one person still shows beside a day with hundreds


@dataclass(frozen=True)
class Bar:
    day: GrowthDay
    kind: str  # joined | left
    x: float
    y: float
    width: float
    height: float

    @property
    def count(self) -> int:
        return self.day.joined if self.kind == "joined" else self.day.left


@dataclass(frozen=True)
class Chart:
    growth: Growth
    bars: list[Bar]
    baseline: float  # y of the line between joined (above) and left (below)
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def joined_bars(self) -> list[Bar]:
        return [b for b in self.bars if b.kind == "joined"]

    @property
    def left_bars(self) -> list[Bar]:
        return [b for b in self.bars if b.kind == "left"]

    @property
    def busiest(self) -> GrowthDay | None:
        days = [d for d in self.growth.days if d.joined]
        return max(days, key=lambda d: (d.joined, d.day)) if days else None


def chart(growth: Growth) -> Chart:
    top = max((d.joined for d in growth.days), default=0)
    bottom = max((d.left for d in growth.days), default=0)
    scale = HEIGHT / (top + bottom) if top + bottom else 0.0
    # Room for the smallest bar on each side that has any, so none pokes out of the box.
    baseline = min(max(top * scale, MIN_BAR if top else 0.0), HEIGHT - (MIN_BAR if bottom else 0.0))
    slot = WIDTH / max(len(growth.days), 1)
    width = slot * (1 - GAP)
    bars = []
    for n, day in enumerate(growth.days):
        x = round(n * slot + slot * GAP / 2, 2)
        if day.joined:
            height = min(max(day.joined * scale, MIN_BAR), baseline)
            bars.append(Bar(day, "joined", x, round(baseline - height, 2), round(width, 2), round(height, 2)))
        if day.left:
            height = min(max(day.left * scale, MIN_BAR), HEIGHT - baseline)
            bars.append(Bar(day, "left", x, round(baseline, 2), round(width, 2), round(height, 2)))
    return Chart(growth, bars, round(baseline, 2))
