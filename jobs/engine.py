"""The one send engine: a slice of a row source, sent for a few seconds, then handed over.

Every kind of mail goes through this loop: a broadcast's deliveries (jobs.broadcasts), the
due automation messages (jobs.automations) and transactional mail (jobs.transactional) are
row sources (jobs.rows.RowSource); how a claimed batch goes out is chosen once per slice from
the transport's shape (broadside.delivery.transports): one by one (jobs.one_by_one), with each
next envelope riding behind the previous body (jobs.riding), or as one provider request
(jobs.batches). The loop is: lease -> claim -> re-check -> pace -> send -> settle.

Invariant 7 (resume, never restart): each slice continues from the rows still `pending` and
its job enqueues the continuation, so a deploy, a SIGTERM or a SIGKILL loses at most the rows
in flight, and transactional mail waits at most one slice. The re-check is each source's
`decide` (invariant 3), the pace is kept by the transport (invariant 2), the outcomes and
their policy are jobs.outcomes and jobs.classify (invariant 6), and every row's state change
goes through its source's ledger.

The bookkeeping between two batches (recording the outcomes, the lease check, the next claim
and its commit) runs while the previous batch's last message is with the server, after its
final dot and before its reply is read (`Turn.pending`), so the database's round trips overlap
the server's work instead of following it. That message's own outcome is recorded with the
next batch's; the next claim is still committed before any of its rows is sent, the lease is
still checked before it, and every way out of the loop reads and records the verdict first.
Rows exposed to a crash: the claimed batch plus that one message.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import assert_never

from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from broadside.delivery.transports import InBatches, OneByOne, Riding, Shape, Transport
from jobs.batches import BatchSending
from jobs.one_by_one import OneByOneSending
from jobs.riding import RidingSending
from jobs.rows import RowSource
from jobs.runtime import Runtime
from jobs.turn import Sending, Turn

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


def sending_for(shape: Shape, turn: Turn) -> Sending:
    """The way this slice sends its batches, from what the transport says it is."""
    match shape:
        case InBatches(transport):
            return BatchSending(turn, transport)
        case Riding(transport):
            return RidingSending(turn, transport)
        case OneByOne(transport):
            return OneByOneSending(turn, transport)
        case _:
            assert_never(shape)


class Slice:
    def __init__(self, session: Session, runtime: Runtime, source: RowSource) -> None:
        self.session = session
        self.rt = runtime
        self.source = source
        transport: Transport = runtime.transport
        self.turn = Turn(session, runtime, source, transport)
        self.sending = sending_for(transport.shape(), self.turn)
        # The rate the last batches achieved (kept by the runtime from slice to slice), never
        # above what the pace allows.
        rate = min(runtime.rows_per_second or FIRST_BATCH / EXPOSURE_SECONDS,
                   pace_limit(runtime.pacer.delay))
        self.batch_size = self.sending.batch_size(batch_size_for(rate))

    def run(self) -> SliceResult:
        opened = self.source.open(self.sending.fields)
        if opened is not None:
            return SliceResult(opened)
        started = time.monotonic()
        deadline = started + float(self.rt.config.get("SLICE_SECONDS", SLICE_SECONDS))
        turn = self.turn
        try:
            outcome = self._loop(deadline)
        finally:
            if turn.outcomes.batch.outcomes:
                turn.outcomes.flush()
        elapsed = max(time.monotonic() - started, 1e-6)
        self.source.close(turn.attempts, elapsed)
        log.info("slice done: %s, %d sent or attempted, %d skipped in %.2fs", outcome,
                 turn.attempts, turn.skipped, elapsed)
        return SliceResult(outcome, turn.attempts, turn.skipped)

    def _loop(self, deadline: float) -> str:
        turn, source = self.turn, self.source
        while True:
            if self.rt.stop.is_set() or time.monotonic() >= deadline or turn.attempts >= SLICE_MAX_SENDS:
                return turn.settle() or "continue"
            if turn.pending is not None and not turn.straight_on():
                # Something may wait or stop here: the message in flight is settled first.
                stop = turn.settle()
                if stop:
                    return stop
            held = self._stream_open(deadline)
            if held:
                return held
            # Invariant 1: the lease is re-checked before every claim. A claim covers at most
            # ~0.2 s of sends, so a worker that lost its lease stops within that.
            if not self._lease_ok():
                return turn.settle() or "lost-lease"
            if not turn.hourly_room(deadline):
                return "continue"
            # Invariant 4, claim before send: pending -> sending, committed before any SMTP.
            rows = source.claim(self.batch_size)
            if not rows:
                stop = turn.settle()
                if stop:
                    return stop
                turn.outcomes.flush()
                if source.finished(deadline):
                    return "finished"
                if not source.wait_for_due(deadline):
                    return "continue"
                continue
            self.session.commit()
            began = time.monotonic()
            stop = self.sending.send(rows, deadline)
            turn.outcomes.flush()
            if stop:
                return stop
            self._adapt_batch(len(rows), time.monotonic() - began)

    def _stream_open(self, deadline: float) -> str | None:
        """None when the identity may send now; "held" when it is paused (with a notice;
        no continuation is queued: the owner's resume, or the worker's maintenance once it
        is resumed, queues the next slice). A provider's "slow down" is waited out here,
        stop-aware, within this slice.

        The pause is read once, when the slice starts: only this stream's own worker pauses
        its identity (`Turn.stop`, which ends the slice), so a running slice cannot become
        paused by anyone else, and the send loop carries no extra query per claim."""
        turn = self.turn
        if not turn.pause_checked:
            turn.pause_checked = True
            reason = self.rt.pause_reason(self.session)
            self.session.commit()
            if reason is not None:
                self.source.notice(paused_notice(self.rt.identity_name, reason))
                return "held"
        held = self.rt.held_for()
        if held > 0:
            turn.sleep(min(held, max(0.0, deadline - time.monotonic())))
            if self.rt.held_for() > 0:
                return "continue"
        return None

    def _adapt_batch(self, rows: int, seconds: float) -> None:
        """Size the next claim to about EXPOSURE_SECONDS at the rate this batch achieved
        (sends and skips, bookkeeping included), never above what the pace allows."""
        if rows <= 0 or seconds <= 0:
            return
        rate = min(rows / seconds, pace_limit(self.rt.pacer.delay))
        self.rt.rows_per_second = rate
        self.batch_size = self.sending.batch_size(batch_size_for(rate))

    def _lease_ok(self) -> bool:
        try:
            return self.rt.lease.still_mine()
        except RedisError:
            return False
