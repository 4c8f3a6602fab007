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

from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core.models import Identity, SiteSettings
from broadside.delivery.account_limit import Ceiling, CeilingStopped, held_for
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.lease import Lease, LeaseKeeper
from broadside.delivery.queues import Jobs
from broadside.delivery.transports import DeliveryError, Transport
from broadside.mail.verp import ReturnPath
from jobs.pacing import Pacer

# A provider that throttles this many times in a row without a send in between: the stream
# stops asking and the broadcast pauses with the reason (never a hot loop against a 429).
MAX_THROTTLES = 20
THROTTLE_FIRST_WAIT_S = 1.0
THROTTLE_MAX_WAIT_S = 60.0
ACCOUNT_HOLD_READ_S = 0.25


class LeasedPacer(Pacer):
    """The pace, then the account's ceiling, then the lease (invariant 1), right before each
    MAIL FROM or provider request. The identity's own pace is a floor; the ceiling
    (broadside.delivery.account_limit, one atomic Redis script) keeps every identity of the
    same provider account, in every worker, under the account's one rate together. A message
    starts only while the stream's lease is surely this process's (a local check, no round
    trip; see broadside.delivery.lease). Past the lease's sure window it waits for the
    keeper's next renewal, and raises LeaseLost if the lease is gone: the message is then
    recorded as an unexpected failure (unknown), never sent by two workers at once. A stop
    while the ceiling holds the request is a `DeliveryError` of phase `request`: not sent."""

    def __init__(self, delay_ms: int, keeper: LeaseKeeper, stop: threading.Event | None = None,
                 ceiling: Ceiling | None = None) -> None:
        super().__init__(delay_ms)
        self.keeper = keeper
        self.stop = stop
        self.ceiling = ceiling

    @property
    def limited(self) -> bool:
        """Whether the account has a ceiling to keep (no full-speed riding then)."""
        return self.ceiling is not None and self.ceiling.rate is not None

    def ready(self) -> bool:
        # The last answer of the account's script said whether a slot is left: no round trip.
        return super().ready() and (not self.limited or bool(self.ceiling and self.ceiling.slots_left))

    def settle(self, lead: float = 0.0) -> float:
        """The pace, then the account's next free slot (looked at, not taken), `lead` early:
        the re-check before the send is made at the end of both waits."""
        now = super().settle(lead)
        if self.ceiling is not None and self.limited:
            try:
                self.ceiling.wait(self.stop, take=False, lead=lead)
            except CeilingStopped:
                pass  # the stop is noticed by the sender; the send itself asks again
            now = self.clock()
        return now

    def wait(self) -> float:
        super().settle()  # the identity's own pace
        if self.ceiling is not None:
            try:
                self.ceiling.wait(self.stop)
            except CeilingStopped as exc:
                raise DeliveryError("request", None, f"not sent: {exc}") from None
        now = self.clock()
        self._last_start = now
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
    # The provider account's ceiling, shared with its other identities (None: the outbox).
    ceiling: Ceiling | None = None
    # The reputation guard's last look (jobs/maintenance.py): what it saw (the newest mark and
    # the lines) and when (time.monotonic).
    reputation_seen: tuple[object, ...] | None = None
    reputation_checked_at: float = float("-inf")
    # Its VERP envelope sender (an SMTP identity with a bounce mailbox); None: the From.
    return_path: ReturnPath | None = None
    _account_hold_until: float = 0.0
    _account_hold_read: float = float("-inf")

    def mail_from(self, message_id: str, from_email: str) -> str:
        """The envelope sender (MAIL FROM) of the message with this Message-ID."""
        if self.return_path is None:
            return from_email
        return self.return_path.mail_from(message_id, from_email)

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
        if self.ceiling is not None:
            try:  # the whole account holds: every stream of it, in every worker
                self.ceiling.hold(wait)
            except RedisError:
                pass  # this stream still holds; the others meet the provider's 429 themselves
        return wait

    def held_for(self) -> float:
        """Seconds left of a provider's "slow down" (0: none): this stream's, or its account's
        (read from Redis at most every ACCOUNT_HOLD_READ_S)."""
        now = time.monotonic()
        if self.ceiling is not None and now - self._account_hold_read >= ACCOUNT_HOLD_READ_S:
            self._account_hold_read = now
            try:
                self._account_hold_until = now + held_for(self.ceiling.redis, self.ceiling.namespace,
                                                          self.ceiling.digest)
            except RedisError:
                pass  # the ceiling's own wait holds the request in any case
        return max(0.0, self.hold_until - now, self._account_hold_until - now)

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
