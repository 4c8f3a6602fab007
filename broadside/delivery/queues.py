"""The one way work reaches the worker: RQ jobs named by their import path.

The web side and the domain enqueue through `Jobs` (built once per app with its Redis client
and namespace), naming each job function as a string, so nothing outside `jobs/` ever imports
the worker. Queues live in this installation's Redis namespace.

Each sending identity is one stream with its own `transactional`, `automations` and
`broadcasts` queues (the default identity keeps the names it always had; another's end in
`:identity:<id>`), served by the worker holding that identity's lease. A stream's worker
listens to its `transactional`, then its `automations`, then the shared `evaluations`, then its
`broadcasts`, then the shared `later` and `imports`: a test send, a sign-up confirmation or a
welcome that became due waits at most one slice. Outgoing webhook deliveries are no job of
any queue: the worker process POSTs them on threads of their own (jobs/webhooks_out.py), so
no receiver, however slow, holds a mail stream; the `webhooks` queue older versions used is
`RETIRED`, emptied when a worker starts. Automation work that
continues after a slice queues behind the broadcasts (`turn=True`), so the two take turns by slice.

Every Redis key Broadside or RQ writes carries the namespace, so two installations share one
Redis without touching each other's keys: ours start with `<namespace>:`; RQ's keep its
`rq:` prefix with the namespace inside, because queue names, job ids and worker names begin
with it (`rq:queue:<ns>:broadcasts`, `rq:job:<ns>-<hex>`, `rq:worker:<ns>-<hex>`), and the
two sets RQ keeps for everyone (`rq:queues`, `rq:workers`) are the namespace's own
(`rq_queue`, `unique_name`, `workers_key`; `owns_key` tells one installation's keys).
"""

from __future__ import annotations

import re
import uuid

from redis import Redis
from rq import Queue
from rq.serializers import JSONSerializer

# Jobs carry one integer id, so JSON is all they need; with RQ's default (pickle), anyone who
# can write to Redis could make the worker run code of their choosing.
SERIALIZER = JSONSerializer

TRANSACTIONAL = "transactional"
AUTOMATIONS = "automations"
EVALUATIONS = "evaluations"
BROADCASTS = "broadcasts"
LATER = "later"
IMPORTS = "imports"
LISTENED = (TRANSACTIONAL, AUTOMATIONS, EVALUATIONS, BROADCASTS, LATER, IMPORTS)  # in order
# Queues of older versions no worker listens to now (their jobs' work is found in the
# database another way): emptied at a worker's start, with their markers.
RETIRED = {"webhooks": "webhooks"}  # queue -> marker kind
# One of each per identity; the others are shared by every stream's worker.
PER_STREAM = (TRANSACTIONAL, AUTOMATIONS, BROADCASTS)
DEFAULT_STREAM = "default"


def queues_key(namespace: str) -> str:
    """The set of queue keys RQ keeps (`rq:queues` by default), the namespace's own."""
    return f"{namespace}:rq:queues"


def workers_key(namespace: str) -> str:
    """The set of worker keys RQ keeps (`rq:workers` by default), the namespace's own."""
    return f"{namespace}:rq:workers"


def unique_name(namespace: str) -> str:
    """A job id or a worker name of the namespace: `<ns>-<32 hex digits>`."""
    return f"{namespace}-{uuid.uuid4().hex}"


def rq_queue(name: str, redis: Redis, namespace: str, **options: object) -> Queue:
    """An RQ queue of the namespace (its name already starts with it), registered in the
    namespace's set of queues rather than RQ's global one."""
    queue = Queue(name, connection=redis, serializer=SERIALIZER, **options)  # type: ignore[arg-type]
    queue.redis_queues_keys = queues_key(namespace)
    return queue


def owns_key(namespace: str, key: str) -> bool:
    """Whether a Redis key is one of this namespace's, and not another namespace's whose name
    merely begins with this one (`broadside` vs `broadside-staging`)."""
    ns = re.escape(namespace)
    return re.search(rf"(^|:){ns}(:|$|-[0-9a-f]{{32}}(:|$))", key) is not None


def stream_of(identity_id: int | None) -> str:
    """The stream (Redis key part) of an identity id; None: the default identity."""
    return DEFAULT_STREAM if identity_id is None else f"identity:{identity_id}"


def stream_number(identity_id: int | None) -> int:
    """An identity id as a job argument (0: the default)."""
    return identity_id or 0

# The job functions, by path (RQ imports them in the worker).
SLICE_JOB = "jobs.tasks.send_broadcast_slice"
TRANSACTIONAL_JOB = "jobs.tasks.send_transactional"
AUTOMATIONS_JOB = "jobs.tasks.send_automations"
EVALUATION_JOB = "jobs.tasks.evaluate_automations"
FEED_JOB = "jobs.tasks.poll_feed"
IMPORT_JOB = "jobs.imports.run_import_job"
BULK_JOB = "jobs.bulk.run_bulk_job"

