"""RQ entry points. Safe to import; they take ids, never ORM objects, and use the worker's
database session (jobs.database), which the worker closes after every job."""

from __future__ import annotations

from redis.exceptions import RedisError

from broadside.campaigns.broadcasts import cancelling
from broadside.campaigns.broadcasts.snapshot import prepare
from broadside.core.logs import log_context
from jobs import runtime, transactional
from jobs.automations import anything_due, automation_slice, run_evaluation
from jobs.broadcasts import broadcast_slice, is_waiting
from jobs.database import db
from jobs.engine import SLICE_MAX_SENDS
from jobs.feeds import run_feed


def send_broadcast_slice(broadcast_id: int) -> str:
    rt = runtime.get()
    with log_context(broadcast_id=broadcast_id):
        rt.running_broadcast = broadcast_id
        try:
            rt.jobs.clear_marker("slice", broadcast_id)
            if cancelling.still_to_skip(db.session(), broadcast_id):
                db.session.commit()
                return skip_cancelled(broadcast_id)
            # A large audience is written in short chunks before each slice, until complete:
            # the first slice sends after the first chunk (broadside.campaigns.broadcasts.snapshot);
            # longer while fewer rows are pending than two slices could send.
            prepare(db.session(), broadcast_id, ahead=2 * SLICE_MAX_SENDS)
            result = broadcast_slice(db.session(), rt, broadcast_id).run()
            if cancelling.still_to_skip(db.session(), broadcast_id):
                # Cancelled while this slice ran (it stopped at its re-check): skip the rest.
                db.session.commit()
                return skip_cancelled(broadcast_id)
            try:
                # A welcome that became due meanwhile goes next, ahead of the continuation.
                if anything_due(db.session(), identity_id=rt.identity_id):
                    rt.jobs.enqueue_automations(rt.identity_id)
                db.session.commit()
            except RedisError:
                pass  # the maintenance tick queues it once Redis is back
            if result.outcome == "continue" and not is_waiting(db.session(), broadcast_id):
                try:
                    rt.jobs.enqueue_slice(broadcast_id, rt.identity_id)
                except RedisError:
                    pass  # the orphan repair enqueues it once Redis is back
            return result.outcome
        finally:
            rt.running_broadcast = None
            db.session.remove()


def skip_cancelled(broadcast_id: int) -> str:
    """A cancelled broadcast's pending rows become skipped, in short committed chunks for
    about a slice's time (broadside.campaigns.broadcasts.cancelling); the rest in a continuation on the
    same queue, so a send of another broadcast takes its turn in between. Resumable: a
    killed run leaves exactly the rows still pending, which the next one (or the worker's
    maintenance) takes up. Runs from the broadcast's slice job (its marker, its queue)."""
    rt = runtime.get()
    with log_context(broadcast_id=broadcast_id):
        try:
            finished = cancelling.skip(db.session(), broadcast_id)
            if not finished:
                try:
                    rt.jobs.enqueue_slice(broadcast_id, rt.identity_id)
                except RedisError:
                    pass  # the maintenance queues it once Redis is back
            return "skipped" if finished else "skipping"
        finally:
            db.session.remove()


def send_transactional(message_id: int) -> str:
    """A slice of this stream's due transactional mail, `message_id` among it (its marker is
    cleared). A paused identity's slice sends nothing ("held"): the rows stay pending and the
    maintenance requeues them once it is resumed."""
    rt = runtime.get()
    try:
        rt.jobs.clear_marker("transactional", message_id)
        with transactional.sending(rt.identity_id):
            result = transactional.transactional_slice(db.session(), rt).run()
        if result.outcome == "continue":
            try:  # what is still due gets its job (each at most one queued)
                for due in transactional.due_transactional(db.session(), rt.identity_id):
                    rt.jobs.enqueue_transactional(due, rt.identity_id)
                db.session.commit()
            except RedisError:
                pass  # the maintenance tick queues them once Redis is back
        return result.outcome
    finally:
        db.session.remove()


def send_automations(identity_number: int = 0) -> str:
    """A slice of the due messages of every enabled automation of this stream's identity
    (`identity_number`: its id, 0 for the default; it names the job's marker); a
    continuation (when more is due) queues behind the broadcasts, so the two take turns."""
    rt = runtime.get()
    with log_context(automations=True):
        rt.running_automations = True
        try:
            rt.jobs.clear_marker("automations", identity_number)
            result = automation_slice(db.session(), rt).run()
            if result.outcome == "continue":
                try:
                    rt.jobs.enqueue_automations(rt.identity_id, turn=True)
                except RedisError:
                    pass  # the maintenance tick queues it once Redis is back
            return result.outcome
        finally:
            rt.running_automations = False
            db.session.remove()


def evaluate_automations(_unused: int = 0) -> str:
    """One lifecycle evaluation within its time budget; the rest continues in the next job."""
    rt = runtime.get()
    try:
        rt.jobs.clear_marker("evaluation", 0)
        result = run_evaluation(db.session(), rt)
        try:
            if not result.finished:
                rt.jobs.enqueue_evaluation(turn=True)
            if result.entered and any(result.entered.values()):
                # Each identity's stream picks up its own due messages (its maintenance tick
                # queues them too); this one queues its own at once.
                rt.jobs.enqueue_automations(rt.identity_id)
        except RedisError:
            pass  # the maintenance tick queues them once Redis is back
        return "continue" if not result.finished else "finished"
    finally:
        db.session.remove()


def poll_feed(feed_id: int) -> str:
    """A feed automation's poll, and its digest when due (jobs.feeds)."""
    rt = runtime.get()
    try:
        rt.jobs.clear_marker("feed", feed_id)
        return run_feed(db.session(), rt, feed_id)
    finally:
        db.session.remove()
