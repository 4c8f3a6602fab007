"""The maintenance tick's removal of transactional and test messages' content after the
owner's retention (a password reset's at once, once settled).

Safe to import. At most once every `content_retention.EVERY_SECONDS` per installation (a Redis
key taken with SET NX, so the workers of several identities do not all do it), and for at most
`BUDGET_SECONDS` of committed batches of `content_retention.BATCH` rows (one guarded UPDATE
each: `broadside.delivery.content_retention`), so the tick stays short and the writer lock is
never held for long; when something is left, the key is dropped and the next tick continues.
"""

from __future__ import annotations

import logging
import time

from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from broadside.delivery import content_retention
from broadside.delivery.queues import Jobs

log = logging.getLogger("broadside.worker")

BUDGET_SECONDS = 1.0
MAX_BATCHES = 10  # 5,000 rows a tick at most


def ensure_content_removed(session: Session, jobs: Jobs, *, budget_seconds: float = BUDGET_SECONDS,
                           batch: int = content_retention.BATCH,
                           max_batches: int = MAX_BATCHES) -> None:
    key = f"{jobs.namespace}:content-retention:ran"
    try:
        if not jobs.redis.set(key, "1", nx=True, ex=content_retention.EVERY_SECONDS):
            return
    except RedisError:
        return  # the tick says why Redis is down; the removal waits
    done = content_retention.remove_due(session, batch=batch, max_batches=max_batches,
                                        deadline=time.monotonic() + budget_seconds)
    if done.removed:
        log.info("content of %d transactional messages removed after the retention%s",
                 done.removed, "" if done.finished else " (more next time)")
    if not done.finished:
        try:
            jobs.redis.delete(key)  # more to do: the next tick goes on
        except RedisError:
            pass
