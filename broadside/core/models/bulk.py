"""Bulk actions on subscribers: one row per action the owner confirmed, worked through by the
worker in batches (`broadside.audience.subscribers.bulk` is the only writer of its state)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import Model
from broadside.core.timeutil import utcnow

BULK_ACTIONS = ("add", "remove", "unsubscribe", "block", "erase")
BULK_STATUSES = ("queued", "running", "done", "failed")


class BulkAction(Model):
    """Who: the selected ids, or a search filter frozen with the highest subscriber id at
    submit time (people who join later are never included). Where it got to: `last_id`, the
    keyset cursor over subscriber ids, moved in the same transaction as each batch's effect."""

    __tablename__ = "bulk_actions"
    __table_args__ = (
        CheckConstraint("action IN ('add', 'remove', 'unsubscribe', 'block', 'erase')",
                        name="action"),
        CheckConstraint("status IN ('queued', 'running', 'done', 'failed')", name="status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    action: Mapped[str] = mapped_column(String(16))
    # The list to add to, remove from or unsubscribe from (NULL: unsubscribe from every list).
    # No FOREIGN KEY: a deleted list must fail the action, never turn it into "every list"
    # (list ids are never reused).
    list_id: Mapped[int | None]
    list_name: Mapped[str] = mapped_column(String(200), default="")
    subscriber_ids: Mapped[list[int] | None] = mapped_column(JSON)  # a selection
    filters: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # or the whole filter
    max_id: Mapped[int] = mapped_column(default=0)
    last_id: Mapped[int] = mapped_column(default=0)
    total: Mapped[int] = mapped_column(default=0)
    processed: Mapped[int] = mapped_column(default=0)
    changed: Mapped[int] = mapped_column(default=0)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]
