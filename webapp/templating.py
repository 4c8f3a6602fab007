"""Helpers every template can call, registered once for the whole app (`register_templating`):
times in the owner's time zone and numbers with thousands separators.

Pages differ only in the format they pass: `local_time(moment)` is `2025-03-01 14:05`;
the System page passes `SYSTEM_TIME` (seconds and the zone's name), a progress line
`'%Y-%m-%d %H:%M %Z'`, and so on.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from flask import Flask, g
from sqlalchemy.exc import SQLAlchemyError

from broadside.site_settings import owner_zone as settings_zone
from webapp.extensions import db

DEFAULT_TIME = "%Y-%m-%d %H:%M"
SYSTEM_TIME = "%Y-%m-%d %H:%M:%S %Z"


def owner_zone() -> ZoneInfo:
    """The owner's time zone (Settings), read once per request."""
    if "owner_zone" not in g:
        try:
            g.owner_zone = settings_zone(db.session)
        except SQLAlchemyError:  # a page about an outage still renders its times
            db.session.rollback()
            g.owner_zone = ZoneInfo("UTC")
    return g.owner_zone


def local_time(moment: datetime | None, fmt: str = DEFAULT_TIME) -> str:
    """A stored (naive UTC) time in the owner's time zone; "" for None."""
    if moment is None:
        return ""
    return moment.replace(tzinfo=UTC).astimezone(owner_zone()).strftime(fmt)


def epoch_time(epoch: float | None, fmt: str = SYSTEM_TIME) -> str:
    """Epoch seconds (Redis keeps times so) in the owner's time zone; "" for None."""
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, UTC).astimezone(owner_zone()).strftime(fmt)


def num(value: float | None) -> str:
    return f"{value or 0:,}"


def register_templating(app: Flask) -> None:
    @app.context_processor
    def time_and_numbers() -> dict[str, Any]:
        return {"local_time": local_time, "epoch_time": epoch_time, "num": num,
                "SYSTEM_TIME": SYSTEM_TIME}
