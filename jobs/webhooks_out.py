"""Outgoing webhook deliveries, on threads of their own in the worker process: `Webhooks`.

No mail stream ever waits for a receiver: no stream's RQ loop runs a POST (there is no
webhooks queue), `run_worker` starts one `Webhooks` beside the maintenance thread. Its
dispatcher thread looks every POLL_S for enabled endpoints with due events
(`ledger.due_endpoints`) and gives each, up to POOL_SIZE at once, a delivery thread that POSTs
one batch of that endpoint's due events in the ledger's order (`posting.deliver_due`: claimed
before the POST, each POST whole within WEBHOOKS_TIMEOUT_SECONDS, at most 4 KB of an answer
read). In this process an endpoint is served by one thread at a time, so its events keep
their order and a slow endpoint holds its own thread only, never another endpoint's events.
Every thread has its own database session (jobs.database: a scoped session per thread).

Upkeep, every UPKEEP_EVERY_S: rows a stopped worker left `sending` count as failed attempts
(`ledger.release_stale`: at-least-once, the event id lets receivers deduplicate), and once
an hour the log forgets settled events older than a month. At its start the runner empties
the `webhooks` queue older versions used (`Jobs.drop_retired_queues`): a job queued there by
one of them is dropped, not run; the events it was for are in the database and go out here.

Stopping: warm (`stop`): no new batch starts, and each delivery thread ends after its POST in
flight (at most the deadline), putting the rest of its batch back uncounted. Cold: the
threads are daemons and end with the process; the rows they held are counted by the next
upkeep. Burst mode (tests): once the streams have ended (`finish`), the runner ends when no
event is due and no POST is in flight, so every event due is attempted first.

Test-only configuration keys (not environment variables): `WEBHOOKS_RETRY_BASE_SECONDS`,
`WEBHOOKS_WINDOW_SECONDS`, `WEBHOOKS_TIMEOUT_SECONDS`.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy.exc import SQLAlchemyError

from broadside.core.timeutil import utcnow
from broadside.delivery.queues import Jobs
from broadside.webhooks import ledger, posting
from broadside.webhooks.posting import Settings
from jobs.app import WorkerApp
from jobs.database import db

log = logging.getLogger("broadside.webhooks")

POOL_SIZE = 4  # endpoints POSTed to at once
POLL_S = 1.0  # how often an idle runner looks for due events
UPKEEP_EVERY_S = 60.0
PRUNE_EVERY_S = 3600.0


def settings_from(config: dict[str, Any]) -> Settings:
    return Settings(
        allow_private=bool(config.get("WEBHOOKS_ALLOW_PRIVATE")),
        window=timedelta(seconds=float(config.get("WEBHOOKS_WINDOW_SECONDS", 86400))),
        base_seconds=float(config.get("WEBHOOKS_RETRY_BASE_SECONDS", 30)),
        timeout=float(config.get("WEBHOOKS_TIMEOUT_SECONDS", 10)),
    )


class Webhooks(threading.Thread):
    """The worker's outgoing webhook deliveries: a dispatcher (this thread) and up to
    `pool_size` delivery threads, one per endpoint being served."""

    def __init__(self, app: WorkerApp, *, burst: bool = False, pool_size: int = POOL_SIZE) -> None:
        # A daemon: a cold shutdown ends the process without waiting for a receiver.
        super().__init__(name="broadside-webhooks", daemon=True)
        self.app = app
        self.burst = burst
        self.pool_size = pool_size
        self.stopping = threading.Event()
        self.draining = threading.Event()  # burst: the streams have ended
        self.wake = threading.Event()
        self.serving: dict[int, threading.Thread] = {}  # endpoint id -> its delivery thread
        self.lock = threading.Lock()
        self.settings = settings_from(app.config)
        self._upkeep_at = 0.0
        self._pruned_at = float("-inf")
        self._said_down = False

    def stop(self) -> None:
        """Warm: no new batch; the POSTs in flight end (within the deadline), then the threads."""
        self.stopping.set()
        self.wake.set()

    def finish(self) -> None:
        """Burst: end once nothing is due and no POST is in flight."""
        self.draining.set()
        self.wake.set()

    def in_flight(self) -> list[threading.Thread]:
        with self.lock:
            return list(self.serving.values())

    def join_all(self, timeout: float | None = None) -> None:
        """Wait for the dispatcher and every delivery thread (each at most `timeout`)."""
        self.join(timeout)
        for thread in self.in_flight():
            thread.join(timeout)

    def run(self) -> None:
        try:
            self._drop_retired_queue()
            while not self.stopping.is_set():
                draining = self.draining.is_set()
                idle = not self.in_flight()  # looked at before the due events: see below
                found = self._round()
                # Nothing due while nothing was in flight: no POST of this runner can make an
                # event due again, and the streams that record events have ended.
                if draining and idle and not found:
                    return
                self.wake.wait(POLL_S)
                self.wake.clear()
        finally:
            db.session.remove()

    def _round(self) -> bool:
        """Upkeep when due, then a delivery thread for each endpoint with due events (while
        threads are free); returns whether any was found (or the round could not look)."""
        try:
            if time.monotonic() >= self._upkeep_at:
                self._upkeep()
            found = self._dispatch()
            if self._said_down:
                log.info("outgoing webhooks: the database answers again")
                self._said_down = False
            return found
        except SQLAlchemyError as exc:
            db.session.remove()
            if not self._said_down:
                log.warning("outgoing webhooks wait: the database does not answer (%s)", exc)
                self._said_down = True
            return not self.draining.is_set()  # a burst does not wait for the database
        except Exception:  # said, and tried again at the next round
            db.session.remove()
            log.exception("outgoing webhooks: the round failed")
            return False

    def _upkeep(self) -> None:
        session = db.session()
        now = utcnow()
        counted = ledger.release_stale(session, now, window=self.settings.window,
                                       base_seconds=self.settings.base_seconds)
        if counted:
            log.warning("%d webhook deliveries were left in flight by a stopped worker: each "
                        "counted as a failed attempt, sent again later", counted)
        if time.monotonic() - self._pruned_at >= PRUNE_EVERY_S:
            ledger.prune(session, now)
            self._pruned_at = time.monotonic()
        session.commit()
        self._upkeep_at = time.monotonic() + UPKEEP_EVERY_S

    def _dispatch(self) -> bool:
        with self.lock:
            serving = set(self.serving)
        free = self.pool_size - len(serving)
        if free <= 0 or self.stopping.is_set():
            return True
        session = db.session()
        endpoint_ids = ledger.due_endpoints(session, utcnow(), exclude=serving, limit=free)
        session.commit()
        for endpoint_id in endpoint_ids:
            thread = threading.Thread(target=self._deliver, args=(endpoint_id,), daemon=True,
                                      name=f"broadside-webhooks-{endpoint_id}")
            with self.lock:
                self.serving[endpoint_id] = thread
            thread.start()
        return bool(endpoint_ids)

    def _deliver(self, endpoint_id: int) -> None:
        """One batch of one endpoint's due events, on this delivery thread."""
        try:
            outcome = posting.deliver_due(db.session(), self.settings, endpoint_id=endpoint_id,
                                          stop=self.stopping.is_set)
            if outcome.delivered or outcome.failed:
                log.info("webhooks to endpoint %d: %d delivered, %d failed attempts",
                         endpoint_id, outcome.delivered, outcome.failed)
        except SQLAlchemyError as exc:
            log.warning("webhooks to endpoint %d: the database does not answer (%s)", endpoint_id, exc)
        except Exception:
            log.exception("webhooks to endpoint %d: the batch failed", endpoint_id)
        finally:
            db.session.remove()
            with self.lock:
                self.serving.pop(endpoint_id, None)
            self.wake.set()

    def _drop_retired_queue(self) -> None:
        config = self.app.config
        try:
            dropped = Jobs(self.app.redis, config["BROADSIDE_NAMESPACE"]).drop_retired_queues()
        except RedisError as exc:
            log.info("the retired webhooks queue was not emptied (Redis: %s); it is never read", exc)
            return
        if dropped:
            log.info("dropped %d job(s) of the retired webhooks queue: the runner delivers "
                     "their events from the database", dropped)
