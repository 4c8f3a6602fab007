"""`flask --app webapp worker`: the one sending worker.

RQ's SimpleWorker runs each job in this process (no forked work-horse), so killing this
process stops all sending at once. Before taking any job the worker takes the lease
(invariant 1), repairs orphans (invariants 5 and 7), and then listens to the transactional
queue before the broadcasts queue.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time

import click
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from flask import Flask, current_app
from flask.cli import with_appcontext
from redis import Redis
from redis.exceptions import RedisError
from rq import SimpleWorker
from rq.job import Job
from rq.queue import Queue
from sqlalchemy.exc import SQLAlchemyError

from broadside import queues
from broadside.db import db
from broadside.hourly import HourlyCap
from broadside.lease import RENEW_EVERY_S, Lease
from broadside.logs import log_context
from broadside.queues import Jobs
from broadside.transports import make_transport
from broadside.waits import add_wait_seconds
from jobs import runtime
from jobs.imports import recover_interrupted_imports
from jobs.maintenance import STALE_CLAIM, ensure_jobs, mark_orphans_unknown
from jobs.pacing import Pacer

log = logging.getLogger("broadside.worker")

MAINTENANCE_EVERY_S = 5.0


class BroadsideWorker(SimpleWorker):
    """Runs every job inside the app context, with the job id on every log line."""

    flask_app: Flask

    def perform_job(self, job: Job, queue: Queue) -> bool:
        with self.flask_app.app_context(), log_context(job_id=job.id):
            return super().perform_job(job, queue)

    def request_stop(self, signum, frame):
        # A deploy: the slice in progress stops after the send in flight and hands over.
        if runtime.current is not None:
            runtime.current.stop.set()
        super().request_stop(signum, frame)


def wait_for_schema(app: Flask, stop: threading.Event) -> bool:
    """The web process applies migrations; the worker waits until they are in place."""
    migrate = app.extensions["migrate"]
    config = migrate.migrate.get_config(migrate.directory)
    head = ScriptDirectory.from_config(config).get_current_head()
    said = False
    while not stop.is_set():
        try:
            with app.app_context(), db.engine.connect() as connection:
                current = MigrationContext.configure(connection).get_current_revision()
            if current == head:
                return True
        except SQLAlchemyError as exc:
            current = f"unreachable ({exc.__class__.__name__})"
        if not said:
            log.info(
                "waiting for the database schema (at %s, need %s): run `flask --app webapp db upgrade`",
                current,
                head,
            )
            said = True
        stop.wait(1.0)
    return False


def acquire_lease(lease: Lease, stop: threading.Event) -> bool:
    last_said = 0.0
    while not stop.is_set():
        try:
            if lease.try_acquire():
                log.info("lease taken by %s", lease.identity)
                return True
            holder = lease.holder()
        except RedisError as exc:
            holder = f"(Redis unreachable: {exc})"
        if time.monotonic() - last_said > 10:
            log.warning("another worker holds the sending lease (%s); waiting for it", holder)
            last_said = time.monotonic()
        stop.wait(0.5)
    return False


class Maintenance(threading.Thread):
    """Keeps the lease alive and, every few seconds, repairs orphans and promotes schedules."""

    def __init__(self, app: Flask, rt: runtime.Runtime, on_lost) -> None:
        super().__init__(name="broadside-maintenance", daemon=True)
        self.app = app
        self.rt = rt
        self.on_lost = on_lost
        self.done = threading.Event()
        self.pace_wait_flushed = 0.0

    def run(self) -> None:
        last_check = 0.0
        while not self.done.wait(RENEW_EVERY_S if last_check else 0):
            try:
                if not self.rt.lease.renew():
                    holder = self.rt.lease.holder()
                    if holder is None and self.rt.lease.try_acquire():
                        log.warning("lease had vanished (Redis restarted or flushed); taken again")
                    else:
                        log.error("lease lost to %s; stopping", holder)
                        self.on_lost()
                        return
            except RedisError as exc:
                log.warning("cannot renew the lease, Redis unreachable: %s", exc)
                continue
            if time.monotonic() - last_check >= MAINTENANCE_EVERY_S:
                last_check = time.monotonic()
                self.tick()

    def tick(self) -> None:
        try:
            with self.app.app_context():
                mark_orphans_unknown(
                    db.session(), exclude_broadcast=self.rt.running_broadcast, older_than=STALE_CLAIM,
                    exclude_automations=self.rt.running_automations,
                )
                ensure_jobs(db.session(), self.rt)
                db.session.remove()
            self.flush_pace_wait()
        except (RedisError, SQLAlchemyError) as exc:
            log.warning("maintenance skipped: %s", exc)

    def flush_pace_wait(self) -> None:
        """Add the pacer's waiting since the last flush to a running total in Redis, so
        /metrics reports it across worker restarts."""

        waited = self.rt.pacer.waited_seconds
        add_wait_seconds(self.rt.lease.redis, self.app.config["BROADSIDE_NAMESPACE"], "pace",
                         waited - self.pace_wait_flushed)
        self.pace_wait_flushed = waited


def run_worker(app: Flask, burst: bool = False) -> int:
    redis = app.extensions["broadside_redis"]
    config = dict(app.config)
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    if not wait_for_schema(app, stop):
        return 0
    lease = Lease(redis, config["BROADSIDE_NAMESPACE"])
    if not acquire_lease(lease, stop):
        return 0
    transport = make_transport(config, app.instance_path)
    rt = runtime.Runtime(
        lease=lease,
        pacer=Pacer(config["SEND_DELAY_MS"]),
        transport=transport,
        hourly=HourlyCap(redis, config["BROADSIDE_NAMESPACE"], config["SEND_HOURLY_LIMIT"]),
        config=config,
        jobs=Jobs(redis, config["BROADSIDE_NAMESPACE"]),
        instance_path=app.instance_path,
        stop=stop,
    )
    runtime.current = rt
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    log.info(
        "worker ready: transport %s, %d ms between sends", transport.description, config["SEND_DELAY_MS"]
    )

    exit_code = 0
    lost = threading.Event()
    current_worker: list[BroadsideWorker] = []

    def on_lost() -> None:
        lost.set()
        stop.set()
        for worker in current_worker:
            worker._stop_requested = True

    with app.app_context():
        mark_orphans_unknown(db.session(), exclude_broadcast=None, older_than=None)
        ensure_jobs(db.session(), rt)
        # Holding the lease, no import can really be running: requeue the interrupted ones.
        recover_interrupted_imports(db.session(), rt)
        db.session.remove()
    maintenance = Maintenance(app, rt, on_lost)
    maintenance.start()
    # RQ blocks in BLPOP for minutes at a time: its connection must not have the app's
    # 5-second socket timeout, or every idle wait ends in a "Redis connection timeout".
    rq_redis = Redis.from_url(config["REDIS_URL"], socket_connect_timeout=5, socket_keepalive=True,
                              health_check_interval=30)
    try:
        while not stop.is_set():
            names = [rt.jobs.queue_name(q) for q in queues.LISTENED]
            listened = [Queue(n, connection=rq_redis, serializer=queues.SERIALIZER) for n in names]
            worker = BroadsideWorker(listened, connection=rq_redis, serializer=queues.SERIALIZER)
            worker.flask_app = app
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
        maintenance.join(5)
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
        runtime.current = None
    return exit_code


@click.command("worker")
@click.option("--burst", is_flag=True, help="Exit when the queues are empty (for tests).")
@with_appcontext
def worker_command(burst: bool) -> None:
    """Run the one sending worker (RQ, concurrency 1)."""
    sys.exit(run_worker(current_app._get_current_object(), burst=burst))  # type: ignore[attr-defined]
