"""Cancelling a broadcast of any size: the owner's click stays short, the worker skips the rest.

Cancel used to skip every pending row in the request's own transaction (one event per row,
then one UPDATE). At 1,000,000 pending rows that held SQLite's only writer lock longer than
the worker's busy_timeout (a sending job failed with "database is locked", its rows in flight
ended `unknown`) and wrote ~1M event rows on PostgreSQL. Now:

1. The request (`broadside.campaigns.broadcasts.service.cancel_broadcast`) moves the broadcast to
   `cancelled` (the lifecycle's guarded transition, the broadcast row first) with ONE event
   ("cancelled: N pending recipients will be skipped"). A broadcast with at most
   `INLINE_LIMIT` pending rows is still skipped whole in that transaction, as before
   (`ledger.cancel_pending`): a few thousand rows cost milliseconds.
2. The rest are skipped by the worker in short committed chunks (`skip`, run from the
   broadcast's own slice job: `jobs.tasks`), each chunk keyset over id on the
   (broadcast_id, status, id) index, counters first (the lock order), then the guarded
   UPDATE (`ledger.skip_pending_chunk`). A chunk is a few milliseconds of the writer lock, so
   a sending job of another broadcast waits at most that, never its busy_timeout.

Why nothing is sent after the click, although rows stay `pending` for a while: a slice only
sends a broadcast that is `sending` (its `start` moves nothing on a cancelled one), and a
slice already running re-checks the broadcast at each person's turn (invariant 3): the first
row it reaches after the cancel stops it, and every row it still holds is released as skipped
("cancelled"). "Send again" refuses a cancelled broadcast outright, so nothing can move a
cancelled broadcast's row back to pending while it is being skipped.

Resumable and idempotent by construction: the work left is exactly the broadcast's rows still
`pending` (no cursor is stored), every chunk is committed on its own and guarded by
`status = 'pending'` and by the broadcast being `cancelled`, so a worker killed mid-skip, a
duplicated job or two runners skip each row once and keep the counters exact. The worker's
maintenance (`jobs.maintenance`) gives every cancelled broadcast with pending rows a job, so
a skip interrupted by a crash (or a cancel the web process could not queue) completes.
"""

from __future__ import annotations

import time

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import ledger
from broadside.core.models import Broadcast, Identity
from broadside.core.models.identities import IdentityStatus

# At most this many pending rows are skipped inside the owner's request (milliseconds).
INLINE_LIMIT = 10_000
# Rows per committed chunk of the worker's skip: ~10-40 ms of the writer lock here.
CHUNK_ROWS = 5_000
# How long one job skips before it queues its continuation (a slice's share of the worker).
SKIP_SECONDS = 5.0
REASON = "cancelled"


def skip_or_defer(session: Session, broadcast_id: int, counts: dict[str, int]) -> str:
    """The request's part, run by the lifecycle's cancel while it holds the broadcast row:
    skip a small broadcast's pending rows now (one event each, as always), or leave a large
    one's to the worker. Fills `counts` (skipped now, to skip) and returns the event's detail."""
    pending = session.scalar(select(Broadcast.pending_count).where(Broadcast.id == broadcast_id)) or 0
    if pending > INLINE_LIMIT:
        counts.update(skipped=0, to_skip=pending)
        return f"cancelled: {pending} pending recipients will be skipped"
    counts.update(skipped=ledger.cancel_pending(session, broadcast_id, REASON), to_skip=0)
    return f"{counts['skipped']} pending recipients skipped"


def still_to_skip(session: Session, broadcast_id: int) -> int:
    """How many of a cancelled broadcast's rows are still pending (its counter: one row)."""
    return session.scalar(
        select(Broadcast.pending_count).where(Broadcast.id == broadcast_id,
                                              Broadcast.status == "cancelled")) or 0


def unfinished(session: Session) -> list[tuple[int, int | None]]:
    """(broadcast id, the stream that skips it) of every cancelled broadcast whose skip is not
    done. The stream is the broadcast's identity's; a deleted identity has no stream any more
    (it may be deleted once its broadcast is cancelled), so the default stream (None) skips
    that broadcast's rows: a skip sends nothing, so any stream may do it."""
    rows = session.execute(
        select(Broadcast.id, Broadcast.identity_id, Identity.status)
        .outerjoin(Identity, Identity.id == Broadcast.identity_id)
        .where(Broadcast.status == "cancelled", Broadcast.pending_count > 0))
    return [(b, None if status == IdentityStatus.DELETED.value else i) for b, i, status in rows]


def skip(session: Session, broadcast_id: int, *, seconds: float = SKIP_SECONDS,
         chunk: int | None = None) -> bool:
    """Skip a cancelled broadcast's pending rows in committed chunks for about `seconds`.
    Returns True when none is left (or the broadcast is not cancelled: nothing to do here)."""
    deadline = time.monotonic() + seconds
    size = chunk or CHUNK_ROWS
    after = 0
    while True:
        try:
            _moved, last = ledger.skip_pending_chunk(session, broadcast_id, after_id=after,
                                                     limit=size, reason=REASON)
            session.commit()
        except Exception:
            session.rollback()
            raise
        if last is None:
            if after == 0:
                return True
            # From the start once more: a row a running slice released back to pending
            # behind the keyset (its hourly limit, say) is skipped too.
            after = 0
            continue
        after = last
        if time.monotonic() >= deadline:
            return still_to_skip(session, broadcast_id) == 0
