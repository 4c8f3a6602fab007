"""What the ways of sending share within one slice: the source, its outcomes, the counters,
the hourly limit, the stop, and the verdict of the message left in flight.

A way of sending (jobs.one_by_one, jobs.riding, jobs.batches) is chosen once per slice from
the transport's shape (jobs.engine) and gets one `Turn`. Whatever way sends, the rules are
the same ones, kept here: an attempt is counted where it is made; a stop with a pause reason
(invariant 6, channel-wide) releases every claimed row before what the rows belong to pauses,
then pauses the identity; the verdict of a message on the wire is read and recorded before
any way out of the slice (`settle`).
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from broadside.core.site_settings import owner_zone
from broadside.core.timeutil import epoch_to_stored, local_format
from broadside.delivery.identities import lifecycle as identity_lifecycle
from broadside.delivery.transports import DeliveryError, Transport
from broadside.delivery.waits import add_wait_seconds
from jobs.outcomes import Outcomes
from jobs.rows import Decision, Prepared, Row, RowSource
from jobs.runtime import Runtime

log = logging.getLogger("broadside.worker")


class Sending(Protocol):
    """One way of sending a claimed batch."""

    # Whether messages are built as a JSON API's fields rather than MIME (jobs.recheck).
    fields: bool

    def batch_size(self, adaptive: int) -> int:
        """Rows to claim next, given what the achieved rate suggests (`adaptive`)."""
        ...

    def send(self, rows: list[Row], deadline: float) -> str | None:
        """Re-check, build, send and record each claimed row (each one released, skipped,
        failed or handed to the transport); the reason to stop the slice, or None."""
        ...


class Turn:
    def __init__(self, session: Session, runtime: Runtime, source: RowSource,
                 transport: Transport) -> None:
        self.session = session
        self.rt = runtime
        self.source = source
        self.transport = transport
        self.outcomes = Outcomes(session, runtime, source.ledger, pausable=source.pausable)
        self.attempts = 0
        self.skipped = 0
        self.waited_for_cap = 0  # times this slice waited for the hourly limit
        self.pause_checked = False  # its identity's pause, read once (jobs.engine)
        # The last message of the previous batch, on the wire awaiting its verdict while the
        # next batch is claimed (jobs.engine); None between slices.
        self.pending: Prepared | None = None

    def straight_on(self) -> bool:
        """Whether the loop goes straight to its next claim, with no wait and no stop in
        between: only then may a message stay in flight across it."""
        return self.pause_checked and self.rt.held_for() <= 0 and self.rt.hourly.limit <= 0

    def sleep(self, seconds: float) -> None:
        self.rt.stop.wait(seconds)

    def counted(self, messages: int) -> None:
        """One request carrying `messages` is about to be made: counted for the slice, the
        System page's rate and the hourly limit."""
        self.attempts += messages
        self.rt.sent_requests += 1
        try:
            for _ in range(messages):
                self.rt.hourly.record()
        except RedisError:
            pass  # the cap is advisory when Redis hiccups

    def hourly_room(self, deadline: float) -> bool:
        """Whether the hourly limit leaves room for a send now; waits for it (stop-aware,
        within the slice) with a notice saying until when."""
        cap = self.rt.hourly
        if cap.limit <= 0:
            return True
        try:
            free_at = cap.free_at()
        except RedisError:
            return True
        if free_at is None:
            return True
        # Shown on the broadcast's page: the owner's zone, named as every page names it.
        when = local_format(epoch_to_stored(free_at), owner_zone(self.session), "%H:%M %Z")
        self.source.notice(
            f"Waiting for the hourly limit ({cap.limit} per hour): sending resumes at {when}.")
        waited_from = time.monotonic()
        self.waited_for_cap += 1
        self.sleep(max(0.0, min(free_at - time.time(), deadline - time.monotonic())))
        try:  # a running total in Redis of the time spent waiting for the cap, for /metrics
            add_wait_seconds(cap.redis, self.rt.config["BROADSIDE_NAMESPACE"], "hourly",
                             time.monotonic() - waited_from)
        except RedisError:
            pass
        if cap.free_at() is None:
            self.source.notice(None)
            return True
        return False

    def message_of(self, row: Row, decision: Decision) -> Prepared | None:
        """The message a re-check built, or None with why not recorded: held (released),
        skipped, or unbuildable (failed). A stop is the caller's to handle first."""
        if decision.hold:
            self.outcomes.release([row], cancelled=False)
        elif decision.skip is not None:
            self.outcomes.skipped(row, decision.skip)
            self.skipped += 1
        elif decision.fail is not None:
            self.outcomes.unbuildable(row, decision.fail)
        else:
            assert decision.message is not None
            return decision.message
        return None

    def stop(self, unattempted: list[Row], stop: str) -> str:
        """Release what was never attempted; on a channel-wide refusal, pause what the rows
        belong to, then their identity."""
        self.outcomes.release(unattempted, cancelled=False)
        reason = self.outcomes.pause_reason
        if reason:
            # Every claimed row is back to pending before the owner sees "paused".
            self.outcomes.flush()
            self.source.pause(reason)
            # The channel is the identity's: its other broadcasts, automations and
            # transactional mail hold too, until the owner resumes (or fixes its transport).
            if identity_lifecycle.pause(self.session, self.rt.identity_id, reason,
                                        label=self.rt.identity_name):
                log.warning("identity %s paused: %s", self.rt.identity_name, reason)
            self.session.commit()
        return stop

    def finish(self, message: Prepared) -> str | None:
        """Read the verdict on `message` (on the wire since its `start`) and record it; the
        reason to stop, if it gives one."""
        try:
            result = self.transport.finish()
        except DeliveryError as error:
            return self.outcomes.refused(message, error)
        except Exception as error:  # unexpected: we cannot know if it went out
            return self.outcomes.unexpected(message, error)
        self.outcomes.sent(message, result.code, result.reply, result.provider_id)
        return None

    def settle(self) -> str | None:
        """Read and record the verdict of the message left in flight by the last batch; the
        reason to stop, if that verdict gives one (the rows' owner is then paused)."""
        if self.pending is None:
            return None
        message, self.pending = self.pending, None
        stop = self.finish(message)
        return self.stop([], stop) if stop else None
