"""The maintenance tick's compaction of settled broadcasts' step-by-step history.

Safe to import. At most once every `EVERY_SECONDS` per installation (a Redis key taken with
SET NX, so the workers of several identities do not all do it), and for at most
`BUDGET_SECONDS` of small committed batches (`broadside.campaigns.broadcasts.compaction`), so the tick
stays short and mail never waits for it; when something is left, the key is dropped and the
next tick continues (resumable by construction). Nothing happens while the owner keeps the
history forever (the default).
"""

from __future__ import annotations

import logging

from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import compaction
from broadside.delivery.queues import Jobs

log = logging.getLogger("broadside.worker")

EVERY_SECONDS = 600
BUDGET_SECONDS = 2.0


def ensure_compaction(session: Session, jobs: Jobs, *, budget_seconds: float = BUDGET_SECONDS) -> None:
    key = f"{jobs.namespace}:compaction:ran"
    try:
        if not jobs.redis.set(key, "1", nx=True, ex=EVERY_SECONDS):
            return
    except RedisError:
        return  # the tick says why Redis is down; compaction waits
    done = compaction.compact_due(session, budget_seconds=budget_seconds)
    for one in done:
        if one.removed:
            log.info("broadcast %s: %d step-by-step events removed after the retention%s",
                     one.broadcast_id, one.removed, "" if one.finished else " (more next time)")
    if any(not one.finished for one in done):
        try:
            jobs.redis.delete(key)  # more to do: the next tick goes on
        except RedisError:
            pass
