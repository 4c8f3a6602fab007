"""What the System page shows: the worker, the queues, the pace, the hourly cap, each sending
identity's stream (its worker, pace, rate achieved, cap and queues, and its pause), recent
errors, the doctor's checks (one per identity's transport) and the outbox. Plain functions of
the app, a session and Redis."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

from flask import Flask
from redis import Redis
from redis.exceptions import RedisError
from rq.queue import Queue
from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from broadside.core.errors import DomainError, NotFound
from broadside.core.events import record_event
from broadside.core.models import Broadcast, Delivery, Event, SiteSettings, Subscriber, TransactionalMessage
from broadside.core.site_settings import get_settings
from broadside.core.timeutil import utcnow
from broadside.delivery import queues
from broadside.delivery.eml_folder import OutboxEntry, list_outbox, outbox_folder
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.identities.service import SendingIdentity, all_identities, resolve
from broadside.delivery.streams import StreamStatus, read_stream
from webapp.doctor import identities as identity_checks
from webapp.doctor.check import Check
from webapp.doctor.identities import check_identity, identity_check_as_check
from webapp.doctor.report import run_checks
from webapp.doctor.smtp import check_smtp, smtp_check_as_check, smtp_target
from webapp.doctor.worker import WorkerInfo
from webapp.metrics.collector import oldest_job_age
from webapp.readiness import read_readiness
from webapp.templating import epoch_time

log = logging.getLogger("broadside.system")

ERRORS_SHOWN = 20
# How far back (in events, newest first) the System page looks for delivery errors: a range
# of the events' primary key, so the page costs the same with ten million deliveries in
# history; an error older than that is still on its broadcast's deliveries table.
ERROR_EVENTS_WINDOW = 100_000
CHECKED_AT = "%H:%M:%S %Z"  # when a stored check was made, in the owner's zone


@dataclass(frozen=True)
class QueueInfo:
    name: str
    length: int
    oldest_age: float


@dataclass(frozen=True)
class SendingBroadcast:
    id: int
    subject: str
    send_rate: float
    sent: int
    total: int
    notice: str | None


@dataclass(frozen=True)
class StreamRow:
    """One sending identity's stream (the default first)."""

    identity: SendingIdentity
    status: StreamStatus | None  # None while Redis is unreachable

    @property
    def holder(self) -> str | None:
        """The worker holding its lease, as host:pid (the lease's own tag left out)."""
        if self.status is None or not self.status.holder:
            return None
        host_pid, _, tag = self.status.holder.rpartition(":")
        return host_pid if host_pid.count(":") >= 1 and tag else self.status.holder

    @property
    def waiting(self) -> dict[str, int]:
        """Jobs waiting on its queues, only those with some."""
        return {name: n for name, n in (self.status.queued if self.status else {}).items() if n}


@dataclass
class LiveStatus:
    """The part of the page that refreshes itself every few seconds."""

    redis_ok: bool
    worker: WorkerInfo | None
    queues: list[QueueInfo]
    send_delay_ms: int
    sending: list[SendingBroadcast]
    hourly_limit: int
    hourly_used: int | None
    hourly_reset_at: datetime | None
    streams: list[StreamRow] = field(default_factory=list)  # every identity, the default first
    now: float = field(default_factory=time.time)
    redis_problem: str = ""  # where Redis is not answering and how to start it

    @property
    def paused(self) -> list[SendingIdentity]:
        return [row.identity for row in self.streams if row.identity.status == "paused"]

    @property
    def pace_per_second(self) -> float | None:
        return 1000 / self.send_delay_ms if self.send_delay_ms else None

    @property
    def achieved_rate(self) -> float | None:
        rates = [b.send_rate for b in self.sending if b.send_rate]
        return max(rates) if rates else None


@dataclass(frozen=True)
class ErrorRow:
    delivery_id: int | None  # None for transactional mail
    status: str
    error_class: str | None
    smtp_code: int | None
    reason: str | None
    at: datetime | None
    attempts: int
    broadcast_id: int | None
    subject: str
    email: str | None
    kind: str = "broadcast"  # broadcast | test | confirmation (transactional mail)


@dataclass
class Overview:
    live: LiveStatus
    checks: list[Check]
    errors: list[ErrorRow]
    outbox: list[OutboxEntry] | None  # None when SMTP is configured


