"""One clock for the whole app: naive UTC datetimes, stored the same way on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)
