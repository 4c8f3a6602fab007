"""The sending worker, one paced stream per sending identity: `python -m jobs` (or the
`broadside-worker` script; `flask --app webapp worker` runs the same code in the web app).

Each identity's stream is served by one process holding that identity's lease (invariant 1,
per identity): the worker serves the default identity in this process and starts one child
process per other identity (and for identities added later, at its next maintenance tick);
`--identity NAME` (repeatable) serves only those, so a large installation runs one worker per
identity on as many machines as it likes. Children die with their parent (PR_SET_PDEATHSIG)
and are stopped with it on SIGTERM.

RQ's SimpleWorker runs each job in the stream's process (no forked work-horse), so killing
it stops that stream's sending at once. Before taking any job a stream takes its lease (at
once from a holder proven dead, see broadside.delivery.lease), repairs its orphans (invariants 5 and
7), and then listens to its transactional queue before its broadcasts queue. The lease is
renewed by its own thread (`LeaseKeeper`), maintenance runs on another.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time

from redis import Redis
from redis.exceptions import RedisError
from rq import SimpleWorker
from rq.job import Job
from rq.queue import Queue
from sqlalchemy import exists, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from broadside.core.logs import log_context, redact_also, url_passwords
from broadside.core.models import BulkAction, Import
from broadside.core.redis_health import not_answering, shown_url
from broadside.delivery import queues
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.identities import service as identity_service
from broadside.delivery.identities.service import SendingIdentity
from broadside.delivery.lease import RENEW_EVERY_S, Lease, LeaseKeeper
from broadside.delivery.providers.factory import make_transport
from broadside.delivery.queues import Jobs
from broadside.delivery.streams import record_rate
from broadside.delivery.waits import add_wait_seconds
from jobs import runtime
from jobs.app import WorkerApp, create_worker_app, schema_state
from jobs.children import Children
from jobs.database import db
from jobs.maintenance import STALE_CLAIM, ensure_jobs, mark_orphans_unknown

log = logging.getLogger("broadside.worker")

MAINTENANCE_EVERY_S = 5.0
BURST_HELP = "Exit when the queues are empty (for tests)."
IDENTITY_HELP = ("Serve only this sending identity's stream (repeatable; 'default' is the "
                 "environment's). Without it, every identity is served.")
FINISHED = ("done", "failed")  # an import's or a bulk action's final states


def recover_interrupted(session: Session, rt: runtime.Runtime) -> None:
    """Queue again the imports and bulk actions a stopped worker left unfinished. Their
    modules (the CSV importer, the bulk actions: ~1.3 MB) are loaded only when a row of theirs
    is unfinished, so a worker that only sends never holds them (issue 19 point 6)."""
    if session.scalar(select(exists().where(Import.status.not_in(FINISHED)))):
        from jobs.imports import recover_interrupted_imports

        recover_interrupted_imports(session, rt)
    if session.scalar(select(exists().where(BulkAction.status.not_in(FINISHED)))):
        from jobs.bulk import recover_interrupted_bulk_actions

        recover_interrupted_bulk_actions(session, rt)
    session.commit()


class BroadsideWorker(SimpleWorker):
    """Runs every job with the job id on every log line, and closes the job's database session
    after it (whatever the job left open)."""

    def perform_job(self, job: Job, queue: Queue) -> bool:
        try:
            with log_context(job_id=job.id):
                return super().perform_job(job, queue)
        finally:
            db.session.remove()

    def unsubscribe(self) -> None:
        # RQ's own order (UNSUBSCRIBE, then stop the listening thread) races: when the reply
        # reaches the thread before the main thread stops it, the thread, no longer subscribed,
        # waits 60 s for a subscription; since redis-py 8.2 the stop() joins it, so a deploy's
        # SIGTERM went unobeyed for a minute. Stopping first, the reply ends the thread's loop.
        thread = self.pubsub_thread
        if thread is None:
            return
        pubsub = self.pubsub
        assert pubsub is not None  # set with the thread, in subscribe()
        thread.stop(timeout=0)  # clears its run flag; joined below, briefly
        try:
            pubsub.unsubscribe()
        finally:
            thread.join(timeout=1)
            pubsub.close()

    def request_stop(self, signum, frame):
        # A deploy: the slice in progress stops after the send in flight and hands over.
        if runtime.current is not None:
            runtime.current.stop.set()
        super().request_stop(signum, frame)


def wait_for_schema(app: WorkerApp, stop: threading.Event) -> bool:
    """The web process applies migrations; the worker waits until they are in place."""
    said = False
    while not stop.is_set():
        try:
            with app.engine.connect() as connection:
                ready, current, head = schema_state(connection)
            if ready:
                return True
        except SQLAlchemyError as exc:
            current, head = f"unreachable ({exc.__class__.__name__})", "the migrations' head"
        if not said:
            log.info(
                "waiting for the database schema (at %s, need %s): run `flask --app webapp db upgrade`",
                current,
                head,
            )
            said = True
        stop.wait(1.0)
    return False


REDIS_RETRY_FIRST_S = 0.5
REDIS_RETRY_MAX_S = 15.0
STILL_DOWN_EVERY_S = 60.0


def acquire_lease(lease: Lease, stop: threading.Event, redis_url: str) -> bool:
    """Wait for the stream's lease: while another worker holds it, or while Redis does not
    answer (said once in words with how to start it, then every minute; retried with backoff
    up to REDIS_RETRY_MAX_S, and said again when Redis is back)."""
    last_said = 0.0
    down_since: float | None = None
    retry_in = REDIS_RETRY_FIRST_S
    while not stop.is_set():
        try:
            taken = lease.try_acquire()
            if not taken:
                dead = lease.take_from_dead()
                if dead is not None:
                    log.warning("the previous holder of the sending lease (%s) is provably dead "
                                "(its process is gone); taking over", dead)
                    taken = lease.try_acquire()
            holder = None if taken else lease.holder()
        except RedisError as exc:
            now = time.monotonic()
            if down_since is None:
                down_since = last_said = now
                log.error("%s (%s); the worker retries by itself and starts sending once it answers",
                          not_answering(redis_url), exc)
            elif now - last_said >= STILL_DOWN_EVERY_S:
                last_said = now
                log.warning("Redis is still not answering at %s after %.0f s; retrying every %.0f s",
                            shown_url(redis_url), now - down_since, retry_in)
            stop.wait(retry_in)
            retry_in = min(retry_in * 2, REDIS_RETRY_MAX_S)
            continue
        if down_since is not None:
            log.info("Redis is answering again at %s", shown_url(redis_url))
            down_since, last_said, retry_in = None, 0.0, REDIS_RETRY_FIRST_S
        if taken:
            log.info("lease taken by %s", lease.identity)
            return True
        if time.monotonic() - last_said > 10:
            log.warning("another worker holds the sending lease (%s); waiting for it",
                        holder or "it is being released")
            last_said = time.monotonic()
        stop.wait(0.5)
    return False


class RedisWatch:
    """Says in words when the lease's renewals find Redis not answering (once), that they
    still fail (every RENEWAL_FAILED_EVERY_S), and when it is back."""

    RENEWAL_FAILED_EVERY_S = 2.0

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self.down = False
        self.said_at = 0.0

    def __call__(self, error: RedisError | None) -> None:
        if error is None:
            if self.down:
                self.down = False
                log.info("Redis is answering again at %s", shown_url(self.redis_url))
            return
        if not self.down:
            self.down = True
            log.error("%s; sending waits until it answers", not_answering(self.redis_url))
        if time.monotonic() - self.said_at >= self.RENEWAL_FAILED_EVERY_S:
            self.said_at = time.monotonic()
            log.warning("cannot renew the lease, Redis unreachable: %s", error)


class Maintenance(threading.Thread):
    """Every few seconds: repairs orphans, promotes schedules, follows the children, reports
    the stream's rate. (The lease is renewed by its own thread, broadside.delivery.lease.LeaseKeeper.)"""

    def __init__(self, app: WorkerApp, rt: runtime.Runtime, children: Children | None = None) -> None:
        super().__init__(name="broadside-maintenance", daemon=True)
        self.app = app
        self.rt = rt
        self.children = children
        self.done = threading.Event()
        self.pace_wait_flushed = 0.0

    def run(self) -> None:
        first = True
        while not self.done.wait(0 if first else MAINTENANCE_EVERY_S):
            first = False
            self.tick()

    def tick(self) -> None:
        try:
            try:
                mark_orphans_unknown(
                    db.session(), exclude_broadcast=self.rt.running_broadcast, older_than=STALE_CLAIM,
                    exclude_automations=self.rt.running_automations, identity_id=self.rt.identity_id,
                )
                ensure_jobs(db.session(), self.rt)
                if self.children is not None:
                    self.children.follow(db.session())
            finally:
                db.session.remove()
            self.flush_pace_wait()
            self.report_rate()
        except (RedisError, SQLAlchemyError) as exc:
            log.warning("maintenance skipped: %s", exc)

    def report_rate(self) -> None:
        """The requests per second this stream achieved since the last report (System page)."""
        rt, now = self.rt, time.monotonic()
        elapsed = max(now - rt.sent_requests_since, 1e-6)
        record_rate(rt.lease.redis, self.app.config["BROADSIDE_NAMESPACE"], rt.stream,
                    rt.sent_requests / elapsed)
        rt.sent_requests, rt.sent_requests_since = 0, now

    def flush_pace_wait(self) -> None:
        """Add the pacer's waiting since the last flush to a running total in Redis, so
        /metrics reports it across worker restarts."""

        waited = self.rt.pacer.waited_seconds
        add_wait_seconds(self.rt.lease.redis, self.app.config["BROADSIDE_NAMESPACE"], "pace",
                         waited - self.pace_wait_flushed)
        self.pace_wait_flushed = waited


