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
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.queries import SendingBroadcast, sending_broadcasts
from broadside.core.i18n import _
from broadside.core.models import SiteSettings
from broadside.delivery.eml_folder import OutboxEntry, list_outbox, outbox_folder
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.identities.service import SendingIdentity, all_identities
from broadside.delivery.queue_figures import QueueInfo, queue_figures
from broadside.delivery.recent_errors import ErrorRow, last_errors
from broadside.delivery.revisions_in_flight import InFlight, revisions_in_flight
from broadside.delivery.streams import Running, StreamStatus, fingerprint, read_stream
from broadside.feedback.mailbox.state import MailboxLine
from broadside.feedback.mailbox.state import lines as mailbox_lines
from webapp.doctor import identities as identity_checks
from webapp.doctor.check import Check
from webapp.doctor.identities import check_identity, identity_check_as_check
from webapp.doctor.report import run_checks
from webapp.doctor.smtp import check_smtp, smtp_check_as_check, smtp_target
from webapp.doctor.worker import WorkerInfo
from webapp.readiness import read_readiness
from webapp.templating import epoch_time

log = logging.getLogger("broadside.system")

CHECKED_AT = "%H:%M:%S %Z"  # when a stored check was made, in the owner's zone


@dataclass(frozen=True)
class StreamRow:
    """One sending identity's stream (the default first)."""

    identity: SendingIdentity
    status: StreamStatus | None  # None while Redis is unreachable
    saved_fingerprint: str = ""  # of the saved values (broadside.delivery.streams.fingerprint)

    @property
    def running(self) -> Running | None:
        """The values its worker sends with (None: no worker says so)."""
        return self.status.running if self.status is not None else None

    @property
    def applying(self) -> bool:
        """Saved values its worker does not run on yet: the next maintenance tick starts the
        stream again on them (the default's are the worker's own environment: a restart)."""
        return self.running is not None and self.running.fingerprint != self.saved_fingerprint

    @property
    def delay_ms(self) -> int:
        return self.running.delay_ms if self.running is not None else self.identity.delay_ms

    @property
    def hourly_limit(self) -> int:
        return self.running.hourly_limit if self.running is not None else self.identity.hourly_limit

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
    def default_stream(self) -> StreamRow | None:
        return next((row for row in self.streams if row.identity.is_default), None)

    @property
    def pace_per_second(self) -> float | None:
        return 1000 / self.send_delay_ms if self.send_delay_ms else None

    @property
    def achieved_rate(self) -> float | None:
        rates = [b.send_rate for b in self.sending if b.send_rate]
        return max(rates) if rates else None


@dataclass
class Overview:
    live: LiveStatus
    checks: list[Check]
    errors: list[ErrorRow]
    in_flight: list[InFlight]
    outbox: list[OutboxEntry] | None  # None when SMTP is configured
    mailboxes: list[MailboxLine] = field(default_factory=list)  # the bounce mailboxes


def live_status(session: Session, redis: Redis, config) -> LiveStatus:
    namespace = config["BROADSIDE_NAMESPACE"]
    limit = int(config["SEND_HOURLY_LIMIT"])
    sending = sending_broadcasts(session)
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
        queue_info = queue_figures(redis, namespace)
        used = HourlyCap(redis, namespace, limit).used() if limit else None
        streams = [StreamRow(identity, read_stream(redis, namespace, identity.key,
                                                   identity.hourly_limit),
                             fingerprint(identity, config["SECRET_KEY"]))
                   for identity in identities]
    except RedisError:
        return LiveStatus(False, None, [], config["SEND_DELAY_MS"], sending, limit, None, reset_at,
                          unknown, redis_problem=sender.redis_problem)
    default = streams[0] if streams else None  # the default first: its worker's own pace
    pace = default.delay_ms if default is not None else config["SEND_DELAY_MS"]
    return LiveStatus(True, worker, queue_info, pace, sending, limit, used, reset_at, streams)


IDENTITY_CHECK_PREFIX = "identity "  # the name of an identity's line among the checks


def check_button_label(checks: list[Check], smtp_configured: bool) -> str:
    """The words on the checks' button, which the lines not checked yet ask the owner to press:
    one place decides both. With sending identities it checks each one's transport too."""
    if any(c.name.startswith(IDENTITY_CHECK_PREFIX) for c in checks):
        return _("Check connections now")
    return _("Check SMTP now") if smtp_configured else _("Check the outbox now")


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
        smtp = Check(smtp.name, smtp.ok, _("%(summary)s (checked %(when)s)", summary=smtp.summary,
                                           when=checked), smtp.advice)
    else:
        name = "outbox" if smtp_target(app.config) == "outbox" else "SMTP"
        smtp = Check(name, None, _("not checked yet: press “%(button)s”", button=button))
    checks.insert(-1, smtp)  # before BASE_URL, in the CLI's order
    for check in stored:
        if check.ok is None:
            check = Check(check.name, None, _("not checked yet: press “%(button)s”", button=button))
        checks.insert(-1, check)
    return checks


def _stored_identity_check(app: Flask, identity: SendingIdentity) -> Check:
    try:
        last = identity_checks.last(app, identity)
    except RedisError:
        last = None
    if last is None:
        return Check(f"{IDENTITY_CHECK_PREFIX}{identity.name}", None, _("not checked yet"))
    check = identity_check_as_check(identity, last)
    checked = epoch_time(last.at, CHECKED_AT)
    return Check(check.name, check.ok, _("%(summary)s (checked %(when)s)", summary=check.summary,
                                         when=checked), check.advice)


def system_overview(app: Flask, session: Session) -> Overview:
    redis = app.extensions["broadside_redis"]
    outbox = None
    if smtp_target(app.config) == "outbox":
        outbox = list_outbox(outbox_folder(app.instance_path))
    return Overview(
        live=live_status(session, redis, app.config),
        checks=page_checks(app),
        errors=last_errors(session),
        in_flight=revisions_in_flight(session),
        outbox=outbox,
        mailboxes=mailbox_lines(session, [(i.label, i.bounce_mailbox_url)
                                          for i in all_identities(session, app.config)
                                          if i.bounce_mailbox_url]),
    )


def check_smtp_now(app: Flask) -> list[Check]:
    """The "Check SMTP now" button: a real conversation (nothing sent), stored for the send page;
    then one with each identity's transport, stored for this page."""
    result = check_smtp(app)
    log.info("SMTP check by the owner: %s", "ok" if result.ok else f"failed: {result.summary}")
    for identity in identity_checks.identity_rows(app):
        check_identity(app, identity)
    return page_checks(app)
