"""Outgoing webhook deliveries: one short job on the `webhooks` queue, the last a stream's
worker listens to (broadside/queues.py), so mail never waits for more than one of them.

Safe to import. A job POSTs one small batch of due events (`broadside.webhooks.posting`:
claimed before the POST, a few seconds' timeout each, at most `budget` seconds in all) and,
when more are due, queues its continuation behind whatever else waits. Nothing here paces or
touches the mail stream: no lease, no pacer, no transport. Events retried later are picked up
by the maintenance tick (`ensure_webhooks`), which also puts back rows a dead job left
claimed (at-least-once; the event id lets receivers deduplicate).

Test-only configuration keys (not environment variables): `WEBHOOKS_RETRY_BASE_SECONDS`,
`WEBHOOKS_WINDOW_SECONDS`, `WEBHOOKS_TIMEOUT_SECONDS`.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from broadside.core.timeutil import utcnow
from broadside.delivery.queues import Jobs
from broadside.webhooks import ledger
from jobs import runtime
from jobs.database import db

if TYPE_CHECKING:
    from broadside.webhooks.posting import Settings

log = logging.getLogger(__name__)


# The POSTs (urllib3 and the address checks, about 1 MB) load with the first webhook job: a
# worker whose owner has no endpoint never holds them.


def settings_from(config: dict[str, Any]) -> Settings:
    from broadside.webhooks import posting

    return posting.Settings(
        allow_private=bool(config.get("WEBHOOKS_ALLOW_PRIVATE")),
        window=timedelta(seconds=float(config.get("WEBHOOKS_WINDOW_SECONDS", 86400))),
        base_seconds=float(config.get("WEBHOOKS_RETRY_BASE_SECONDS", 30)),
        timeout=float(config.get("WEBHOOKS_TIMEOUT_SECONDS", 5)),
    )


def run_webhooks_job(_: int = 0) -> str:
    from broadside.webhooks import posting

    rt = runtime.get()
    rt.jobs.clear_marker("webhooks", 0)
    try:
        session = db.session()
        outcome = posting.deliver_due(session, settings_from(rt.config))
        more = ledger.anything_due(session, utcnow())
        session.commit()
    finally:
        db.session.remove()
    if outcome.delivered or outcome.failed:
        log.info("webhooks: %d delivered, %d failed attempts", outcome.delivered, outcome.failed)
    if more:
        try:
            rt.jobs.enqueue_webhooks()
        except RedisError:
            pass  # the maintenance tick queues it again
    return f"{outcome.delivered} delivered, {outcome.failed} failed"


PRUNE_EVERY_SECONDS = 3600


def ensure_webhooks(session: Session, jobs: Jobs) -> None:
    """The maintenance tick's part: rows a dead job left claimed go back, due events get a
    job (one queued at a time), and once an hour the log forgets events older than a month."""
    now = utcnow()
    if ledger.release_stale(session, now):
        log.warning("webhook deliveries left in flight by a stopped worker: queued again")
    if jobs.redis.set(f"{jobs.namespace}:webhooks:pruned", "1", nx=True, ex=PRUNE_EVERY_SECONDS):
        ledger.prune(session, now)
    due = ledger.anything_due(session, now)
    session.commit()
    if due and not jobs.has_marker("webhooks", 0):
        jobs.enqueue_webhooks()