def live_status(session: Session, redis: Redis, config) -> LiveStatus:
    namespace = config["BROADSIDE_NAMESPACE"]
    limit = int(config["SEND_HOURLY_LIMIT"])
    sending = [
        SendingBroadcast(*row)
        for row in session.execute(
            select(Broadcast.id, Broadcast.subject, Broadcast.send_rate, Broadcast.sent_count,
                   Broadcast.total, Broadcast.notice)
            .where(Broadcast.status.in_(("queued", "sending")))
            .order_by(Broadcast.id)
        ).all()
    ]
    settings = session.get(SiteSettings, 1)  # read only: a polled GET creates nothing
    reset_at = settings.hourly_window_reset_at if settings else None
    identities = all_identities(session, config)
    session.commit()
    unknown = [StreamRow(identity, None) for identity in identities]
    # Redis, the worker and its lease: the same reading as the dashboard and the send page.
    sender = read_readiness(redis, config)
    if not sender.redis_ok:
        return LiveStatus(False, None, [], config["SEND_DELAY_MS"], sending, limit, None, reset_at,
                          unknown, redis_problem=sender.redis_problem)
    worker = sender.worker
    try:
        now = time.time()
        queue_info = []
        for name in queues.LISTENED:
            queue = Queue(f"{namespace}:{name}", connection=redis, serializer=queues.SERIALIZER)
            queue_info.append(QueueInfo(name, queue.count, oldest_job_age(queue, now)))
        used = HourlyCap(redis, namespace, limit).used() if limit else None
        streams = [StreamRow(identity, read_stream(redis, namespace, identity.key,
                                                   identity.hourly_limit))
                   for identity in identities]
    except RedisError:
        return LiveStatus(False, None, [], config["SEND_DELAY_MS"], sending, limit, None, reset_at,
                          unknown, redis_problem=sender.redis_problem)
    return LiveStatus(True, worker, queue_info, config["SEND_DELAY_MS"], sending, limit, used, reset_at,
                      streams)


def last_errors(session: Session, limit: int = ERRORS_SHOWN) -> list[ErrorRow]:
    """Deliveries and transactional mail (test sends, sign-up confirmations) that failed,
    ended unknown, or wait to retry after an error; newest first.

    The deliveries are found through their events (the ledger records `failed`, `unknown` and
    `retry` as each happens) among the newest ERROR_EVENTS_WINDOW events, never by reading the
    deliveries of every broadcast ever sent; each is then shown as it stands now."""
    newest = session.scalar(select(func.max(Event.id))) or 0
    recent = (
        select(Event.delivery_id)
        .where(Event.id > newest - ERROR_EVENTS_WINDOW, Event.kind.in_(("failed", "unknown", "retry")),
               Event.delivery_id.is_not(None))
        .order_by(Event.id.desc())
        .limit(limit * 5)
    ).subquery()
    rows = session.execute(
        select(Delivery.id, Delivery.status, Delivery.error_class, Delivery.smtp_code,
               Delivery.reason, Delivery.updated_at, Delivery.attempts, Broadcast.id,
               Broadcast.subject, Subscriber.email)
        .join(Broadcast, Broadcast.id == Delivery.broadcast_id)
        .outerjoin(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.id.in_(select(recent.c.delivery_id)),
               or_(Delivery.status.in_(("failed", "unknown")),
                   and_(Delivery.status == "pending", Delivery.error_class.is_not(None))))
        .order_by(Delivery.updated_at.desc(), Delivery.id.desc())
        .limit(limit)
    ).all()
    errors = [ErrorRow(*row) for row in rows]
    # Transactional mail keeps no update time: it is tried within seconds of being queued
    # (retries within minutes), so the time it was queued stands for when it failed.
    mail = TransactionalMessage
    for row in session.execute(
        select(mail.status, mail.reason, mail.created_at, mail.attempts, mail.broadcast_id,
               mail.subject, mail.to_email, mail.kind)
        .where(or_(mail.status.in_(("failed", "unknown")),
                   and_(mail.status == "pending", mail.attempts > 0, mail.reason.is_not(None))))
        .order_by(mail.created_at.desc(), mail.id.desc())
        .limit(limit)
    ).all():
        errors.append(ErrorRow(None, row.status, None, None, row.reason, row.created_at, row.attempts,
                               row.broadcast_id, row.subject, row.to_email, row.kind))
    session.commit()
    errors.sort(key=lambda e: e.at or datetime.min, reverse=True)
    return errors[:limit]


