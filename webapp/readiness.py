"""Can sending happen right now, and what is the sender doing: one reading of Redis (reachable?),
the worker's lease (who holds it, since when, last heartbeat) and the last SMTP check
(doctor, System page), shared by every page that talks about it.

- the dashboard shows `problem` as its banner, and so does a broadcast page while it could
  still move (scheduled, queued, sending);
- the send confirmation lists `reasons`: empty means ready; otherwise it shows them with a
  link to the System page and sends only if the owner chooses to queue anyway;
- the System page shows `worker` (holder, since, heartbeat) in its live panel and
  `last_check` as the SMTP line of its checks.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from flask import Flask, current_app
from redis import Redis
from redis.exceptions import RedisError

from broadside.core.redis_health import not_answering
from broadside.core.timeutil import epoch_to_stored, in_zone, local_format
from broadside.delivery.identities.service import resolve
from webapp.doctor import identities as identity_checks
from webapp.doctor.smtp import SmtpCheck, last_smtp_check
from webapp.doctor.worker import WorkerInfo, worker_info
from webapp.extensions import db
from webapp.templating import owner_zone

_PHASE_WORDS = {
    "connect": "could not reach the mail server",
    "tls": "the secure connection to the mail server failed",
    "auth": "the mail server refused the login",
}

NO_WORKER_REASON = "No worker is running: sending would wait until one starts."


def _when(epoch: float, zone: ZoneInfo, now: float | None = None) -> str:
    moment = epoch_to_stored(epoch)
    today = in_zone(epoch_to_stored(now or time.time()), zone).date()
    fmt = "%H:%M %Z" if in_zone(moment, zone).date() == today else "%Y-%m-%d %H:%M %Z"
    return local_format(moment, zone, fmt)


@dataclass(frozen=True)
class SendingReadiness:
    redis_ok: bool
    worker: WorkerInfo | None  # None while Redis is unreachable
    last_check: SmtpCheck | None = None  # the last SMTP (or outbox) check, if any
    zone: ZoneInfo = ZoneInfo("UTC")  # for the time of that check, in words
    now: float = field(default_factory=time.time)
    # Another identity than the default: its name (for the words) and where to fix it.
    identity: str = ""
    redis_url: str = ""  # REDIS_URL, to say where Redis was not answering

    @property
    def redis_problem(self) -> str:
        """Where Redis is not answering and how to start it (`broadside.core.redis_health`)."""
        return not_answering(self.redis_url)

    @property
    def worker_holder(self) -> str | None:
        return self.worker.holder if self.worker is not None else None

    @property
    def check_failed(self) -> bool:
        return self.last_check is not None and not self.last_check.ok

    @property
    def ready(self) -> bool:
        return not self.reasons

    @property
    def reasons(self) -> list[str]:
        """Why a send would not happen now, for the send confirmation ([] when it would)."""
        if not self.redis_ok:
            return [f"{self.redis_problem}. The send queue lives there, so nothing would be sent "
                    "until it answers."]
        reasons = []
        if self.worker_holder is None:
            reasons.append(NO_WORKER_REASON if not self.identity else
                           f"No worker serves the sending identity “{self.identity}”: sending "
                           "would wait until one starts.")
        if self.check_failed:
            assert self.last_check is not None
            last = self.last_check
            phase, _, summary = last.detail.partition(": ")
            words = _PHASE_WORDS.get(phase)
            problem = f"{words} ({summary})" if words else last.detail
            what, fix = ("outbox", "the instance folder") if last.target == "outbox" else ("SMTP", "SMTP_URL")
            if self.identity:
                what, fix = (f"“{self.identity}” connection",
                             "its transport URL (Settings → Sending identities)")
            reasons.append(f"The last {what} check failed at {_when(last.at, self.zone, self.now)}: "
                           f"{problem}. Fix {fix}, then check again on the System page.")
        return reasons

    @property
    def problem(self) -> str | None:
        """The one sentence for a banner (dashboard, a broadcast on its way); None when fine."""
        if not self.redis_ok:
            return f"Sending is stopped. {self.redis_problem}."
        if self.worker_holder is None:
            if self.identity:
                return (f"Sending is stopped: no worker serves the sending identity "
                        f"“{self.identity}”. Start `python -m jobs` (it serves every "
                        "identity) or one with `--identity`.")
            return "Sending is stopped: the worker is not running. Start it with `honcho start`."
        if self.check_failed:
            assert self.last_check is not None
            what, fix = ((f"“{self.identity}” connection",
                          "its transport URL (Settings → Sending identities)") if self.identity
                         else ("SMTP", "SMTP_URL"))
            return (f"Sending will fail: the last {what} check failed "
                    f"({self.last_check.detail}). Fix {fix}, then check again on the System page.")
        return None


def read_readiness(redis: Redis, config: Mapping[str, Any],
                   zone: ZoneInfo | None = None) -> SendingReadiness:
    """The one reading: the lease and the last check, in one go (Redis down: not ready)."""
    namespace = config["BROADSIDE_NAMESPACE"]
    try:
        worker = worker_info(redis, namespace)
        last = last_smtp_check(redis, namespace, config)
    except RedisError:
        return SendingReadiness(redis_ok=False, worker=None, zone=zone or ZoneInfo("UTC"),
                                redis_url=config["REDIS_URL"])
    return SendingReadiness(redis_ok=True, worker=worker, last_check=last,
                            zone=zone or ZoneInfo("UTC"), redis_url=config["REDIS_URL"])


def sending_readiness(app: Flask | None = None, identity_id: int | None = None) -> SendingReadiness:
    """`read_readiness` for this app (default: the current one), in the owner's time zone, for
    the default identity's stream or another's. Call inside an app context."""
    app = app or current_app._get_current_object()  # type: ignore[attr-defined]
    if identity_id is None:
        return read_readiness(app.extensions["broadside_redis"], app.config, owner_zone())
    identity = resolve(db.session, app.config, identity_id)
    redis = app.extensions["broadside_redis"]
    try:
        worker = worker_info(redis, app.config["BROADSIDE_NAMESPACE"], identity.key)
        checked = identity_checks.last(app, identity)
    except RedisError:
        return SendingReadiness(redis_ok=False, worker=None, zone=owner_zone(), identity=identity.name,
                                redis_url=app.config["REDIS_URL"])
    last = None if checked is None else SmtpCheck(checked.ok, checked.at, checked.target, checked.detail)
    return SendingReadiness(redis_ok=True, worker=worker, last_check=last, zone=owner_zone(),
                            identity=identity.name)
