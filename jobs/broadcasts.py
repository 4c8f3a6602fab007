"""A broadcast's deliveries as the engine's row source (jobs.rows.RowSource).

A slice of a broadcast moves it `queued -> sending` (the lifecycle), claims its due rows by
one guarded statement (`ledger.claim_due`: pending -> sending), re-checks each person at their
turn (jobs.recheck), records every outcome through the delivery ledger
(broadside.campaigns.broadcasts.ledger: the one writer of `Delivery.status` and the
broadcast's counters), and finishes the broadcast (`sending -> sent`) only when no row is
pending or in flight. A channel-wide refusal pauses the broadcast through the lifecycle's one
`pause`, which the owner's pause uses too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from sqlalchemy import func, select, true, update
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import ab_sending, ledger, lifecycle
from broadside.campaigns.broadcasts.ab_tests import REST
from broadside.campaigns.broadcasts.ledger import Change
from broadside.campaigns.codes import minting
from broadside.core.models import Broadcast, Delivery, Revision
from broadside.core.timeutil import utcnow
from jobs.engine import Slice
from jobs.recheck import Recheck
from jobs.rows import Decision, Row
from jobs.runtime import Runtime

log = logging.getLogger("broadside.worker")

# Rows due within this long after a slice's end are waited for in slices; later ones are left
# to the maintenance tick (`Broadcast.waiting_until`), which looks every few seconds.
WAIT_IN_SLICE_S = 30.0


def start(session: Session, broadcast_id: int) -> Broadcast | None:
    """queued -> sending (a lifecycle transition), then the broadcast as it now stands."""
    if lifecycle.move(session, broadcast_id, "start"):
        log.info("broadcast started")
    session.commit()
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is not None:
        session.refresh(broadcast)
    return broadcast


def is_waiting(session: Session, broadcast_id: int) -> bool:
    """Nothing of it is due before `waiting_until`: its next slice is the maintenance's."""
    until = session.scalar(select(Broadcast.waiting_until).where(Broadcast.id == broadcast_id))
    session.commit()
    return until is not None and until > utcnow()


def finish_if_done(session: Session, broadcast_id: int) -> bool:
    """sending -> sent, only when no row is pending or in flight (one guarded UPDATE)."""
    done = lifecycle.move(session, broadcast_id, "finish")
    if done:
        log.info("broadcast finished")
    session.commit()
    return done


class DeliveryLedger:
    """A broadcast's deliveries through their ledger (counters and events with each move)."""

    def __init__(self, broadcast_id: int) -> None:
        self.broadcast_id = broadcast_id

    def transition(self, session: Session, changes: Sequence[Change], *, source: str,
                   target: str, now: datetime) -> list[int]:
        return ledger.transition(session, self.broadcast_id, list(changes), source=source,
                                 target=target, now=now)

    def attempts_of(self, session: Session, row_id: int) -> int:
        return int(session.scalar(select(Delivery.attempts).where(Delivery.id == row_id)) or 0)