def run_worker(app: WorkerApp, burst: bool = False, identities: tuple[str, ...] = ()) -> int:
    """Serve every identity (none named) or the named ones: the first in this process, each
    other in a child process."""
    db.bind(app.engine)
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if not wait_for_schema(app, stop):
            return 0
        try:
            if identities:
                found = [(name, identity_service.by_name(db.session(), app.config, name))
                         for name in identities]
                missing = [name for name, identity in found if identity is None]
                if missing:
                    log.error("no sending identity called %s (see Settings → Sending identities)",
                              ", ".join(repr(m) for m in missing))
                    return 2
                served = [identity for _, identity in found if identity is not None]
            else:
                served = [identity_service.default_identity(db.session(), app.config)]
        finally:
            db.session.remove()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stop.is_set():
        return 0
    children = Children(app, burst, follow_all=not identities,
                        fixed=[i.id for i in served[1:] if i.id is not None])
    children.start_fixed({i.id: i.name for i in served[1:] if i.id is not None})
    try:
        return serve_stream(app, served[0], burst, children)
    finally:
        children.stop_all()


def serve_stream(app: WorkerApp, identity: SendingIdentity, burst: bool = False,
                 children: Children | None = None) -> int:
    """One identity's stream in this process: its lease, pace, cap, transport and queues."""
    redis = app.redis
    config = dict(app.config)
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    # Its transport's keys and webhook secret come from the database: never in a log line.
    redact_also([*url_passwords(identity.transport_url), identity.webhook_secret])
    # The lease's own connection, with a timeout well under the TTL: a renewal stuck behind
    # a slow Redis reply gives up and retries, instead of outliving the lease.
    lease_redis = Redis.from_url(config["REDIS_URL"], socket_timeout=RENEW_EVERY_S * 2,
                                 socket_connect_timeout=RENEW_EVERY_S * 2)
    lease = Lease(lease_redis, config["BROADSIDE_NAMESPACE"], stream=identity.key)
    log.info("taking the sending lease of identity %s", identity.name)
    if not acquire_lease(lease, stop, config["REDIS_URL"]):
        lease_redis.close()
        return 0

    exit_code = 0
    lost = threading.Event()
    current_worker: list[BroadsideWorker] = []

    def on_lost(holder: str | None) -> None:
        log.error("lease lost to %s; stopping", holder)
        lost.set()
        stop.set()
        for worker in current_worker:
            worker._stop_requested = True

    keeper = LeaseKeeper(lease, on_lost, RedisWatch(config["REDIS_URL"]))
    keeper.start()  # renewing from now on: start-up below may take longer than the TTL
    transport = make_transport(identity.transport_url, app.instance_path,
                               float(config.get("SMTP_TIMEOUT", 30)))
    rt = runtime.Runtime(
        lease=lease,
        pacer=runtime.LeasedPacer(identity.delay_ms, keeper, stop),
        transport=transport,
        hourly=HourlyCap(redis, config["BROADSIDE_NAMESPACE"], identity.hourly_limit, identity.key),
        config=config,
        jobs=Jobs(redis, config["BROADSIDE_NAMESPACE"]),
        instance_path=app.instance_path,
        stop=stop,
        identity_id=identity.id,
        identity_name=identity.name,
    )
    runtime.current = rt
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    log.info(
        "worker ready for identity %s: transport %s, %d ms between requests", identity.name,
        transport.description, identity.delay_ms,
    )

    try:
        mark_orphans_unknown(db.session(), exclude_broadcast=None, older_than=None,
                             identity_id=rt.identity_id)
        ensure_jobs(db.session(), rt)
        if rt.identity_id is None:
            # Holding the default stream's lease, no import can really be running (imports
            # run on a stream's worker, and every stream's worker is started beside the
            # default's or after it): requeue the interrupted ones.
            recover_interrupted(db.session(), rt)
    finally:
        db.session.remove()
    maintenance = Maintenance(app, rt, children)
    maintenance.start()
    # RQ blocks in BLPOP for minutes at a time: its connection must not have the app's
    # 5-second socket timeout, or every idle wait ends in a "Redis connection timeout".
    rq_redis = Redis.from_url(config["REDIS_URL"], socket_connect_timeout=5, socket_keepalive=True,
                              health_check_interval=30)
    try:
        while not stop.is_set():
            names = rt.jobs.listened(rt.stream)
            listened = [Queue(n, connection=rq_redis, serializer=queues.SERIALIZER) for n in names]
            worker = BroadsideWorker(listened, connection=rq_redis, serializer=queues.SERIALIZER)
            current_worker[:] = [worker]
            try:
                worker.work(burst=burst, logging_level="WARNING", with_scheduler=False)
            except RedisError as exc:
                log.warning("queue connection failed: %s", exc)
            if burst or stop.is_set() or worker._stop_requested:
                break
            # RQ's loop ended on an error (Redis went away): wait for Redis, then listen again.
            log.warning("job loop ended unexpectedly; restarting it")
            while not stop.is_set():
                try:
                    rq_redis.ping()
                    break
                except RedisError:
                    stop.wait(1.0)
    finally:
        maintenance.done.set()
        keeper.stop()
        maintenance.join(5)
        keeper.join(5)
        try:
            maintenance.flush_pace_wait()  # the last few seconds' waiting, for /metrics
        except RedisError:
            pass
        transport.close()
        rq_redis.close()
        if lost.is_set():
            exit_code = 1
        else:
            try:
                lease.release()
                log.info("lease released; worker stopped")
            except RedisError:
                pass
        lease_redis.close()
        runtime.current = None
    return exit_code


def main(argv: list[str] | None = None) -> None:
    """`python -m jobs [--identity NAME]... [--burst]`: the sending worker, the lean way (no web
    app in the process). The options are `flask --app webapp worker`'s (jobs.flask_command)."""
    parser = argparse.ArgumentParser(
        prog="broadside-worker",
        description="Run the sending worker: one paced stream per sending identity (RQ, concurrency 1 each).")
    parser.add_argument("--burst", action="store_true", help=BURST_HELP)
    parser.add_argument("--identity", dest="identities", action="append", default=[],
                        metavar="NAME", help=IDENTITY_HELP)
    options = parser.parse_args(argv)
    sys.exit(run_worker(create_worker_app(), burst=options.burst,
                        identities=tuple(options.identities)))
