"""One slice of a broadcast: send for a few seconds from the rows still pending, then hand over.

Invariant 7 (resume, never restart): each slice continues from the rows still `pending` and
enqueues its continuation, so a deploy, a SIGTERM or a SIGKILL loses at most the rows in
flight, and transactional mail waits at most one slice. Invariant 1: the lease is checked
before every claim. Invariant 4: rows are claimed (pending -> sending) and committed before
any SMTP. Invariant 2: the pace is kept by the transport, right before MAIL FROM.

The bookkeeping between two batches (recording the outcomes, the lease check, the next claim
and its commit) runs while the previous batch's last message is with the server, after its
final dot and before its reply is read (`pending`), so the database's round trips overlap the
server's work instead of following it. That message's own outcome is recorded with the next
batch's; the next claim is still committed before any of its rows is sent (invariant 4), the
lease is still checked before it (invariant 1), and every way out of the loop reads and
records the verdict first. Rows exposed to a crash: the claimed batch plus that one message.

At full speed (no pace, no hourly limit) on a server that pipelines, a batch goes further
(`_send_riding`): each next person's MAIL/RCPT/DATA ride in the same write as the previous
body (RFC 2920 3.1), so the server answers both at once and the envelope's round trip leaves
the wire's critical path. Their re-check is made just before that write; a verdict or a
re-check that says stop writes nothing more (the rider abandoned before any final dot).

This module is the loop; the send-time re-check and message build are in jobs.recheck
(invariant 3), the outcomes and their policy in jobs.outcomes and jobs.classify (invariant
6), the broadcast's state changes in broadside.campaigns.broadcasts.lifecycle, and every delivery's
in broadside.campaigns.broadcasts.ledger.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from redis.exceptions import RedisError
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import ledger, lifecycle
from broadside.core.models import Broadcast, Delivery, Revision
from broadside.core.site_settings import owner_zone
from broadside.core.timeutil import epoch_to_stored, local_format, utcnow
from broadside.delivery.identities import lifecycle as identity_lifecycle
from broadside.delivery.transports import DeliveryError
from broadside.delivery.waits import add_wait_seconds
from jobs.batches import send_batch
from jobs.outcomes import Outcomes
from jobs.recheck import Decision, Prepared, Recheck, Row
from jobs.runtime import Runtime

log = logging.getLogger("broadside.worker")

SLICE_SECONDS = 3.0
SLICE_MAX_SENDS = 1000
# Rows claimed (and so exposed to a crash) at once: about EXPOSURE_SECONDS of sends at the
# rate the worker is achieving, at most MAX_BATCH. At the default pace (200 ms), or with a
# slow server, that is one row: a crash loses at most the row in flight. Only when sends are
# fast are claims and outcomes batched, to keep up with the server (each batch costs a few
# fixed statements and commits).
EXPOSURE_SECONDS = 0.2
MAX_BATCH = 100
FIRST_BATCH = 20  # before any rate has been seen, at SEND_DELAY_MS=0


def paused_notice(identity_name: str, reason: str) -> str:
    return (f"Waiting: the sending identity “{identity_name}” is paused ({reason}). "
            "Resume it on the System page once the cause is fixed.")


@dataclass
class SliceResult:
    outcome: str  # continue | finished | stopped | paused | held | lost-lease | nothing
    attempts: int = 0
    skipped: int = 0


def batch_size_for(rows_per_second: float) -> int:
    """Rows to claim at once: about EXPOSURE_SECONDS of work at this rate."""
    return max(1, min(MAX_BATCH, int(rows_per_second * EXPOSURE_SECONDS)))


def pace_limit(delay_seconds: float) -> float:
    """The fastest the pace allows, in sends per second."""
    return 1.0 / delay_seconds if delay_seconds > 0 else float("inf")


def start(session: Session, broadcast_id: int) -> Broadcast | None:
    """queued -> sending (a lifecycle transition), then the broadcast as it now stands."""
    if lifecycle.move(session, broadcast_id, "start"):
        log.info("broadcast started")
    session.commit()
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is not None:
        session.refresh(broadcast)
    return broadcast


def finish_if_done(session: Session, broadcast_id: int) -> bool:
    """sending -> sent, only when no row is pending or in flight (one guarded UPDATE)."""
    done = lifecycle.move(session, broadcast_id, "finish")
    if done:
        log.info("broadcast finished")
    session.commit()
    return done


class Slice:
    KEY_KIND = "d"  # idempotency keys of this slice's batches name deliveries

    def __init__(self, session: Session, runtime: Runtime, broadcast_id: int) -> None:
        self.session = session
        self.rt = runtime
        self.broadcast_id = broadcast_id
        self.outcomes = Outcomes(session, runtime, broadcast_id)
        self.attempts = 0
        self.skipped = 0
        # The rate the last batches achieved (kept by the runtime from slice to slice), never
        # above what the pace allows.
        rate = min(runtime.rows_per_second or FIRST_BATCH / EXPOSURE_SECONDS, pace_limit(runtime.pacer.delay))
        # A provider with a batch endpoint takes one full request per claim: the exposure to
        # a crash is that one batch (jobs.batches).
        self.batching = int(getattr(runtime.transport, "batch_limit", 1)) > 1
        self.batch_size = runtime.transport.batch_limit if self.batching else batch_size_for(rate)
        self.decide_seconds = 0.0  # how long a re-check and build take (a moving average)
        self.waited_for_cap = 0  # times this slice waited for the hourly limit
        self.pause_checked = False  # its identity's pause, read once (see _stream_open)
        # The last message of the previous batch, on the wire awaiting its verdict while the
        # next batch is claimed (see the module docstring); None between slices.
        self.pending: Prepared | None = None

    # -------------------------------------------------------------- the loop

    def run(self) -> SliceResult:
        broadcast = start(self.session, self.broadcast_id)
        if broadcast is None or broadcast.status != "sending":
            return SliceResult("nothing")
        revision = self.session.scalar(select(Revision).where(Revision.broadcast_id == broadcast.id))
        if revision is None:
            self._pause("This broadcast has no frozen content; duplicate it and send the copy.")
            return SliceResult("paused")

        self.from_email = revision.from_email
        self.recheck = Recheck(self.session, self.rt, broadcast.id, broadcast.list_id, revision,
                               broadcast.skip_if_received_within_hours)
        started = time.monotonic()
        deadline = started + float(self.rt.config.get("SLICE_SECONDS", SLICE_SECONDS))
        try:
            outcome = self._loop(deadline)
        finally:
            if self.outcomes.batch.outcomes:
                self.outcomes.flush()
        elapsed = max(time.monotonic() - started, 1e-6)
        if self.attempts:
            # A counter, not a state: written here, not through the lifecycle.
            self.session.execute(
                update(Broadcast)
                .where(Broadcast.id == self.broadcast_id)
                .values(send_rate=round(self.attempts / elapsed, 2))
            )
            self.session.commit()
        log.info(
            "slice done: %s, %d sent or attempted, %d skipped in %.2fs",
            outcome,
            self.attempts,
            self.skipped,
            elapsed,
        )
        return SliceResult(outcome, self.attempts, self.skipped)

    def _loop(self, deadline: float) -> str:
        while True:
            if self.rt.stop.is_set() or time.monotonic() >= deadline or self.attempts >= SLICE_MAX_SENDS:
                return self._settle() or "continue"
            if self.pending is not None and not self._straight_on():
                # Something may wait or stop here: the message in flight is settled first.
                stop = self._settle()
                if stop:
                    return stop
            held = self._stream_open(deadline)
            if held:
                return held
            # Invariant 1: the lease is re-checked before every claim. A claim covers at most
            # ~0.2 s of sends, so a worker that lost its lease stops within that.
            if not self._lease_ok():
                return self._settle() or "lost-lease"
            if not self._hourly_room(deadline):
                return "continue"
            # Invariant 4, claim before send: pending -> sending, committed before any SMTP.
            rows = self._claim_due()
            if not rows:
                stop = self._settle()
                if stop:
                    return stop
                self.outcomes.flush()
                if self._finish_if_done():
                    return "finished"
                if not self._wait_for_due(deadline):
                    return "continue"
                continue
            self.session.commit()
            began = time.monotonic()
            mine = rows
            if self.batching:
                stop = send_batch(self, mine, deadline)
                if stop == "paused" or self.outcomes.pause_reason:
                    stop = self._stop([], "paused")
            elif self._may_ride():
                stop = self._send_riding(mine, deadline)
            else:
                stop = self._send_claimed(mine, deadline)
            self.outcomes.flush()
            if stop:
                return stop
            if not self.batching:
                self._adapt_batch(len(mine), time.monotonic() - began)

    def _straight_on(self) -> bool:
        """Whether the loop goes straight to its next claim, with no wait and no stop in
        between: only then may a message stay in flight across it."""
        return self.pause_checked and self.rt.held_for() <= 0 and self.rt.hourly.limit <= 0

    def _settle(self) -> str | None:
        """Read and record the verdict of the message left in flight by the last batch; the
        reason to stop, if that verdict gives one (the broadcast is then paused)."""
        if self.pending is None:
            return None
        message, self.pending = self.pending, None
        stop = self._finish(message)
        return self._stop([], stop) if stop else None

    def _finish_if_done(self) -> bool:
        return finish_if_done(self.session, self.broadcast_id)

    def _stream_open(self, deadline: float) -> str | None:
        """None when the identity may send now; "held" when it is paused (with a notice;
        no continuation is queued: the owner's resume, or the worker's maintenance once it
        is resumed, queues the next slice). A provider's "slow down" is waited out here,
        stop-aware, within this slice.

        The pause is read once, when the slice starts: only this stream's own worker pauses
        its identity (`_stop`, which ends the slice), so a running slice cannot become paused
        by anyone else, and the send loop carries no extra query per claim."""
        if not self.pause_checked:
            self.pause_checked = True
            reason = self.rt.pause_reason(self.session)
            self.session.commit()
            if reason is not None:
                self._notice(paused_notice(self.rt.identity_name, reason))
                return "held"
        held = self.rt.held_for()
        if held > 0:
            self._sleep(min(held, max(0.0, deadline - time.monotonic())))
            if self.rt.held_for() > 0:
                return "continue"
        return None

    def _claim_due(self) -> list[Row]:
        """The next due rows (at most `batch_size`), claimed: pending -> sending, not yet
        committed (the loop commits before any SMTP). A broadcast's rows are read and claimed
        by one guarded statement (`ledger.claim_due`); jobs.automations overrides this for
        automation messages."""
        return [Row(*r) for r in ledger.claim_due(self.session, self.broadcast_id, self.batch_size)]

    def _wait_for_due(self, deadline: float) -> bool:
        """Rows wait for their retry time: sleep until the first is due, within this slice."""
        earliest = self.session.scalar(
            select(func.min(Delivery.next_attempt_at)).where(
                Delivery.broadcast_id == self.broadcast_id, Delivery.status == "pending"
            )
        )
        self.session.commit()
        if earliest is None:
            return False  # nothing pending at all; rows in flight belong to a crashed run
        wait = (earliest - utcnow()).total_seconds()
        if time.monotonic() + wait >= deadline:
            self._sleep(max(0.0, deadline - time.monotonic()))
            return False
        self._sleep(max(wait, 0.0))
        return True

    def _sleep(self, seconds: float) -> None:
        self.rt.stop.wait(seconds)

    def _adapt_batch(self, rows: int, seconds: float) -> None:
        """Size the next claim to about EXPOSURE_SECONDS at the rate this batch achieved
        (sends and skips, bookkeeping included), never above what the pace allows."""
        if rows <= 0 or seconds <= 0:
            return
        rate = min(rows / seconds, pace_limit(self.rt.pacer.delay))
        self.rt.rows_per_second = rate
        self.batch_size = batch_size_for(rate)

    def _lease_ok(self) -> bool:
        try:
            return self.rt.lease.still_mine()
        except RedisError:
            return False

    def _hourly_room(self, deadline: float) -> bool:
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
        self._notice(
            f"Waiting for the hourly limit ({cap.limit} per hour): sending resumes at {when}.",
        )
        waited_from = time.monotonic()
        self.waited_for_cap += 1
        self._sleep(max(0.0, min(free_at - time.time(), deadline - time.monotonic())))
        try:  # a running total in Redis of the time spent waiting for the cap, for /metrics

            add_wait_seconds(
                cap.redis, self.rt.config["BROADSIDE_NAMESPACE"], "hourly", time.monotonic() - waited_from
            )
        except RedisError:
            pass
        if cap.free_at() is None:
            self._notice(None)
            return True
        return False

    def _notice(self, notice: str | None) -> None:
        lifecycle.set_notice(self.session, self.broadcast_id, notice)
        self.session.commit()

    def _pause(self, reason: str) -> None:
        """The worker's side of the one pause (`lifecycle.pause`, which the owner's uses too)."""
        if lifecycle.pause(self.session, self.broadcast_id, reason):
            log.warning("broadcast paused: %s", reason)
        self.session.commit()

    # -------------------------------------------------------------- one batch

    def _send_claimed(self, rows: list[Row], deadline: float) -> str | None:
        """Each person in turn: re-check, build, send, read the server's verdict.

        `self.pending` (the previous batch's last message) is the first in flight; this
        batch's last is left in flight the same way when the batch ends.

        When the pace leaves no wait before the next send (SEND_DELAY_MS=0, or a delay
        already spent), the next person is re-checked and their message built while the server
        is still taking the current one (after its final dot, before its reply): their MAIL
        FROM follows that reply at once, so the check is still the last thing before their
        send (invariant 3), and the server's work overlaps ours. Otherwise the pace is waited
        out first and the re-check comes after the wait.
        """
        outcomes, decide, pacer = self.outcomes, self.recheck.decide, self.rt.pacer
        in_flight, self.pending = self.pending, None  # the previous batch's last, if any
        for index, row in enumerate(rows):
            decision: Decision | None = None
            if in_flight is not None:
                if pacer.ready():
                    try:
                        decision = decide(row)
                    except Exception:
                        self._finish(in_flight)  # its verdict is on the way: record it first
                        raise
                stop = self._finish(in_flight)
                in_flight = None
                if stop:
                    return self._stop(rows[index:], stop)
            if decision is None:
                # The pace is waited out first, so the re-check is as late as it can be: it
                # starts just early enough to be done (with the message built) when the pace
                # allows the send; the transport's own wait keeps the floor exact.
                pacer.settle(lead=2 * self.decide_seconds)
                began = pacer.clock()
                decision = decide(row)
                took = pacer.clock() - began
                self.decide_seconds = (
                    took if not self.decide_seconds else 0.8 * self.decide_seconds + 0.2 * took
                )
            if decision.stop is not None:
                outcomes.release(rows[index:], cancelled=(decision.stop == lifecycle.CANCELLED))
                return "stopped"
            if decision.hold:
                outcomes.release([row], cancelled=False)  # its automation is held: not now
                continue
            if decision.skip is not None:
                outcomes.skipped(row, decision.skip)
                self.skipped += 1
                continue
            waited = self.waited_for_cap
            if not self._hourly_room(deadline):
                outcomes.release(rows[index:], cancelled=False)
                return "continue"
            if self.waited_for_cap > waited:
                decision = decide(row)  # the hourly limit made us wait: ask again (invariant 3)
                if decision.stop is not None or decision.skip is not None or decision.hold:
                    outcomes.release(rows[index:], cancelled=False)
                    return "continue"
            if decision.fail is not None:
                outcomes.unbuildable(row, decision.fail)
                continue
            assert decision.message is not None
            on_the_wire, stop = self._start(decision.message)
            if stop:
                return self._stop(rows[index + 1 :], stop)
            if on_the_wire:
                in_flight = decision.message
        # The last message's verdict is read after the next claim (`_loop`, `_settle`).
        self.pending = in_flight
        return None

    # -------------------------------------------------------------- one batch, riding

    def _may_ride(self) -> bool:
        """Whether this batch lets each next envelope ride behind the previous body (RFC 2920;
        broadside.delivery.transports): at full speed only (no pace to keep, no hourly limit, no hold),
        on a live connection to a server that pipelines."""
        follows = getattr(self.rt.transport, "follows", None)
        return (follows is not None and not self.batching and self.rt.pacer.delay <= 0
                and self._straight_on() and bool(follows()))

    def _send_riding(self, rows: list[Row], deadline: float) -> str | None:
        """`_send_claimed` at full speed on a server that pipelines: the next person is
        re-checked and their message built while the server takes the body on the wire, and
        *before* the next body is written, so their MAIL/RCPT/DATA ride in the same write as
        that body. The server answers the body and the envelope together: per message, one
        round trip fewer on the wire's critical path.

        Invariant 3: a person's re-check is still the last read before their MAIL FROM, which
        goes out in the write that follows it. Nothing is written once a verdict or a
        re-check says stop: an envelope already riding is abandoned (the connection dropped
        before any dot, so nothing of it is delivered) and its row released, not attempted,
        as is every message decided but not yet written. Invariant 4 is unchanged: every row
        here was claimed and committed before this batch began.
        """
        outcomes, transport = self.outcomes, self.rt.transport
        in_flight, self.pending = self.pending, None  # body written, verdict unread
        riding: tuple[Prepared, Row] | None = None  # its envelope behind in_flight's body
        ahead: list[tuple[Prepared, Row]] = []  # decided, nothing written yet
        index = 0
        halt: str | None = None  # a re-check saw the broadcast leave `sending`

        def unwritten() -> list[Row]:
            return [r for _, r in ([riding] if riding else []) + ahead] + rows[index:]

        while True:
            # The next people's re-checks and messages, while the server works: one to ride
            # behind the body about to be written, two when nothing rides yet (one to start,
            # one behind it).
            while halt is None and index < len(rows) and len(ahead) < (1 if riding else 2):
                row = rows[index]
                try:
                    decision = self.recheck.decide(row)
                except Exception:
                    self._let_go(in_flight, riding)
                    outcomes.release([r for _, r in ahead], cancelled=False)
                    raise
                if decision.stop is not None:
                    halt = decision.stop
                    break
                index += 1
                message = self.message_of(row, decision)
                if message is not None:
                    ahead.append((message, row))
            stop = self._finish(in_flight) if in_flight is not None else None
            in_flight = None
            if stop or halt is not None or not self._straight_on():
                # Nothing more is written: what rides is abandoned, the rest released.
                if riding is not None:
                    transport.abandon()
                left = unwritten()
                if stop:
                    return self._stop(left, stop)
                if halt is not None:
                    outcomes.release(left, cancelled=(halt == lifecycle.CANCELLED))
                    return "stopped"
                outcomes.release(left, cancelled=False)  # the loop waits out the hold
                return None
            # This turn's message: the one riding (its replies come now), else the first ahead.
            current, rides = riding, riding is not None
            riding = None
            if current is not None and not transport.following:
                outcomes.release([current[1]], cancelled=False)  # its connection went: not sent
                current, rides = None, False
            if current is None:
                if not ahead:
                    if index < len(rows):
                        continue  # more people to re-check before anything is written
                    return None  # every row decided, nothing left on the wire
                current = ahead.pop(0)
            message = current[0]
            then = ahead[0][0] if ahead else None
            on_the_wire, stop = self._start(message, then, rides)
            if then is not None and transport.following:
                riding = ahead.pop(0)
            if stop:
                if riding is not None:  # refused after its body: nothing of the rider is read
                    transport.abandon()
                return self._stop(unwritten(), stop)
            if on_the_wire:
                in_flight = message
            if not ahead and riding is None and index >= len(rows):
                self.pending = in_flight  # read after the next claim (`_loop`, `_settle`)
                return None

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

    def _let_go(self, in_flight: Prepared | None, riding: tuple[Prepared, Row] | None) -> None:
        """On the way out with an error: the body on the wire gets its verdict recorded, and
        the envelope behind it, sent nowhere, is abandoned and its row released."""
        if in_flight is not None:
            self._finish(in_flight)
        if riding is not None:
            self.rt.transport.abandon()
            self.outcomes.release([riding[1]], cancelled=False)

    def _stop(self, unattempted: list[Row], stop: str) -> str:
        self.outcomes.release(unattempted, cancelled=False)
        if self.outcomes.pause_reason:
            # Every claimed row is back to pending before the owner sees "paused".
            self.outcomes.flush()
            self._pause(self.outcomes.pause_reason)
            # The channel is the identity's: its other broadcasts, automations and
            # transactional mail hold too, until the owner resumes (or fixes its transport).
            if identity_lifecycle.pause(self.session, self.rt.identity_id, self.outcomes.pause_reason,
                                        label=self.rt.identity_name):
                log.warning("identity %s paused: %s", self.rt.identity_name, self.outcomes.pause_reason)
            self.session.commit()
        return stop

    def _start(self, message: Prepared, then: Prepared | None = None,
               rides: bool = False) -> tuple[bool, str | None]:
        """Pace, then the mail transaction up to the end of DATA. Returns whether the message
        is on the wire awaiting the server's verdict (read by `_finish`), and the reason to
        stop, if any; a refusal before that is recorded here. `then`: the next message, whose
        envelope rides behind this body when the transport can (`_send_riding`); `rides`:
        this message's own envelope rode behind the previous body (its replies come now)."""
        rt = self.rt
        self.attempts += 1
        rt.sent_requests += 1
        try:
            rt.hourly.record()
        except RedisError:
            pass
        transport = rt.transport
        after = (then.from_email or self.from_email, then.email) if then is not None else None
        try:
            # Invariant 2: pace the side effect (inside the transport, right before MAIL FROM);
            # only real attempts wait, skipped recipients never do.
            if rides:
                transport.start_next(message.wire, then=after, pace=rt.pacer.wait)
            elif after is not None:
                transport.start(message.from_email or self.from_email, message.email, message.wire,
                                pace=rt.pacer.wait, then=after)
            else:
                transport.start(message.from_email or self.from_email, message.email, message.wire,
                                pace=rt.pacer.wait)
        except DeliveryError as error:
            return False, self.outcomes.refused(message, error)
        except Exception as error:  # unexpected: we cannot know if it went out
            return False, self.outcomes.unexpected(message, error)
        return True, None

    def _finish(self, message: Prepared) -> str | None:
        try:
            result = self.rt.transport.finish()
        except DeliveryError as error:
            return self.outcomes.refused(message, error)
        except Exception as error:  # unexpected: we cannot know if it went out
            return self.outcomes.unexpected(message, error)
        self.outcomes.sent(message, result.code, result.reply, result.provider_id)
        return None
