"""RQ entry points. Safe to import; they take ids, never ORM objects, and run inside the app
context the worker pushes for every job."""

from __future__ import annotations

from redis.exceptions import RedisError

from broadside.db import db
from broadside.logs import log_context
from jobs import runtime
from jobs.sending import Slice
from jobs.transactional import send_transactional as send


def send_broadcast_slice(broadcast_id: int) -> str:
    rt = runtime.get()
    with log_context(broadcast_id=broadcast_id):
        rt.running_broadcast = broadcast_id
        try:
            rt.jobs.clear_marker("slice", broadcast_id)
            result = Slice(db.session(), rt, broadcast_id).run()
            if result.outcome == "continue":
                try:
                    rt.jobs.enqueue_slice(broadcast_id)
                except RedisError:
                    pass  # the orphan repair enqueues it once Redis is back
            return result.outcome
        finally:
            rt.running_broadcast = None
            db.session.remove()


def send_transactional(message_id: int) -> str:
    rt = runtime.get()
    try:
        rt.jobs.clear_marker("transactional", message_id)
        return send(db.session(), rt, message_id)
    finally:
        db.session.remove()
