"""The worker's queues as Redis holds them: how many jobs wait in each, and how long the
oldest has waited (the System page's live panel and /metrics)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from redis import Redis
from rq.exceptions import NoSuchJobError
from rq.job import Job
from rq.queue import Queue

from broadside.delivery import queues


@dataclass(frozen=True)
class QueueInfo:
    name: str
    length: int
    oldest_age: float


def oldest_job_age(queue: Queue, now: float) -> float:
    for job_id in queue.get_job_ids(0, 1):
        try:
            enqueued = Job.fetch(job_id, connection=queue.connection, serializer=queue.serializer).enqueued_at
        except NoSuchJobError:
            return 0.0
        return max(0.0, now - enqueued.timestamp()) if enqueued else 0.0
    return 0.0


def queue_figures(redis: Redis, namespace: str, now: float | None = None) -> list[QueueInfo]:
    """Each queue the worker listens to (`queues.LISTENED`, in its order); raises RedisError
    when Redis does not answer."""
    now = time.time() if now is None else now
    found = []
    for name in queues.LISTENED:
        queue = queues.rq_queue(f"{namespace}:{name}", redis, namespace)
        found.append(QueueInfo(name, queue.count, oldest_job_age(queue, now)))
    return found