class BroadcastRows:
    """The row source of one broadcast's slice."""

    key_kind = "d"  # idempotency keys of its batches name deliveries
    pausable = True

    def __init__(self, session: Session, runtime: Runtime, broadcast_id: int) -> None:
        self.session = session
        self.rt = runtime
        self.broadcast_id = broadcast_id
        self.ledger = DeliveryLedger(broadcast_id)
        self.recheck: Recheck | None = None
        self.codes_prefix: str | None = None  # as frozen at Send: each claimed row mints one
        self.winner: int | None = None  # an A/B test's, once chosen: the rest's rows get it

    def open(self, fields: bool) -> str | None:
        broadcast = start(self.session, self.broadcast_id)
        if broadcast is None or broadcast.status != "sending":
            return "nothing"
        revision = self.session.scalar(select(Revision).where(Revision.broadcast_id == broadcast.id))
        if revision is None:
            self.pause("This broadcast has no frozen content; duplicate it and send the copy.")
            return "paused"
        self.codes_prefix = revision.codes_prefix
        if broadcast.ab_seed is not None and broadcast.ab_test:
            waiting = self._ab_test(broadcast)
            if waiting is not None:
                return waiting
        self.recheck = Recheck(self.session, self.rt, broadcast.id, broadcast.list_id, revision,
                               broadcast.skip_if_received_within_hours, fields=fields)
        return None

    def _ab_test(self, broadcast: Broadcast) -> str | None:
        """An A/B test's turn (broadside.campaigns.broadcasts.ab_sending): the winner once
        chosen (the rest's rows are then claimed and sent it); its choice once the wait is
        over; the wait's start once the test's copies are all out. "waiting" while it runs."""
        now = utcnow()
        if broadcast.ab_winner is None and broadcast.ab_wait_until is None:
            if broadcast.snapshot_cursor < broadcast.snapshot_until or \
                    not ab_sending.test_done(self.session, broadcast.id):
                return None  # the test's copies are still being written or going out
            until = ab_sending.start_wait(self.session, broadcast, now)
            return self._wait(until)
        if broadcast.ab_winner is None:
            assert broadcast.ab_wait_until is not None
            if broadcast.ab_wait_until > now:
                return self._wait(broadcast.ab_wait_until)
            self.winner = ab_sending.decide(self.session, broadcast, now)
            self.session.commit()
            log.info("A/B test decided: variant %s", self.winner)
        else:
            self.winner = broadcast.ab_winner
        return None

    def _snapshot_complete(self) -> bool:
        state = self.session.execute(select(Broadcast.snapshot_cursor, Broadcast.snapshot_until)
                                     .where(Broadcast.id == self.broadcast_id)).one()
        self.session.commit()
        return bool(state.snapshot_cursor >= state.snapshot_until)

    def _wait(self, until: datetime) -> str:
        """Nothing is due before `until`: no slice is queued for it until then."""
        self.session.execute(update(Broadcast).where(Broadcast.id == self.broadcast_id)
                             .values(waiting_until=until))
        self.session.commit()
        return "waiting"

    def claim(self, limit: int) -> list[Row]:
        """The next due rows, read and claimed by one guarded statement (`ledger.claim_due`),
        and, with codes on, each row's code minted in the same transaction (one INSERT for the
        batch; a row claimed again keeps its code), so claim and code commit together."""
        rows = [Row(d, subscriber, list_id, variant=self.winner if variant == REST else variant)
                for d, subscriber, list_id, variant in ledger.claim_due(
                    self.session, self.broadcast_id, limit, rest=self.winner is not None)]
        if self.codes_prefix is None or not rows:
            return rows
        codes = minting.mint(self.session, minting.DELIVERY, [
            minting.ToMint(r.id, r.subscriber_id, self.codes_prefix, broadcast_id=self.broadcast_id)
            for r in rows])
        return [replace(r, code=codes[r.id]) for r in rows]

    def decide(self, row: Row) -> Decision:
        assert self.recheck is not None, "decide() before open()"
        return self.recheck.decide(row)

    def finished(self, deadline: float) -> bool:
        return finish_if_done(self.session, self.broadcast_id)

    def wait_for_due(self, deadline: float) -> bool:
        """Rows wait for their retry time: sleep until the first is due, within this slice."""
        claimable = true() if self.winner is not None else (
            Delivery.variant.is_(None) | (Delivery.variant >= 0))
        earliest = self.session.scalar(
            select(func.min(Delivery.next_attempt_at)).where(
                Delivery.broadcast_id == self.broadcast_id, Delivery.status == "pending",
                claimable))
        self.session.commit()
        if earliest is None:
            return False  # nothing pending at all; rows in flight belong to a crashed run
        wait = (earliest - utcnow()).total_seconds()
        if time.monotonic() + wait >= deadline + WAIT_IN_SLICE_S:
            if not self._snapshot_complete():
                return False  # the next slice writes more rows first (snapshot.prepare)
            # Readers' own hours, or a retry far off: no slice until then (jobs.maintenance
            # queues one when it comes), rather than slices that only wait.
            self._wait(earliest)
            return False
        if time.monotonic() + wait >= deadline:
            self.rt.stop.wait(max(0.0, deadline - time.monotonic()))
            return False
        self.rt.stop.wait(max(wait, 0.0))
        return True

    def pause(self, reason: str) -> None:
        """The worker's side of the one pause (`lifecycle.pause`, which the owner's uses too)."""
        if lifecycle.pause(self.session, self.broadcast_id, reason):
            log.warning("broadcast paused: %s", reason)
        self.session.commit()

    def notice(self, text: str | None) -> None:
        lifecycle.set_notice(self.session, self.broadcast_id, text)
        self.session.commit()

    def close(self, attempts: int, seconds: float) -> None:
        if attempts:
            # A counter, not a state: written here, not through the lifecycle.
            self.session.execute(update(Broadcast).where(Broadcast.id == self.broadcast_id)
                                 .values(send_rate=round(attempts / seconds, 2)))
            self.session.commit()


def broadcast_slice(session: Session, runtime: Runtime, broadcast_id: int) -> Slice:
    """One slice of a broadcast: a few seconds from the rows still pending (invariant 7)."""
    return Slice(session, runtime, BroadcastRows(session, runtime, broadcast_id))
