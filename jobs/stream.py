"""One sending identity's stream, served by a thread of the worker process (invariant 1, one
consumer per identity): `Stream`.

Each stream has its own lease (broadside.delivery.lease, keyed by the identity) renewed by its
own `LeaseKeeper` thread, its own pace (`LeasedPacer`), hourly cap, transport, Redis
connections (the lease's, the jobs' and RQ's blocking one) and database session
(jobs.database: a session per thread), and its own RQ job loop over its queues
(jobs.rq_worker). Nothing of one stream waits on another's: a slow provider holds only its
own thread, which waits on its socket with the interpreter's lock released.

Before taking any job a stream takes its lease (at once from a holder proven dead, see
broadside.delivery.lease), repairs its orphans (invariants 5 and 7), and then listens to its
transactional queue before its broadcasts queue. `stop()` is a warm stop: the slice in
progress ends after the send in flight, the lease is released. The worker's maintenance
thread calls `tick()` every few seconds while the stream holds its lease (jobs.supervisor).
"""

from __future__ import annotations

import logging
import threading
import time

from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from broadside.core import mailbox_urls
from broadside.core.logs import redact_also, url_passwords
from broadside.core.models import BulkAction, Import
from broadside.core.redis_health import not_answering, shown_url
from broadside.delivery import queues
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.identities.service import SendingIdentity
from broadside.delivery.lease import RENEW_EVERY_S, Lease, LeaseKeeper
from broadside.delivery.providers.factory import make_transport
from broadside.delivery.queues import Jobs
from broadside.delivery.streams import forget_running, record_rate, record_running, running_values
from broadside.delivery.waits import add_wait_seconds
from broadside.mail.verp import ReturnPath, Verp
from jobs import account_ceiling, runtime
from jobs.app import WorkerApp
from jobs.database import db
from jobs.maintenance import STALE_CLAIM, ensure_jobs, mark_orphans_unknown
from jobs.rq_worker import BroadsideWorker, ThreadDeathPenalty

log = logging.getLogger("broadside.worker")

FINISHED = ("done", "failed")  # an import's or a bulk action's final states
REDIS_RETRY_FIRST_S = 0.5
REDIS_RETRY_MAX_S = 15.0
STILL_DOWN_EVERY_S = 60.0


def recover_interrupted(session: Session, rt: runtime.Runtime) -> None:
    """Queue again the imports and bulk actions a stopped worker left unfinished. Their
    modules (the CSV importer, the bulk actions: ~1.3 MB) are loaded only when a row of theirs
    is unfinished, so a worker that only sends never holds them."""
    if session.scalar(select(exists().where(Import.status.not_in(FINISHED)))):
        from jobs.imports import recover_interrupted_imports

        recover_interrupted_imports(session, rt)
    if session.scalar(select(exists().where(BulkAction.status.not_in(FINISHED)))):
        from jobs.bulk import recover_interrupted_bulk_actions

        recover_interrupted_bulk_actions(session, rt)
    session.commit()


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
            log.info("lease taken by %s for the stream %s", lease.identity, lease.stream)
            return True
        if time.monotonic() - last_said > 10:
            log.warning("another worker holds the sending lease of the stream %s (%s); waiting for it",
                        lease.stream, holder or "it is being released")
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