# A marker per broadcast (and per transactional message) says "a job for it is queued", so a
# continuation, a resume and the orphan repair never stack up several jobs for one thing.
MARKER_TTL_SECONDS = 3600


class Jobs:
    """Enqueues the worker's jobs in one installation's namespace."""

    def __init__(self, redis: Redis, namespace: str) -> None:
        self.redis = redis
        self.namespace = namespace

    def queue_name(self, name: str, stream: str = DEFAULT_STREAM) -> str:
        if name in PER_STREAM and stream != DEFAULT_STREAM:
            return f"{self.namespace}:{name}:{stream}"
        return f"{self.namespace}:{name}"

    def queue(self, name: str, stream: str = DEFAULT_STREAM) -> Queue:
        return rq_queue(self.queue_name(name, stream), self.redis, self.namespace)

    def listened(self, stream: str = DEFAULT_STREAM) -> list[str]:
        """The queue names a stream's worker listens to, in priority order."""
        return [self.queue_name(name, stream) for name in LISTENED]

    def marker_key(self, kind: str, object_id: int) -> str:
        return f"{self.namespace}:queued:{kind}:{object_id}"

    def clear_marker(self, kind: str, object_id: int) -> None:
        self.redis.delete(self.marker_key(kind, object_id))

    def has_marker(self, kind: str, object_id: int) -> bool:
        return bool(self.redis.exists(self.marker_key(kind, object_id)))

    def enqueue_slice(self, broadcast_id: int, identity_id: int | None = None) -> bool:
        """Queue the next slice of a broadcast on its identity's stream, unless one is
        queued already."""
        return self._enqueue_once(BROADCASTS, "slice", broadcast_id, SLICE_JOB, 600,
                                  stream_of(identity_id))

    def enqueue_transactional(self, message_id: int, identity_id: int | None = None) -> bool:
        return self._enqueue_once(TRANSACTIONAL, "transactional", message_id, TRANSACTIONAL_JOB,
                                  120, stream_of(identity_id))

    def enqueue_automations(self, identity_id: int | None = None, *, turn: bool = False) -> bool:
        """Queue a slice of the due automation messages of one identity (one at a time per
        identity). `turn`: a continuation, queued behind the broadcasts so they take turns."""
        return self._enqueue_once(BROADCASTS if turn else AUTOMATIONS, "automations",
                                  stream_number(identity_id), AUTOMATIONS_JOB, 600,
                                  stream_of(identity_id))

    def enqueue_evaluation(self, *, turn: bool = False) -> bool:
        """Queue a lifecycle evaluation (or its continuation, behind the broadcasts); any
        stream's worker runs it (it sends nothing)."""
        return self._enqueue_once(LATER if turn else EVALUATIONS, "evaluation", 0,
                                  EVALUATION_JOB, 600)

    def enqueue_feed(self, feed_id: int, identity_id: int | None = None) -> bool:
        """Queue a feed automation's poll (and digest) on its identity's stream, behind the
        broadcasts' slices (one queued at a time per feed): a poll holds a stream at most
        its fetch's 10 seconds (broadside.campaigns.feeds.fetch)."""
        return self._enqueue_once(BROADCASTS, "feed", feed_id, FEED_JOB, 120,
                                  stream_of(identity_id))

    def enqueue_import(self, import_id: int) -> None:
        self.queue(IMPORTS).enqueue(
            IMPORT_JOB, import_id, job_timeout=3600, result_ttl=0, description=f"import {import_id}",
            job_id=unique_name(self.namespace),
        )

    def enqueue_bulk(self, bulk_id: int) -> bool:
        """Queue a slice of a bulk action on the subscriber table (the lowest priority, with
        the imports: a send waits at most one slice for it), unless one is queued already."""
        return self._enqueue_once(IMPORTS, "bulk", bulk_id, BULK_JOB, 600)

    def drop_retired_queues(self) -> int:
        """Empty the queues older versions used and no worker listens to now (`RETIRED`);
        returns how many jobs were dropped. Their work is in the database: nothing is lost."""
        dropped = 0
        for name, kind in RETIRED.items():
            queue = self.queue(name)
            dropped += int(queue.empty() or 0)
            self.redis.srem(queues_key(self.namespace), queue.key)
            self.clear_marker(kind, 0)
        return dropped

    def _enqueue_once(self, queue: str, kind: str, object_id: int, func: str, timeout: int,
                      stream: str = DEFAULT_STREAM) -> bool:
        key = self.marker_key(kind, object_id)
        if not self.redis.set(key, "1", nx=True, ex=MARKER_TTL_SECONDS):
            return False
        try:
            self.queue(queue, stream).enqueue(
                func,
                object_id,
                job_timeout=timeout,
                result_ttl=0,
                failure_ttl=86400,
                description=f"{kind} {object_id}",
                job_id=unique_name(self.namespace),
            )
        except Exception:
            self.redis.delete(key)
            raise
        return True
