"""What the Deliverability page shows of one identity: its rates over its last 1,000 sends and
over 30 days (per day, for the charts), the lines, and its state: fine, warning, at the limit,
too few sends to judge, paused by the guard (with the reason), or paused for another reason.

The last-1,000 figures shown are those of all its sends; the guard judges only the sends after
its last pause of the identity (`guard.counting_from`), and the page says so when that differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from broadside.delivery.identities.service import SendingIdentity
from broadside.feedback.reputation import figures as reading
from broadside.feedback.reputation.guard import counting_from
from broadside.feedback.reputation.lines import GUARD_PREFIX, Lines, lines, state


@dataclass(frozen=True)
class IdentityReport:
    identity: SendingIdentity
    last: reading.Figures  # its last 1,000 sends, all of them
    judged: reading.Figures  # the guard's window: its last 1,000 sends after its last pause
    counted_from: datetime | None  # the guard's last pause of it (None: never)
    days: list[reading.Day]
    month: reading.Figures
    lines: Lines

    @property
    def state(self) -> str:
        """guard | paused | limit | warning | fine | few."""
        if self.identity.status == "paused":
            return "guard" if (self.identity.pause_reason or "").startswith(GUARD_PREFIX) else "paused"
        return state(self.judged, self.lines)

    @property
    def anchor(self) -> str:
        return "identity-default" if self.identity.id is None else f"identity-{self.identity.id}"


def identity_report(session: Session, identity: SendingIdentity, zone: ZoneInfo,
                    now: datetime | None = None) -> IdentityReport:
    since = counting_from(session, identity.id)
    last = reading.last_window(session, identity.id)
    judged = reading.last_window(session, identity.id, after=since) if since else last
    days = reading.per_day(session, identity.id, zone, now=now)
    return IdentityReport(identity, last, judged, since, days, reading.total(days), lines(session))
