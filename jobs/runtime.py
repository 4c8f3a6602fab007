"""What one stream shares between its jobs: its identity, lease, pacer, transport, flags.

Set up once per stream by `jobs.stream.Stream`, in the stream's own thread; the RQ job
functions in `jobs.tasks` read it with `get()`. One worker process serves many streams, a
thread each (jobs.worker), so the runtime is bound per thread (`bind`): a job always sees
the runtime of the stream whose thread runs it, never another identity's lease or pace.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core.models import Identity, SiteSettings
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.lease import Lease, LeaseKeeper
from broadside.delivery.queues import Jobs
from broadside.delivery.transports import Transport
from jobs.pacing import Pacer

# A provider that throttles this many times in a row without a send in between: the stream
# stops asking and the broadcast pauses with the reason (never a hot loop against a 429).
MAX_THROTTLES = 20
THROTTLE_FIRST_WAIT_S = 1.0
THROTTLE_MAX_WAIT_S = 60.0


class LeasedPacer(Pacer):
    """The pace, then the lease (invariant 1), right before each MAIL FROM or provider request:
    a message starts only while the stream's lease is surely this process's (a local check,
    no round trip; see broadside.delivery.lease). Past the lease's sure window it waits for the
    keeper's next renewal, and raises LeaseLost if the lease is gone: the message is then
    recorded as an unexpected failure (unknown), never sent by two workers at once."""

    def __init__(self, delay_ms: int, keeper: LeaseKeeper, stop: threading.Event | None = None) -> None:
        super().__init__(delay_ms)
        self.keeper = keeper
        self.stop = stop

    def wait(self) -> float:
        now = super().wait()
        if not self.keeper.lease.fresh():
            self.keeper.wait_fresh(self.stop)
        return now


@dataclass
class Runtime:
    lease: Lease
    pacer: Pacer
    transport: Transport
    hourly: HourlyCap
    config: dict[str, Any]
    jobs: Jobs
    instance_path: str
    stop: threading.Event = field(default_factory=threading.Event)
    identity_id: int | None = None  # the identity this stream sends for (None: the default)
    identity_name: str = "default"
    running_broadcast: int | None = None
    running_automations: bool = False  # a slice of automation messages is running
    # Connection failures in a row, across recipients: past a bound the channel is down.
    connection_failures: int = 0
    # Throttles in a row (429 and the like), across requests: past a bound, pause.
    throttles: int = 0
    # Rows per second the last batch of a broadcast achieved (sizes the next claim).
    rows_per_second: float = 0.0
    # No request before this moment (time.monotonic): a provider's "slow down".
    hold_until: float = 0.0
    # Requests (sends) since the last rate report, for the System page.
    sent_requests: int = 0
    sent_requests_since: float = field(default_factory=time.monotonic)

    @property
    def stream(self) -> str:
        return "default" if self.identity_id is None else f"identity:{self.identity_id}"

    def throttled(self, retry_after: float | None) -> float:
        """The provider asked us to slow down: hold the stream's next request back (by its
        Retry-After, else a doubling wait) and return how long. The senders wait it out
        with the stop event (a deploy is never stuck behind a long Retry-After)."""
        self.throttles += 1
        wait = retry_after if retry_after and retry_after > 0 else min(
            THROTTLE_MAX_WAIT_S, THROTTLE_FIRST_WAIT_S * 2 ** (self.throttles - 1))
        self.hold_until = max(self.hold_until, time.monotonic() + min(wait, 3600.0))
        return wait

    def held_for(self) -> float:
        """Seconds left of a provider's "slow down" (0: none)."""
        return max(0.0, self.hold_until - time.monotonic())

    def pause_reason(self, session: Session) -> str | None:
        """Why this stream's identity is paused, or None when it may send (one query)."""
        if self.identity_id is None:
            reason = session.scalar(select(SiteSettings.default_pause_reason).where(SiteSettings.id == 1))
        else:
            row = session.execute(select(Identity.status, Identity.pause_reason)
                                  .where(Identity.id == self.identity_id)).first()
            reason = None if row is None or row.status == "active" else (
                row.pause_reason or f"the identity is {row.status}")
        return reason


# The stream thread's own runtime (`bind`); `current` is the fallback of a thread that bound
# none: a test that runs one job in its own thread sets it.
_local = threading.local()
current: Runtime | None = None


def bind(rt: Runtime | None) -> None:
    """This thread's runtime from now on (None: none). Called by each stream's thread."""
    _local.runtime = rt


def get() -> Runtime:
    rt = getattr(_local, "runtime", None) or current
    if rt is None:
        raise RuntimeError("jobs run inside the worker (`python -m jobs`), which sets up the runtime")
    return rt
