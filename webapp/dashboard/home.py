"""What the dashboard shows: recent broadcasts with their progress, subscriber growth over the
last 30 days (a chart), and the size of each list (`broadside.audience.list_sizes`)."""

from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from broadside.audience.list_sizes import ListSize, list_sizes
from broadside.audience.subscribers.growth import growth
from broadside.campaigns.broadcasts.drafts import BroadcastRow
from broadside.campaigns.broadcasts.queries import recent_broadcasts
from webapp.dashboard.chart import Chart, chart


@dataclass(frozen=True)
class Home:
    recent: list[BroadcastRow]
    lists: list[ListSize]
    growth: Chart

    @property
    def any_active(self) -> bool:
        return any(row.broadcast.status in ("queued", "sending") for row in self.recent)


def home_overview(session: Session, zone: ZoneInfo) -> Home:
    return Home(recent_broadcasts(session), list_sizes(session), chart(growth(session, zone)))
