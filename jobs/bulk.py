"""Bulk actions on subscribers: one job per slice of a `BulkAction`, on the `imports` queue
(the lowest priority a stream's worker listens to).

Safe to import. A slice works through batches for a few seconds
(`broadside.audience.subscribers.bulk.run_slice`) and, when more is left, queues its continuation
behind whatever else waits, so a long erase never holds a send back by more than a slice.
Each batch moves the action's cursor in its own transaction with its effect (on the people of
the set confirmed with the action who still match its filter; nobody else) and the deletion of
its rows of that set, so a worker killed mid-way loses at most the batch in flight (rolled
back), and the action is queued again when a worker starts (`recover_interrupted_bulk_actions`).
"""

from __future__ import annotations

import logging

from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from broadside.audience.subscribers import bulk
from jobs import runtime
from jobs.database import db

log = logging.getLogger(__name__)


def run_bulk_job(bulk_id: int) -> str:
    rt = runtime.get()
    try:
        rt.jobs.clear_marker("bulk", bulk_id)
        outcome = bulk.run_slice(
            db.session(), bulk_id,
            batch_size=int(rt.config.get("BULK_BATCH_SIZE", bulk.BATCH_SIZE)),
            seconds=float(rt.config.get("BULK_SLICE_SECONDS", bulk.SLICE_SECONDS)))
    except Exception as exc:  # the owner sees "failed" with a reason, not "running" forever
        log.exception("bulk action %s failed", bulk_id)
        bulk.fail(db.session(), bulk_id, f"The action stopped unexpectedly "
                  f"({type(exc).__name__}); the batches before the failure are done.")
        return "failed"
    finally:
        db.session.remove()
    if outcome == "continue":
        try:
            rt.jobs.enqueue_bulk(bulk_id)
        except RedisError:
            pass  # queued again when a worker starts
    return outcome


def recover_interrupted_bulk_actions(session: Session, rt: runtime.Runtime) -> int:
    """Queue again the bulk actions a stopped worker left queued or running; returns how
    many. Running one twice is harmless (each batch is claimed by its cursor), so a stale
    "queued" marker is cleared first rather than trusted."""
    stuck = bulk.interrupted(session)
    session.commit()
    for bulk_id in stuck:
        rt.jobs.clear_marker("bulk", bulk_id)
        rt.jobs.enqueue_bulk(bulk_id)
    return len(stuck)