class Stream(threading.Thread):
    """One identity's stream on a thread of its own: its lease, then its jobs, until stopped."""

    def __init__(self, app: WorkerApp, identity: SendingIdentity, *, burst: bool = False) -> None:
        # A daemon: a cold shutdown (a second signal) ends the process without waiting for it.
        super().__init__(name=f"stream {identity.key}", daemon=True)
        self.app = app
        self.identity = identity
        self.burst = burst
        self.stopping = threading.Event()  # the runtime's `stop`: a slice ends at the next send
        self.exit_code: int | None = None  # 1: the lease was lost, or an error ended it
        self.rt: runtime.Runtime | None = None
        self.keeper: LeaseKeeper | None = None
        self._worker: BroadsideWorker | None = None
        # Held by a maintenance tick, and by the stream on its way out before the lease goes:
        # no repair of this identity's rows runs once another worker may hold its lease.
        self._tick_lock = threading.Lock()
        self._serving = False
        self._pace_wait_flushed = 0.0
        self._ses = account_ceiling.SesRates()  # SES's MaxSendRate, read again hourly

    def stop(self) -> None:
        """A warm stop: the job in progress ends after the send in flight, then the lease is
        released. Returns at once; `join()` waits for it."""
        self.stopping.set()
        worker = self._worker
        if worker is not None:
            worker.stop_soon()

    def abandon(self) -> None:
        """A cold stop, the process about to end: no send starts from now on (the lease is no
        longer surely ours, locally), and the lease is released for a successor."""
        self.stopping.set()
        keeper = self.keeper
        if keeper is None:
            return
        keeper.stop()
        keeper.join(1)  # a renewal in flight ends first (its socket timeout is under a second)
        keeper.lease.valid_until = float("-inf")
        try:
            keeper.lease.release()
        except RedisError:
            pass  # it expires by itself; a successor on this machine sees this process gone

    def run(self) -> None:
        try:
            self.exit_code = self._serve()
        except Exception:
            log.exception("the stream %s ended on an unexpected error", self.identity.key)
            self.exit_code = 1
        finally:
            runtime.bind(None)
            db.session.remove()

    def _serve(self) -> int:
        identity, config = self.identity, self.app.config
        # Its transport's keys and webhook secret come from the database: never in a log line.
        redact_also([*url_passwords(identity.transport_url), identity.webhook_secret,
                     *mailbox_urls.secrets_in_url(identity.bounce_mailbox_url)])
        # The lease's own connection, with a timeout well under the TTL: a renewal stuck behind
        # a slow Redis reply gives up and retries, instead of outliving the lease.
        lease_redis = Redis.from_url(config["REDIS_URL"], socket_timeout=RENEW_EVERY_S * 2,
                                     socket_connect_timeout=RENEW_EVERY_S * 2)
        try:
            lease = Lease(lease_redis, config["BROADSIDE_NAMESPACE"], stream=identity.key)
            log.info("taking the sending lease of identity %s", identity.name)
            if not acquire_lease(lease, self.stopping, config["REDIS_URL"]):
                return 0
            return self._hold(lease)
        finally:
            lease_redis.close()

    def _hold(self, lease: Lease) -> int:
        """Serve the stream while holding its lease; release it on the way out (unless lost)."""
        identity, config = self.identity, self.app.config
        lost = threading.Event()

        def on_lost(holder: str | None) -> None:
            log.error("the lease of the stream %s was lost to %s; stopping it", identity.key, holder)
            lost.set()
            self.stop()

        keeper = self.keeper = LeaseKeeper(lease, on_lost, RedisWatch(config["REDIS_URL"]))
        keeper.start()  # renewing from now on: start-up below may take longer than the TTL
        # This stream's own connections: the jobs' and cap's, and RQ's, which blocks in BLPOP
        # (without the 5-second socket timeout, or every listen would end in a timeout).
        redis = Redis.from_url(config["REDIS_URL"], socket_timeout=5, socket_connect_timeout=2)
        rq_redis = Redis.from_url(config["REDIS_URL"], socket_connect_timeout=5, socket_keepalive=True,
                                  health_check_interval=30)
        transport = None
        try:
            transport = make_transport(identity.transport_url, self.app.instance_path,
                                       float(config.get("SMTP_TIMEOUT", 30)),
                                       allow_private=bool(config.get("PROVIDER_ENDPOINTS_ALLOW_PRIVATE")),
                                       signer=identity.dkim_signer)
            ceiling = account_ceiling.build(identity, redis, config)
            if ceiling is not None:
                account_ceiling.listen(transport, ceiling)
            rt = runtime.Runtime(
                lease=lease,
                pacer=runtime.LeasedPacer(identity.delay_ms, keeper, self.stopping, ceiling),
                transport=transport,
                hourly=HourlyCap(redis, config["BROADSIDE_NAMESPACE"], identity.hourly_limit, identity.key),
                config=dict(config),
                jobs=Jobs(redis, config["BROADSIDE_NAMESPACE"]),
                instance_path=self.app.instance_path,
                stop=self.stopping,
                identity_id=identity.id,
                identity_name=identity.name,
                ceiling=ceiling,
                return_path=(ReturnPath(Verp(config["SECRET_KEY"]), *identity.verp)
                             if identity.verp else None),
            )
            runtime.bind(rt)
            self.rt = rt
            self._say_running(rt)
            log.info("worker ready for identity %s: transport %s, %d ms between requests%s",
                     identity.name, transport.description, identity.delay_ms,
                     f", its account at most {ceiling.rate:g} requests/s"
                     if ceiling is not None and ceiling.rate else "")
            self._start_up(rt)
            with self._tick_lock:
                self._serving = True
            self._listen(rt, rq_redis)
        finally:
            with self._tick_lock:  # a tick in progress ends before the lease goes
                self._serving = False
            keeper.stop()
            keeper.join(5)
            try:
                self._flush_pace_wait()  # the last few seconds' waiting, for /metrics
            except RedisError:
                pass
            if transport is not None:
                transport.close()
            rq_redis.close()
            redis.close()
            runtime.bind(None)
            if not lost.is_set():
                try:  # before the lease goes: a successor's values are never deleted
                    forget_running(lease.redis, config["BROADSIDE_NAMESPACE"], identity.key)
                except RedisError:
                    pass  # it lapses by itself
                try:
                    lease.release()
                    log.info("lease released; the stream %s stopped", identity.key)
                except RedisError:
                    pass
        return 1 if lost.is_set() else 0

    def _start_up(self, rt: runtime.Runtime) -> None:
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

    def _listen(self, rt: runtime.Runtime, rq_redis: Redis) -> None:
        """RQ's loop over the stream's queues until stopped (or, in burst mode, empty)."""
        while not self.stopping.is_set():
            namespace = rt.jobs.namespace
            listened = [queues.rq_queue(name, rq_redis, namespace,
                                        death_penalty_class=ThreadDeathPenalty)
                        for name in rt.jobs.listened(rt.stream)]
            worker = BroadsideWorker(listened, connection=rq_redis, serializer=queues.SERIALIZER,
                                     name=queues.unique_name(namespace))
            worker.redis_workers_keys = queues.workers_key(namespace)
            self._worker = worker
            if self.stopping.is_set():
                break  # stopped before the worker was there to be told
            try:
                worker.work(burst=self.burst, logging_level="WARNING", with_scheduler=False)
            except RedisError as exc:
                log.warning("queue connection failed: %s", exc)
            if self.burst or self.stopping.is_set() or worker.stop_asked:
                break
            # RQ's loop ended on an error (Redis went away): wait for Redis, then listen again.
            log.warning("job loop of the stream %s ended unexpectedly; restarting it", rt.stream)
            while not self.stopping.is_set():
                try:
                    rq_redis.ping()
                    break
                except RedisError:
                    self.stopping.wait(1.0)

    def tick(self) -> None:
        """This stream's maintenance while it holds its lease: repairs its orphans, gives its
        broadcasts, schedules and messages their jobs, reports its rate and pace waiting.
        Raises what Redis or the database raise (the caller says it once for all streams)."""
        with self._tick_lock:
            rt = self.rt
            if not self._serving or rt is None:
                return
            try:
                mark_orphans_unknown(
                    db.session(), exclude_broadcast=rt.running_broadcast, older_than=STALE_CLAIM,
                    exclude_automations=rt.running_automations, identity_id=rt.identity_id,
                )
                ensure_jobs(db.session(), rt)
            finally:
                db.session.remove()
            self._flush_pace_wait()
            self._report_rate(rt)
            self._say_running(rt)
            if rt.ceiling is not None:
                if self._ses.due(self.identity):
                    self._ses.read(self.identity, rt.ceiling, self.app.config, self.app.instance_path)
                account_ceiling.follow(rt.ceiling, self.identity)

    def _say_running(self, rt: runtime.Runtime) -> None:
        """The values this stream sends with, beside its lease, for the System page (which
        tells them apart from the saved ones until the supervisor has followed them)."""
        try:
            record_running(rt.lease.redis, self.app.config["BROADSIDE_NAMESPACE"], rt.stream,
                           running_values(self.identity, self.app.config["SECRET_KEY"]))
        except RedisError:
            pass  # said again at the next tick

    def _report_rate(self, rt: runtime.Runtime) -> None:
        """The requests per second this stream achieved since the last report (System page)."""
        now = time.monotonic()
        elapsed = max(now - rt.sent_requests_since, 1e-6)
        record_rate(rt.lease.redis, self.app.config["BROADSIDE_NAMESPACE"], rt.stream,
                    rt.sent_requests / elapsed)
        rt.sent_requests, rt.sent_requests_since = 0, now

    def _flush_pace_wait(self) -> None:
        """Add the pacer's waiting (the account ceiling's included) since the last flush to a
        running total in Redis, so /metrics reports it across worker restarts."""
        rt = self.rt
        if rt is None:
            return
        waited = rt.pacer.waited_seconds + (rt.ceiling.waited_seconds if rt.ceiling else 0.0)
        add_wait_seconds(rt.lease.redis, self.app.config["BROADSIDE_NAMESPACE"], "pace",
                         waited - self._pace_wait_flushed)
        self._pace_wait_flushed = waited
