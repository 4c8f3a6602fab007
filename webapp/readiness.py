"""Can it send? The one computation every page asks (`sending_readiness`): the database's half
(`broadside.campaigns.broadcasts.readiness`: the sending identity, paused or not, and a
broadcast's blocking problems) with the half only the app can read: Redis (reachable?), the
worker's lease on the identity's stream (who holds it, since when, last heartbeat) and the
last check of the identity's transport (doctor, System page).

- the dashboard shows `problem` as its banner, and so does a broadcast page while it could
  still move (scheduled, queued, sending);
- the send confirmation shows the identity's pause, lists the broadcast's `problems` (they
  block sending) and the `reasons` (empty means ready; otherwise it shows them with a link to
  the System page, and its Send button sends only if the owner chooses to queue anyway);
- the System page shows `worker` (holder, since, heartbeat) in its live panel and
  `last_check` as the SMTP line of its checks (`read_readiness`: the default stream's half
  from Redis alone, which its polled panel reads without the database).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from zoneinfo import ZoneInfo

from flask import Flask, current_app
from redis import Redis
from redis.exceptions import RedisError

from broadside.campaigns.broadcasts.readiness import Standing, standing
from broadside.core.i18n import _, _l
from broadside.core.models import Broadcast
from broadside.core.redis_health import not_answering
from broadside.core.timeutil import epoch_to_stored, in_zone, local_format
from broadside.delivery.identities.service import SendingIdentity
from webapp.doctor import identities as identity_checks
from webapp.doctor.smtp import SmtpCheck, last_smtp_check
from webapp.doctor.worker import WorkerInfo, worker_info
from webapp.extensions import db
from webapp.templating import owner_zone

_PHASE_WORDS = {
    "connect": _l("could not reach the mail server"),
    "tls": _l("the secure connection to the mail server failed"),
    "auth": _l("the mail server refused the login"),
}

NO_WORKER_REASON = _l("No worker is running: sending would wait until one starts.")


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
    identity_name: str = ""
    redis_url: str = ""  # REDIS_URL, to say where Redis was not answering
    standing: Standing | None = None  # the database's half (None: Redis alone was read)

    @property
    def identity(self) -> SendingIdentity | None:
        """The sending identity asked about (its pause, its From, its transport)."""
        return self.standing.identity if self.standing is not None else None

    @property
    def paused(self) -> bool:
        return self.standing is not None and self.standing.paused

    @property
    def problems(self) -> tuple[str, ...]:
        """What blocks sending or scheduling the broadcast asked about."""
        return self.standing.problems if self.standing is not None else ()

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
            return [_("%(problem)s. The send queue lives there, so nothing would be sent until "
                      "it answers.", problem=self.redis_problem)]
        reasons = []
        if self.worker_holder is None:
            reasons.append(str(NO_WORKER_REASON) if not self.identity_name else
                           _("No worker serves the sending identity “%(name)s”: sending would "
                             "wait until one starts.", name=self.identity_name))
        if self.check_failed:
            assert self.last_check is not None
            last = self.last_check
            phase, _sep, summary = last.detail.partition(": ")
            words = _PHASE_WORDS.get(phase)
            problem = f"{words} ({summary})" if words else last.detail
            when = _when(last.at, self.zone, self.now)
            if self.identity_name:
                reasons.append(_("The last check of the “%(name)s” connection failed at %(when)s: "
                                 "%(problem)s. Fix its transport URL (Settings → Sending "
                                 "identities), then check again on the System page.",
                                 name=self.identity_name, when=when, problem=problem))
            elif last.target == "outbox":
                reasons.append(_("The last outbox check failed at %(when)s: %(problem)s. Fix the "
                                 "instance folder, then check again on the System page.",
                                 when=when, problem=problem))
            else:
                reasons.append(_("The last SMTP check failed at %(when)s: %(problem)s. Fix "
                                 "SMTP_URL, then check again on the System page.",
                                 when=when, problem=problem))
        return reasons

    @property
    def problem(self) -> str | None:
        """The one sentence for a banner (dashboard, a broadcast on its way); None when fine."""
        if not self.redis_ok:
            return _("Sending is stopped. %(problem)s.", problem=self.redis_problem)
        if self.worker_holder is None:
            if self.identity_name:
                return _("Sending is stopped: no worker serves the sending identity “%(name)s”. "
                         "Start `python -m jobs` (it serves every identity) or one with "
                         "`--identity`.", name=self.identity_name)
            return _("Sending is stopped: the worker is not running. Start it with `honcho start`.")
        if self.check_failed:
            assert self.last_check is not None
            if self.identity_name:
                return _("Sending will fail: the last check of the “%(name)s” connection failed "
                         "(%(detail)s). Fix its transport URL (Settings → Sending identities), "
                         "then check again on the System page.", name=self.identity_name,
                         detail=self.last_check.detail)
            return _("Sending will fail: the last SMTP check failed (%(detail)s). Fix SMTP_URL, "
                     "then check again on the System page.", detail=self.last_check.detail)
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


def sending_readiness(app: Flask | None = None, identity_id: int | None = None, *,
                      broadcast: Broadcast | None = None,
                      problems: Sequence[str] | None = None) -> SendingReadiness:
    """Can it send through this identity (None: the default), or through `broadcast`'s and may
    that broadcast go (`problems`: its blocking problems when the caller has counted them);
    the owner's time zone for the words. Call inside an app context."""
    app = app or current_app._get_current_object()  # type: ignore[attr-defined]
    held = standing(db.session, app.config, identity_id=identity_id, broadcast=broadcast,
                    problems=problems)
    identity = held.identity
    if identity.is_default:
        return replace(read_readiness(app.extensions["broadside_redis"], app.config, owner_zone()),
                       standing=held)
    redis = app.extensions["broadside_redis"]
    try:
        worker = worker_info(redis, app.config["BROADSIDE_NAMESPACE"], identity.key)
        checked = identity_checks.last(app, identity)
    except RedisError:
        return SendingReadiness(redis_ok=False, worker=None, zone=owner_zone(),
                                identity_name=identity.name, redis_url=app.config["REDIS_URL"],
                                standing=held)
    last = None if checked is None else SmtpCheck(checked.ok, checked.at, checked.target, checked.detail)
    return SendingReadiness(redis_ok=True, worker=worker, last_check=last, zone=owner_zone(),
                            identity_name=identity.name, standing=held)
