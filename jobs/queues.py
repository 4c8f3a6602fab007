"""Queue names and enqueueing. Queues live in this installation's Redis namespace.

The worker listens to `transactional` before `broadcasts`, so a test send or a sign-up
confirmation waits at most one broadcast slice.
"""

from __future__ import annotations

from flask import Flask, current_app
from rq import Queue

TRANSACTIONAL = "transactional"
BROADCASTS = "broadcasts"


def queue_name(app: Flask, name: str) -> str:
    return f"{app.config['BROADSIDE_NAMESPACE']}:{name}"


def get_queue(name: str, app: Flask | None = None) -> Queue:
    app = app or current_app._get_current_object()  # type: ignore[attr-defined]
    return Queue(queue_name(app, name), connection=app.extensions["broadside_redis"])


IMPORTS = "imports"
LISTENED = (TRANSACTIONAL, BROADCASTS, IMPORTS)  # in priority order

# A marker per broadcast (and per transactional message) says "a job for it is queued", so a
# continuation, a resume and the orphan repair never stack up several jobs for one thing.
MARKER_TTL_SECONDS = 3600


def marker_key(app: Flask, kind: str, object_id: int) -> str:
    return f"{app.config['BROADSIDE_NAMESPACE']}:queued:{kind}:{object_id}"


def clear_marker(kind: str, object_id: int, app: Flask | None = None) -> None:
    app = app or current_app._get_current_object()  # type: ignore[attr-defined]
    app.extensions["broadside_redis"].delete(marker_key(app, kind, object_id))


def has_marker(kind: str, object_id: int, app: Flask | None = None) -> bool:
    app = app or current_app._get_current_object()  # type: ignore[attr-defined]
    return bool(app.extensions["broadside_redis"].exists(marker_key(app, kind, object_id)))


def _enqueue_once(app: Flask, queue: str, kind: str, object_id: int, func: str, timeout: int) -> bool:
    redis = app.extensions["broadside_redis"]
    if not redis.set(marker_key(app, kind, object_id), "1", nx=True, ex=MARKER_TTL_SECONDS):
        return False
    try:
        get_queue(queue, app).enqueue(
            func,
            object_id,
            job_timeout=timeout,
            result_ttl=0,
            failure_ttl=86400,
            description=f"{kind} {object_id}",
        )
    except Exception:
        redis.delete(marker_key(app, kind, object_id))
        raise
    return True


def enqueue_transactional(message_id: int, app: Flask | None = None) -> bool:
    app = app or current_app._get_current_object()  # type: ignore[attr-defined]
    return _enqueue_once(
        app, TRANSACTIONAL, "transactional", message_id, "jobs.tasks.send_transactional", 120
    )


def enqueue_slice(broadcast_id: int, app: Flask | None = None) -> bool:
    app = app or current_app._get_current_object()  # type: ignore[attr-defined]
    return _enqueue_once(app, BROADCASTS, "slice", broadcast_id, "jobs.tasks.send_broadcast_slice", 600)
