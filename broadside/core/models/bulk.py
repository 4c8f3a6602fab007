"""Bulk actions on subscribers: one row per action the owner confirmed, worked through by the
worker in batches (`broadside.audience.subscribers.bulk` is the only writer of its state), and
the set of people it was confirmed for (`bulk_action_members`, written by
`broadside.audience.subscribers.bulk_members` in the transaction of the action's row)."""

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
    """Who: the people in `bulk_action_members`, the selected ids or everyone the filter
    matched when the owner confirmed (nobody who comes to match later is ever included); the
    filter is kept to leave alone, at run time, whoever of them no longer matches it. Where it
    got to: `last_id`, the keyset cursor over subscriber ids, moved in the same transaction as
    each batch's effect."""

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
    # Of those gone through, the people of the set who no longer matched the filter (or were
    # erased meanwhile) when their batch came: left alone.
    no_longer_matched: Mapped[int] = mapped_column(default=0, server_default="0")
    status: Mapped[str] = mapped_column(String(16), default="queued")
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]


class BulkActionMember(Model):
    """One person of a confirmed bulk action's set. Written at the confirmation, in the
    transaction of the action's row; each batch deletes the rows it went through, a failed
    action all of its own, so the table holds only what is still to do. No FOREIGN KEYs: one
    erase would otherwise fire a trigger per row on PostgreSQL, and a subscriber erased
    meanwhile is exactly what a run must find missing (ids are never reused)."""

    __tablename__ = "bulk_action_members"
    # A clustered key on SQLite (the rows are the index): half the pages to write.
    __table_args__ = {"sqlite_with_rowid": False}

    action_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    subscriber_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
