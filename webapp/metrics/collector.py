"""The Prometheus collector behind `GET /metrics` (the route is `webapp.metrics.views`): every
figure is read from the database and Redis at scrape time.

Nothing is counted in process memory, so the figures survive a restart of the web process
(and are the same whichever gunicorn worker answers). Sends by outcome come from the
deliveries table, where every delivery records how it ended; the waiting times are running
totals the worker adds to Redis. So that a scrape does not re-read all history, a settled
broadcast's figures and the bounce count are cached in Redis (see `_delivery_groups` and
`_bounce_counts`); losing Redis loses only the cache.

A broadcast still sending is not re-read either (`webapp.metrics.active`: its counters, its
few skipped/failed/unknown rows, and the `sent` events since the last scrape).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from redis import Redis
from redis.exceptions import RedisError
from rq.exceptions import NoSuchJobError
from rq.job import Job
from rq.queue import Queue
from sqlalchemy import case, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from broadside.core.models import (
    Automation,
    AutomationMessage,
    Broadcast,
    Delivery,
    Event,
    Subscriber,
    TransactionalMessage,
)
from broadside.core.models.sending import BROADCAST_STATUSES, DELIVERY_STATUSES
from broadside.core.timeutil import utcnow
from broadside.delivery import queues
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.waits import WAIT_KEYS
from webapp.doctor.smtp import last_smtp_check
from webapp.doctor.worker import worker_info
from webapp.metrics.active import OUTCOMES, active_groups

# Skip reasons the pipeline writes (jobs.recheck.skip_reason, cancel); anything else is "other",
# so a free-text reason can never explode the number of series.
SKIP_REASONS = (
    "unsubscribed", "unconfirmed", "no longer on the list", "subscriber erased", "cancelled",
    "suppressed: bounced", "suppressed: complained", "suppressed: blocked",
)
ATTEMPT_BUCKETS = (1, 2, 3, 4, 5)
# Scrape-time caches in Redis (see _delivery_groups and _bounce_counts).
DELIVERY_CACHE_KEY = "metrics:deliveries"
BOUNCE_CACHE_KEY = "metrics:bounces"
BOUNCE_RECOUNT_SECONDS = 300
MAX_BROADCASTS_PER_QUERY = 500
ACTIVE_CACHE_KEY = "metrics:active"


def _skip_label(reason: str | None) -> str:
    return reason if reason in SKIP_REASONS else "other"


class BroadsideCollector(Collector):
    """Reads everything at scrape time; a part whose source is down reports `broadside_up 0`."""

    def __init__(self, session: Session, redis: Redis, config: Mapping[str, Any]) -> None:
        self.session = session
        self.redis = redis
        self.config = config
        self.namespace = config["BROADSIDE_NAMESPACE"]

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("broadside_up", "Whether a source of these metrics answered.",
                               labels=["component"])
        database: list[Metric] = []
        try:
            database = [*self._deliveries(), *self._broadcasts(), *self._audience(),
                        *self._transactional(), *self._automations()]
            up.add_metric(["database"], 1)
        except SQLAlchemyError:
            self.session.rollback()
            up.add_metric(["database"], 0)
        finally:
            self.session.commit()  # end the read transaction
        from_redis: list[Metric] = []
        try:
            from_redis = list(self._redis())
            up.add_metric(["redis"], 1)
        except RedisError:
            up.add_metric(["redis"], 0)
        yield up
        yield from database
        yield from from_redis

    # ------------------------------------------------------------ database

    def _delivery_groups(self) -> list[tuple]:
        """(status, error_class, skip reason, smtp_code, attempts if sent, count) groups.

        A settled broadcast (nothing pending or in flight) changes no more, so its groups are
        cached in Redis under a stamp of its counters; only active or changed broadcasts are
        counted again, through the (broadcast_id, status) index. A scrape thus costs the
        active broadcasts' rows, not the whole table.
        """
        skipped_reason = case((Delivery.status == "skipped", Delivery.reason), else_=None)
        sent_attempts = case((Delivery.status == "sent", Delivery.attempts), else_=None)
        broadcasts = self.session.execute(
            select(Broadcast.id, Broadcast.pending_count, Broadcast.sending_count, Broadcast.sent_count,
                   Broadcast.skipped_count, Broadcast.failed_count, Broadcast.unknown_count,
                   Broadcast.updated_at)
        ).all()
        keys = [f"{self.namespace}:{DELIVERY_CACHE_KEY}:{row[0]}" for row in broadcasts]
        try:
            cached = self.redis.mget(keys) if keys else []
        except RedisError:
            cached = [None] * len(keys)
        groups: list[tuple] = []
        stale: dict[int, tuple[str, bool]] = {}
        for row, raw in zip(broadcasts, cached, strict=True):
            broadcast_id, pending, sending = row[0], row[1], row[2]
            stamp = "|".join(str(v) for v in row[1:])
            settled = pending == 0 and sending == 0
            if settled and raw:
                data = json.loads(raw)
                if data.get("stamp") == stamp:
                    groups.extend(tuple(g) for g in data["groups"])
                    continue
            if not settled:
                groups.extend(active_groups(self.session, self.redis,
                                            f"{self.namespace}:{ACTIVE_CACHE_KEY}:{broadcast_id}",
                                            broadcast_id, pending, sending,
                                            dict(zip(OUTCOMES, row[3:7], strict=True))))
                continue
            stale[broadcast_id] = (stamp, settled)
        if not stale:
            return groups
        query = (
            select(Delivery.broadcast_id, Delivery.status, Delivery.error_class, skipped_reason,
                   Delivery.smtp_code, sent_attempts, func.count())
            .group_by(Delivery.broadcast_id, Delivery.status, Delivery.error_class, skipped_reason,
                      Delivery.smtp_code, sent_attempts)
        )
        if len(stale) <= MAX_BROADCASTS_PER_QUERY:
            query = query.where(Delivery.broadcast_id.in_(stale))
        fresh: dict[int, list[tuple]] = {}
        for broadcast_id, *group in self.session.execute(query).all():
            if broadcast_id in stale:
                fresh.setdefault(broadcast_id, []).append(tuple(group))
        try:
            with self.redis.pipeline(transaction=False) as pipe:
                for broadcast_id, (stamp, settled) in stale.items():
                    if settled:
                        payload = json.dumps({"stamp": stamp, "groups": fresh.get(broadcast_id, [])})
                        # No expiry: a recount of every settled broadcast at once is the slow
                        # case (seconds at a million deliveries), so it happens only after Redis
                        # loses the keys. One small key per broadcast.
                        pipe.set(f"{self.namespace}:{DELIVERY_CACHE_KEY}:{broadcast_id}", payload)
                pipe.execute()
        except RedisError:
            pass  # the figures are right; the next scrape counts again
        for found in fresh.values():
            groups.extend(found)
        return groups

    def _deliveries(self) -> Iterator[Metric]:
        rows = self._delivery_groups()
        outcomes = dict.fromkeys(OUTCOMES, 0)
        in_flight = {"pending": 0, "sending": 0, "retrying": 0}
        skipped: dict[str, int] = {}
        failed: dict[str, int] = {}
        codes: dict[str, int] = {}
        attempts: dict[int, int] = {}
        for status, error_class, reason, code, tries, count in rows:
            if status in outcomes:
                outcomes[status] += count
            elif status in in_flight:
                in_flight[status] += count
                if status == "pending" and error_class:
                    in_flight["retrying"] += count
            if status == "skipped":
                label = _skip_label(reason)
                skipped[label] = skipped.get(label, 0) + count
            elif status == "failed":
                label = error_class or "unclassified"
                failed[label] = failed.get(label, 0) + count
            if code is not None:
                codes[str(code)] = codes.get(str(code), 0) + count
            if status == "sent":
                tries = int(tries or 1)
                attempts[tries] = attempts.get(tries, 0) + count

        family = CounterMetricFamily(
            "broadside_deliveries", "Broadcast deliveries by how they ended.", labels=["outcome"])
        for outcome, count in outcomes.items():
            family.add_metric([outcome], count)
        yield family
        family = CounterMetricFamily(
            "broadside_deliveries_skipped", "Deliveries skipped at send time, by reason.",
            labels=["reason"])
        for reason, count in sorted(skipped.items()):
            family.add_metric([reason], count)
        yield family
        family = CounterMetricFamily(
            "broadside_deliveries_failed", "Deliveries that failed for good, by error class "
            "(recipient: refused this address; transient: retries exhausted).", labels=["error_class"])
        for error_class, count in sorted(failed.items()):
            family.add_metric([error_class], count)
        yield family
        family = GaugeMetricFamily(
            "broadside_deliveries_in_flight", "Deliveries not finished yet (retrying: pending "
            "after a transient error).", labels=["status"])
        for status, count in in_flight.items():
            family.add_metric([status], count)
        yield family
        family = CounterMetricFamily(
            "broadside_smtp_replies", "The last SMTP reply code recorded on each delivery.",
            labels=["code"])
        for code, count in sorted(codes.items()):
            family.add_metric([code], count)
        yield family
        buckets = [(floatToGoString(bound), sum(n for tries, n in attempts.items() if tries <= bound))
                   for bound in ATTEMPT_BUCKETS]
        buckets.append(("+Inf", sum(attempts.values())))
        yield HistogramMetricFamily(
            "broadside_attempts_per_sent_message", "SMTP attempts each accepted message took.",
            buckets=buckets, sum_value=sum(tries * n for tries, n in attempts.items()))

    def _broadcasts(self) -> Iterator[Metric]:
        counts = dict(self.session.execute(
            select(Broadcast.status, func.count()).group_by(Broadcast.status)).all())
        family = GaugeMetricFamily("broadside_broadcasts", "Broadcasts by state.", labels=["state"])
        for status in BROADCAST_STATUSES:
            family.add_metric([status], counts.get(status, 0))
        yield family

    def _count_bounces(self, since_id: int | None, up_to_id: int | None) -> dict[str, int]:
        bounce_type = case(
            (Event.detail.like("hard bounce%"), "hard"),
            (Event.detail.like("soft bounce%"), "soft"),
            else_="other",
        )
        query = select(Event.kind, bounce_type, func.count()).where(Event.kind.in_(("bounce", "complaint")))
        if since_id is not None:
            query = query.where(Event.id > since_id)
        if up_to_id is not None:
            query = query.where(Event.id <= up_to_id)
        counts: dict[str, int] = {}
        for kind, kind_type, count in self.session.execute(query.group_by(Event.kind, bounce_type)).all():
            label = "complaint" if kind == "complaint" else kind_type
            counts[label] = counts.get(label, 0) + count
        return counts

    def _bounce_counts(self) -> dict[str, int]:
        """Bounce and complaint events by type. Events are only ever appended, so a full count
        (a scan of the events table) is kept in Redis with the highest event id it covered and
        redone every few minutes; in between, a scrape counts only the newer events (a range
        of the primary key)."""
        key = f"{self.namespace}:{BOUNCE_CACHE_KEY}"
        try:
            raw = self.redis.get(key)
        except RedisError:
            raw = None
        if raw:
            base = json.loads(raw)
            recent = self._count_bounces(since_id=base["max_id"], up_to_id=None)
            labels = set(base["counts"]) | set(recent)
            return {label: base["counts"].get(label, 0) + recent.get(label, 0) for label in labels}
        max_id = self.session.scalar(select(func.max(Event.id))) or 0
        counts = self._count_bounces(since_id=None, up_to_id=max_id)
        try:
            self.redis.set(key, json.dumps({"max_id": max_id, "counts": counts}), ex=BOUNCE_RECOUNT_SECONDS)
        except RedisError:
            pass
        return counts

    def _audience(self) -> Iterator[Metric]:
        counts = self._bounce_counts()
        bounces = {"hard": counts.get("hard", 0), "soft": counts.get("soft", 0)}
        if counts.get("other"):
            bounces["other"] = counts["other"]
        complaints = counts.get("complaint", 0)
        family = CounterMetricFamily("broadside_bounces", "Bounces reported by the provider, by type.",
                                     labels=["type"])
        for kind_type, count in bounces.items():
            family.add_metric([kind_type], count)
        yield family
        yield CounterMetricFamily("broadside_complaints", "Spam complaints reported by the provider.",
                                  value=complaints)
        suppressed = dict(self.session.execute(
            select(Subscriber.suppression, func.count())
            .where(Subscriber.suppression.is_not(None))
            .group_by(Subscriber.suppression)
        ).all())
        family = GaugeMetricFamily("broadside_suppressed_subscribers",
                                   "Subscribers no email goes to, by reason.", labels=["reason"])
        for reason in ("bounced", "complained", "blocked"):
            family.add_metric([reason], suppressed.get(reason, 0))
        yield family

    def _transactional(self) -> Iterator[Metric]:
        counts = dict(self.session.execute(
            select(TransactionalMessage.status, func.count()).group_by(TransactionalMessage.status)
        ).all())
        family = GaugeMetricFamily("broadside_transactional_messages",
                                   "Transactional mail (test sends, confirmations) by state.",
                                   labels=["state"])
        for status in ("pending", "sending", "sent", "failed", "unknown"):
            family.add_metric([status], counts.get(status, 0))
        yield family

    def _automations(self) -> Iterator[Metric]:
        counts = dict(self.session.execute(
            select(AutomationMessage.status, func.count()).group_by(AutomationMessage.status)
        ).all())
        family = GaugeMetricFamily("broadside_automation_messages",
                                   "Automation messages (welcomes, sequences, campaigns) by state.",
                                   labels=["state"])
        for status in DELIVERY_STATUSES:
            family.add_metric([status], counts.get(status, 0))
        yield family
        # The backlog to alert on: due now for an enabled automation, still waiting.
        due = self.session.scalar(
            select(func.count()).select_from(AutomationMessage)
            .join(Automation, Automation.id == AutomationMessage.automation_id)
            .where(AutomationMessage.status == "pending", AutomationMessage.due_at <= utcnow(),
                   Automation.status == "enabled"))
        yield GaugeMetricFamily("broadside_automation_messages_due",
                                "Automation messages due now for an enabled automation, not yet sent.",
                                value=due or 0)

    # ------------------------------------------------------------ Redis

    def _redis(self) -> Iterator[Metric]:
        ns = self.namespace
        pace, hourly = self.redis.mget(f"{ns}:{WAIT_KEYS['pace']}", f"{ns}:{WAIT_KEYS['hourly']}")
        wait = CounterMetricFamily("broadside_wait_seconds",
                                   "Time the worker spent waiting before sends, by cause.",
                                   labels=["cause"])
        wait.add_metric(["pace"], float(pace or 0))
        wait.add_metric(["hourly_cap"], float(hourly or 0))

        length = GaugeMetricFamily("broadside_queue_length", "Jobs waiting in each queue.",
                                   labels=["queue"])
        oldest = GaugeMetricFamily("broadside_queue_oldest_job_age_seconds",
                                   "Age of the oldest waiting job in each queue (0 when empty).",
                                   labels=["queue"])
        now = time.time()
        for name in queues.LISTENED:
            queue = Queue(f"{ns}:{name}", connection=self.redis, serializer=queues.SERIALIZER)
            length.add_metric([name], queue.count)
            oldest.add_metric([name], oldest_job_age(queue, now))

        info = worker_info(self.redis, ns)
        lease = GaugeMetricFamily("broadside_worker_lease_held", "1 when a worker holds the sending lease.",
                                  value=int(info.holder is not None))
        cap = HourlyCap(self.redis, ns, int(self.config["SEND_HOURLY_LIMIT"]))
        used = GaugeMetricFamily("broadside_hourly_cap_used", "Send attempts in the rolling hour.",
                                 value=cap.used(now))
        limit = GaugeMetricFamily("broadside_hourly_cap_limit", "SEND_HOURLY_LIMIT (0: no limit).",
                                  value=cap.limit)
        yield from (wait, length, oldest, lease, used, limit)
        age = info.heartbeat_age(now) if info.holder else None
        if age is not None:
            yield GaugeMetricFamily("broadside_worker_heartbeat_age_seconds",
                                    "Seconds since the lease holder last renewed it.", value=age)
        last = last_smtp_check(self.redis, ns, self.config)
        if last is not None:
            yield GaugeMetricFamily("broadside_smtp_last_check_ok",
                                    "1 when the last SMTP check (doctor, System page) passed.",
                                    value=int(last.ok))
            yield GaugeMetricFamily("broadside_smtp_last_check_timestamp_seconds",
                                    "When the last SMTP check ran.", value=last.at)


def oldest_job_age(queue: Queue, now: float) -> float:
    for job_id in queue.get_job_ids(0, 1):
        try:
            enqueued = Job.fetch(job_id, connection=queue.connection, serializer=queue.serializer).enqueued_at
        except NoSuchJobError:
            return 0.0
        return max(0.0, now - enqueued.timestamp()) if enqueued else 0.0
    return 0.0


def render_metrics(session: Session, redis: Redis, config: Mapping[str, Any]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BroadsideCollector(session, redis, config))
    return generate_latest(registry)
