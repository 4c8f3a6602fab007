"""The Prometheus collector behind `GET /metrics` (the route is `webapp.metrics.views`): every
figure is read from the database and Redis at scrape time.

Nothing is counted in process memory, so the figures survive a restart of the web process
(and are the same whichever gunicorn worker answers). Sends by outcome come from the
deliveries table, where every delivery records how it ended; the waiting times are running
totals the worker adds to Redis. The figures are read by the domain's functions next to what
writes them (`broadside.campaigns.broadcasts.figures`, `broadside.feedback.figures`,
`broadside.audience.figures`, `broadside.delivery.transactional_figures`,
`broadside.campaigns.automations.figures`, `broadside.delivery.queue_figures`); this module
only names them for Prometheus. So that a scrape does not re-read all history, a settled
broadcast's figures and the bounce count are cached in Redis; losing Redis loses only the
cache. A broadcast still sending is not re-read either
(`broadside.campaigns.broadcasts.active_figures`).
"""

from __future__ import annotations

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
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from broadside.audience.figures import suppressed_counts
from broadside.campaigns.automations import figures as automation_figures
from broadside.campaigns.broadcasts.active_figures import OUTCOMES
from broadside.campaigns.broadcasts.figures import broadcast_counts, delivery_groups
from broadside.core.models.sending import BROADCAST_STATUSES, DELIVERY_STATUSES
from broadside.core.timeutil import utcnow
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.queue_figures import queue_figures
from broadside.delivery.revisions_in_flight import revisions_in_flight
from broadside.delivery.transactional_figures import transactional_counts
from broadside.delivery.waits import WAIT_KEYS
from broadside.feedback.figures import bounce_counts
from webapp.doctor.smtp import last_smtp_check
from webapp.doctor.worker import worker_info

# Skip reasons the pipeline writes (jobs.recheck.skip_reason, cancel); anything else is "other",
# so a free-text reason can never explode the number of series.
SKIP_REASONS = (
    "unsubscribed", "unconfirmed", "no longer on the list", "subscriber erased", "cancelled",
    "suppressed: bounced", "suppressed: complained", "suppressed: blocked",
)
ATTEMPT_BUCKETS = (1, 2, 3, 4, 5)


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
                        *self._transactional(), *self._automations(), *self._revisions()]
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

    def _deliveries(self) -> Iterator[Metric]:
        rows = delivery_groups(self.session, self.redis, self.namespace)
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
        counts = broadcast_counts(self.session)
        family = GaugeMetricFamily("broadside_broadcasts", "Broadcasts by state.", labels=["state"])
        for status in BROADCAST_STATUSES:
            family.add_metric([status], counts.get(status, 0))
        yield family

    def _audience(self) -> Iterator[Metric]:
        counts = bounce_counts(self.session, self.redis, self.namespace)
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
        suppressed = suppressed_counts(self.session)
        family = GaugeMetricFamily("broadside_suppressed_subscribers",
                                   "Subscribers no email goes to, by reason.", labels=["reason"])
        for reason in ("bounced", "complained", "blocked"):
            family.add_metric([reason], suppressed.get(reason, 0))
        yield family

    def _transactional(self) -> Iterator[Metric]:
        counts = transactional_counts(self.session)
        family = GaugeMetricFamily("broadside_transactional_messages",
                                   "Transactional mail (test sends, confirmations) by state.",
                                   labels=["state"])
        for status in ("pending", "sending", "sent", "failed", "unknown"):
            family.add_metric([status], counts.get(status, 0))
        yield family

    def _automations(self) -> Iterator[Metric]:
        counts = automation_figures.message_counts(self.session)
        family = GaugeMetricFamily("broadside_automation_messages",
                                   "Automation messages (welcomes, sequences, campaigns) by state.",
                                   labels=["state"])
        for status in DELIVERY_STATUSES:
            family.add_metric([status], counts.get(status, 0))
        yield family
        # The backlog to alert on: due now for an enabled automation, still waiting.
        due = automation_figures.messages_due(self.session, utcnow())
        yield GaugeMetricFamily("broadside_automation_messages_due",
                                "Automation messages due now for an enabled automation, not yet sent.",
                                value=due or 0)

    def _revisions(self) -> Iterator[Metric]:
        found = revisions_in_flight(self.session)
        family = GaugeMetricFamily(
            "broadside_revision_messages_sent_last_hour",
            "Messages sent in the last hour from each frozen revision of an automation step or "
            "a transactional template (source_id: the step's or the template's id).",
            labels=["kind", "revision_id", "source_id"])
        for one in found:
            family.add_metric([one.kind, str(one.revision_id), str(one.source_id)], one.sent)
        yield family
        yield GaugeMetricFamily(
            "broadside_revisions_outdated_in_flight",
            "Revisions mail went out from in the last hour although a newer revision of the "
            "same step or template was frozen more than a day after them.",
            value=sum(one.outdated for one in found))

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
        for queue in queue_figures(self.redis, ns, now):
            length.add_metric([queue.name], queue.length)
            oldest.add_metric([queue.name], queue.oldest_age)

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


def render_metrics(session: Session, redis: Redis, config: Mapping[str, Any]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BroadsideCollector(session, redis, config))
    return generate_latest(registry)
