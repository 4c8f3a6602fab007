"""The one way work reaches the worker: RQ jobs named by their import path.

The web side and the domain enqueue through `Jobs` (built once per app with its Redis client
and namespace), naming each job function as a string, so nothing outside `jobs/` ever imports
the worker. Queues live in this installation's Redis namespace.

The worker listens to `transactional`, then `automations`, then `broadcasts`, so a test send,
a sign-up confirmation or a welcome that became due waits at most one slice; imports come
last. Automation work that continues after a slice queues behind the broadcasts (`turn=True`),
so the two take turns by slice.
"""

from __future__ import annotations

from redis import Redis
from rq import Queue
from rq.serializers import JSONSerializer

# Jobs carry one integer id, so JSON is all they need; with RQ's default (pickle), anyone who
# can write to Redis could make the worker run code of their choosing.
SERIALIZER = JSONSerializer

TRANSACTIONAL = "transactional"
AUTOMATIONS = "automations"
BROADCASTS = "broadcasts"
IMPORTS = "imports"
LISTENED = (TRANSACTIONAL, AUTOMATIONS, BROADCASTS, IMPORTS)  # in priority order

# The job functions, by path (RQ imports them in the worker).
SLICE_JOB = "jobs.tasks.send_broadcast_slice"
TRANSACTIONAL_JOB = "jobs.tasks.send_transactional"
AUTOMATIONS_JOB = "jobs.tasks.send_automations"
EVALUATION_JOB = "jobs.tasks.evaluate_automations"
IMPORT_JOB = "jobs.imports.run_import_job"

# A marker per broadcast (and per transactional message) says "a job for it is queued", so a
# continuation, a resume and the orphan repair never stack up several jobs for one thing.
MARKER_TTL_SECONDS = 3600


class Jobs:
    """Enqueues the worker's jobs in one installation's namespace."""

    def __init__(self, redis: Redis, namespace: str) -> None:
        self.redis = redis
        self.namespace = namespace

    def queue_name(self, name: str) -> str:
        return f"{self.namespace}:{name}"

    def queue(self, name: str) -> Queue:
        return Queue(self.queue_name(name), connection=self.redis, serializer=SERIALIZER)

    def marker_key(self, kind: str, object_id: int) -> str:
        return f"{self.namespace}:queued:{kind}:{object_id}"

    def clear_marker(self, kind: str, object_id: int) -> None:
        self.redis.delete(self.marker_key(kind, object_id))

    def has_marker(self, kind: str, object_id: int) -> bool:
        return bool(self.redis.exists(self.marker_key(kind, object_id)))

    def enqueue_slice(self, broadcast_id: int) -> bool:
        """Queue the next slice of a broadcast, unless one is queued already."""
        return self._enqueue_once(BROADCASTS, "slice", broadcast_id, SLICE_JOB, 600)

    def enqueue_transactional(self, message_id: int) -> bool:
        return self._enqueue_once(TRANSACTIONAL, "transactional", message_id, TRANSACTIONAL_JOB, 120)

    def enqueue_automations(self, *, turn: bool = False) -> bool:
        """Queue a slice of due automation messages (one at a time). `turn`: a continuation,
        queued behind the broadcasts so they take turns."""
        return self._enqueue_once(BROADCASTS if turn else AUTOMATIONS, "automations", 0,
                                  AUTOMATIONS_JOB, 600)

    def enqueue_evaluation(self, *, turn: bool = False) -> bool:
        """Queue a lifecycle evaluation (or its continuation, behind the broadcasts)."""
        return self._enqueue_once(BROADCASTS if turn else AUTOMATIONS, "evaluation", 0,
                                  EVALUATION_JOB, 600)

    def enqueue_import(self, import_id: int) -> None:
        self.queue(IMPORTS).enqueue(
            IMPORT_JOB, import_id, job_timeout=3600, result_ttl=0, description=f"import {import_id}"
        )

    def _enqueue_once(self, queue: str, kind: str, object_id: int, func: str, timeout: int) -> bool:
        key = self.marker_key(kind, object_id)
        if not self.redis.set(key, "1", nx=True, ex=MARKER_TTL_SECONDS):
            return False
        try:
            self.queue(queue).enqueue(
                func,
                object_id,
                job_timeout=timeout,
                result_ttl=0,
                failure_ttl=86400,
                description=f"{kind} {object_id}",
            )
        except Exception:
            self.redis.delete(key)
            raise
        return True
