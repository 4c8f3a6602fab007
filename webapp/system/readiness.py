"""Before send: reasons a broadcast would not go out now, in words an owner can act on.

The send confirmation calls `sending_readiness(app)`: an empty list means ready; otherwise it
shows the reasons with a link to the System page and sends only if the owner chooses to
queue anyway.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from flask import Flask
from redis.exceptions import RedisError
from sqlalchemy.exc import SQLAlchemyError

from broadside.models import SiteSettings
from webapp.doctor import last_smtp_check, worker_info
from webapp.extensions import db

_PHASE_WORDS = {
    "connect": "could not reach the mail server",
    "tls": "the secure connection to the mail server failed",
    "auth": "the mail server refused the login",
}


def _owner_zone() -> ZoneInfo:
    try:
        settings = db.session.get(SiteSettings, 1)
        return ZoneInfo(settings.time_zone if settings and settings.time_zone else "UTC")
    except (SQLAlchemyError, ZoneInfoNotFoundError, ValueError):
        db.session.rollback()
        return ZoneInfo("UTC")


def _when(epoch: float, zone: ZoneInfo, now: float | None = None) -> str:
    moment = datetime.fromtimestamp(epoch, UTC).astimezone(zone)
    today = datetime.fromtimestamp(now or time.time(), UTC).astimezone(zone).date()
    fmt = "%H:%M %Z" if moment.date() == today else "%Y-%m-%d %H:%M %Z"
    return moment.strftime(fmt)


def sending_readiness(app: Flask) -> list[str]:
    """Why sending would not happen now ([] when it would). Call inside an app context."""
    redis = app.extensions["broadside_redis"]
    namespace = app.config["BROADSIDE_NAMESPACE"]
    try:
        worker = worker_info(redis, namespace)
        last = last_smtp_check(redis, namespace, app.config)
    except RedisError:
        return ["Redis is unreachable: the send queue lives there, so nothing would be sent "
                "until it is back."]
    reasons = []
    if worker.holder is None:
        reasons.append("No worker is running: sending would wait until one starts.")
    if last is not None and not last.ok:
        phase, _, summary = last.detail.partition(": ")
        words = _PHASE_WORDS.get(phase)
        problem = f"{words} ({summary})" if words else last.detail
        what, fix = ("outbox", "the instance folder") if last.target == "outbox" else ("SMTP", "SMTP_URL")
        reasons.append(f"The last {what} check failed at {_when(last.at, _owner_zone())}: {problem}. "
                       f"Fix {fix}, then check again on the System page.")
    return reasons
