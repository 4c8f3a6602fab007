"""The live progress of a broadcast, from ONE row: the counters the pipeline keeps, and while
the worker is still writing a large recipient list, how far that is ("Preparing the
recipient list: N of about M", from the snapshot's cursor and the list's count the worker took first),
and after a large cancel, how many the worker has still to skip (`cancelling`, from the same
counters).

The broadcast page polls this every 1.5 s while a send runs, so it must stay cheap at any
list size: it reads the broadcast's counter columns (kept in the same transaction as each
delivery change, see broadside.campaigns.broadcasts.ledger) and never counts the deliveries table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, inspect, select
from sqlalchemy.orm import Session

from broadside.core.errors import NotFound
from broadside.core.i18n import _, ngettext
from broadside.core.models import Broadcast, Identity
from broadside.core.timeutil import utcnow

TERMINAL = ("sent", "cancelled")
ACTIVE = ("queued", "sending")

_COLUMNS = (
    Broadcast.id, Broadcast.status, Broadcast.total, Broadcast.pending_count,
    Broadcast.sending_count, Broadcast.sent_count, Broadcast.skipped_count,
    Broadcast.failed_count, Broadcast.unknown_count, Broadcast.send_rate,
    Broadcast.pause_reason, Broadcast.notice, Broadcast.scheduled_at, Broadcast.started_at,
    Broadcast.finished_at, Broadcast.snapshot_cursor, Broadcast.snapshot_until,
    Broadcast.audience_estimate, Broadcast.send_at_local, Broadcast.waiting_until,
    Broadcast.ab_seed, Broadcast.ab_wait_until, Broadcast.ab_winner,
)


@dataclass(frozen=True)
class Progress:
    id: int
    status: str
    total: int
    pending: int
    sending: int
    sent: int
    skipped: int
    failed: int
    unknown: int
    send_rate: float
    pause_reason: str | None
    notice: str | None
    scheduled_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    # The audience snapshot (broadside.campaigns.broadcasts.snapshot): the highest subscriber id
    # written, the highest one at the press, and a list's active people counted then.
    snapshot_cursor: int = 0
    snapshot_until: int = 0
    audience_estimate: int | None = None
    # "HH:MM" when each reader gets it at that hour in their own time zone: the fragment then
    # says what waits for which hour (`local_waiting`), else it reads nothing more.
    send_at_local: str | None = None
    # Nothing due before this (readers' own hours, an A/B test's wait): the worker waits.
    waiting_until: datetime | None = None
    # An A/B test (sent with one: a seed), when its winner is chosen, and the winner.
    ab_seed: int | None = None
    ab_wait_until: datetime | None = None
    ab_winner: int | None = None
    send_delay_ms: int = 0

    @property
    def held_for(self) -> str | None:
        """What a sending broadcast waits for, when it waits: "ab_test" (the test's copies
        are out; the winner is chosen at `ab_wait_until`) or "hours" (the next readers' hour,
        `waiting_until`)."""
        if self.status != "sending":
            return None
        if self.ab_seed is not None and self.ab_winner is None and self.ab_wait_until:
            return "ab_test"
        if self.waiting_until is not None and self.waiting_until > utcnow():
            return "hours"
        return None

    @property
    def preparing(self) -> bool:
        """The worker is still writing the recipient list (in chunks, while it sends); a
        paused broadcast continues it on Resume, a cancelled one never does."""
        return self.status in (*ACTIVE, "paused") and self.snapshot_cursor < self.snapshot_until

    @property
    def cancelling(self) -> bool:
        """Cancelled, and the worker is still skipping the rows not sent yet (a large cancel
        is finished in chunks, broadside.campaigns.broadcasts.cancelling): the page keeps polling."""
        return self.status == "cancelled" and self.waiting > 0

    @property
    def prepared_percent(self) -> int:
        """How far the snapshot is through the subscribers (ids up to the press's highest)."""
        if self.snapshot_until <= 0:
            return 100
        return min(100, self.snapshot_cursor * 100 // self.snapshot_until)

    @property
    def about(self) -> int | None:
        """The "about M" of "N of about M": never less than what is already written."""
        if self.audience_estimate is None:
            return None
        return max(self.audience_estimate, self.total)

    @property
    def done(self) -> int:
        return self.sent + self.skipped + self.failed + self.unknown

    @property
    def waiting(self) -> int:
        """Not yet handled: pending, plus the few rows in flight."""
        return self.pending + self.sending

    @property
    def percent(self) -> int:
        if self.total <= 0:
            return 100 if self.status in TERMINAL else 0
        # Floor, so 100% means every row is handled, never 99.6% rounded up.
        return self.done * 100 // self.total

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def rate(self) -> float | None:
        """Sends per second: what the worker measured, else what the pace allows."""
        if self.send_rate and self.send_rate > 0:
            return self.send_rate
        if self.send_delay_ms > 0:
            return 1000.0 / self.send_delay_ms
        return None

    @property
    def rate_measured(self) -> bool:
        return bool(self.send_rate and self.send_rate > 0)

    @property
    def eta_seconds(self) -> float | None:
        if self.status not in ACTIVE or self.waiting == 0:
            return None
        rate = self.rate
        return self.waiting / rate if rate else None

    @property
    def eta_text(self) -> str:
        if self.status == "paused":
            return _("paused")
        if self.status not in ACTIVE:
            return "–"
        if self.waiting == 0:
            return _("preparing") if self.preparing else _("finishing")
        if self.held_for == "ab_test":
            return _("the rest go once the winner is chosen")
        if self.held_for == "hours" or self.send_at_local:
            return _("as each reader's hour comes")
        return duration_words(self.eta_seconds)

    @property
    def version(self) -> str:
        """Changes whenever a delivery changes status (every move goes through the counters)
        or the broadcast does: the page re-reads its deliveries table only when this moved.
        A chunk of the snapshot moves it too: its rows arrive as pending."""
        return ".".join(str(n) for n in (self.status, self.pending, self.sending, self.sent,
                                          self.skipped, self.failed, self.unknown))

    @property
    def poll_every(self) -> str | None:
        """How often the page asks again (an htmx trigger), or None when it is over."""
        if self.cancelling:
            return "every 1500ms"
        if self.terminal or self.status == "draft":
            return None
        if self.status == "scheduled":
            return "every 10s"
        return "every 1500ms"


def duration_words(seconds: float | None) -> str:
    if seconds is None:
        return _("unknown")
    if seconds < 60:
        return _("less than a minute")
    minutes = round(seconds / 60)
    if minutes < 60:
        return ngettext("about %(num)s minute", "about %(num)s minutes", minutes)
    hours, minutes = divmod(minutes, 60)
    if not minutes:
        return ngettext("about %(num)s hour", "about %(num)s hours", hours)
    return ngettext("about %(num)s hour %(minutes)s min", "about %(num)s hours %(minutes)s min",
                    hours, minutes=minutes)


# The read, built once: a Core statement of the table's columns (the ORM's attributes would
# be coerced, given a cache key and run through the ORM's execution for each poll: ~170 µs of
# the ~200 µs a read took on SQLite, where the statement itself takes ~10).
_broadcasts, _identities = Broadcast.__table__, Identity.__table__
_READ = (select(*(inspect(Broadcast).columns[attribute.key] for attribute in _COLUMNS),
                _identities.c.delay_ms)
         .select_from(_broadcasts.outerjoin(_identities,
                                            _identities.c.id == _broadcasts.c.identity_id))
         .where(_broadcasts.c.id == bindparam("broadcast_id")))


def read_progress(session: Session, broadcast_id: int, *, send_delay_ms: int = 0) -> Progress:
    """One indexed read of the broadcast's row (with its identity's pace; `send_delay_ms` is
    the default identity's); no COUNT over deliveries."""
    row = session.execute(_READ, {"broadcast_id": broadcast_id}).first()
    if row is None:
        raise NotFound(_("There is no such broadcast."))
    *columns, identity_delay = row
    pace = send_delay_ms if identity_delay is None else identity_delay
    return Progress(*columns, send_delay_ms=pace)  # type: ignore[misc]  # the columns are its fields, in order
