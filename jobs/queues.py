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


def enqueue_transactional(message_id: int) -> None:
    get_queue(TRANSACTIONAL).enqueue(
        "jobs.tasks.send_transactional", message_id, job_timeout=120, result_ttl=0,
        description=f"transactional message {message_id}",
    )


def enqueue_slice(broadcast_id: int, app: Flask | None = None) -> None:
    get_queue(BROADCASTS, app).enqueue(
        "jobs.tasks.send_broadcast_slice", broadcast_id, job_timeout=600, result_ttl=0,
        description=f"broadcast {broadcast_id} slice",
    )
