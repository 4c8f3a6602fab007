"""Feed automations in the worker: each stream's maintenance tick queues a job for each of its
identity's feeds whose poll or digest is due (`ensure_feed_polls`, at most one queued per
feed); the job (`jobs.tasks.poll_feed`) polls and sends through
`broadside.campaigns.feeds.polling`, whose broadcasts then go out through this stream's
slices like any other. A poll's fetch is bounded to 10 seconds and 5 MB, so it never holds a
send slice for long; the job runs behind the broadcasts' slices, on its identity's stream."""

from __future__ import annotations

import logging

from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from broadside.campaigns.feeds import polling
from jobs.runtime import Runtime

log = logging.getLogger("broadside.worker")


def ensure_feed_polls(session: Session, rt: Runtime) -> None:
    """Give each due feed of this stream's identity a job (none while one is queued)."""
    due = polling.due_feeds(session, rt.identity_id)
    session.commit()
    for feed_id in due:
        try:
            rt.jobs.enqueue_feed(feed_id, rt.identity_id)
        except RedisError:
            return  # the next tick queues it once Redis is back


def run_feed(session: Session, rt: Runtime, feed_id: int) -> str:
    outcome = polling.run(session, feed_id, default_from=rt.config["MAIL_FROM"], jobs=rt.jobs,
                          allow_private=bool(rt.config.get("FEEDS_ALLOW_PRIVATE")))
    if outcome.error:
        return "failed"
    if outcome.broadcasts:
        log.info("feed %s: %d broadcast(s) queued", feed_id, outcome.broadcasts)
    return "sent" if outcome.broadcasts else "polled" if outcome.polled else "idle"