IDENTITY_CHECK_PREFIX = "identity "  # the name of an identity's line among the checks


def check_button_label(checks: list[Check], smtp_configured: bool) -> str:
    """The words on the checks' button, which the lines not checked yet ask the owner to press:
    one place decides both. With sending identities it checks each one's transport too."""
    if any(c.name.startswith(IDENTITY_CHECK_PREFIX) for c in checks):
        return "Check connections now"
    return "Check SMTP now" if smtp_configured else "Check the outbox now"


def page_checks(app: Flask) -> list[Check]:
    """The doctor's checks, with the last stored SMTP result instead of a new conversation."""
    checks = run_checks(app, smtp=False)
    identities = identity_checks.identity_rows(app)
    stored = [_stored_identity_check(app, identity) for identity in identities]
    button = check_button_label(stored, bool(app.config["SMTP_URL"]))
    last = read_readiness(app.extensions["broadside_redis"], app.config).last_check
    if last is not None:
        smtp = smtp_check_as_check(last)
        checked = epoch_time(last.at, CHECKED_AT)
        smtp = Check(smtp.name, smtp.ok, f"{smtp.summary} (checked {checked})", smtp.advice)
    else:
        name = "outbox" if smtp_target(app.config) == "outbox" else "SMTP"
        smtp = Check(name, None, f"not checked yet: press “{button}”")
    checks.insert(-1, smtp)  # before BASE_URL, in the CLI's order
    for check in stored:
        if check.ok is None:
            check = Check(check.name, None, f"not checked yet: press “{button}”")
        checks.insert(-1, check)
    return checks


def _stored_identity_check(app: Flask, identity: SendingIdentity) -> Check:
    try:
        last = identity_checks.last(app, identity)
    except RedisError:
        last = None
    if last is None:
        return Check(f"{IDENTITY_CHECK_PREFIX}{identity.name}", None, "not checked yet")
    check = identity_check_as_check(identity, last)
    checked = epoch_time(last.at, CHECKED_AT)
    return Check(check.name, check.ok, f"{check.summary} (checked {checked})", check.advice)


def system_overview(app: Flask, session: Session) -> Overview:
    redis = app.extensions["broadside_redis"]
    outbox = None
    if smtp_target(app.config) == "outbox":
        outbox = list_outbox(outbox_folder(app.instance_path))
    return Overview(
        live=live_status(session, redis, app.config),
        checks=page_checks(app),
        errors=last_errors(session),
        outbox=outbox,
    )


def check_smtp_now(app: Flask) -> list[Check]:
    """The "Check SMTP now" button: a real conversation (nothing sent), stored for the send page;
    then one with each identity's transport, stored for this page."""
    result = check_smtp(app)
    log.info("SMTP check by the owner: %s", "ok" if result.ok else f"failed: {result.summary}")
    for identity in identity_checks.identity_rows(app):
        check_identity(app, identity)
    return page_checks(app)


def reset_hourly_cap(session: Session, redis: Redis, config, identity_id: int | None = None) -> int:
    """Forget the sends counted in an identity's rolling hour (Redis; None: the default's);
    the database keeps every send.

    Returns how many were forgotten. Records an `hourly_reset` event (and, for the default,
    when: SiteSettings).
    """
    identity = resolve(session, config, identity_id)
    if identity.status == "deleted":
        raise NotFound(f"There is no sending identity {identity_id}.")
    limit = identity.hourly_limit
    if limit <= 0:
        raise DomainError("There is no hourly limit to reset (SEND_HOURLY_LIMIT is 0)."
                          if identity.is_default else f"“{identity.name}” has no hourly cap to reset.")
    cap = HourlyCap(redis, config["BROADSIDE_NAMESPACE"], limit, stream=identity.key)
    try:
        forgotten = cap.used()
        cap.reset()
    except RedisError:
        raise DomainError("Redis is unreachable, so the hourly count cannot be reset now.") from None
    whose = "" if identity.is_default else f" of “{identity.name}”"
    if identity.is_default:
        get_settings(session).hourly_window_reset_at = utcnow()
    record_event(session, "hourly_reset",
                 detail=f"hourly limit{whose} reset by the owner; {forgotten} of {limit} sends forgotten")
    session.commit()
    log.info("hourly cap%s reset by the owner (%d of %d sends forgotten)", whose, forgotten, limit)
    return forgotten

