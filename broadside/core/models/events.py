"""The append-only evidence log: every state change of a delivery or a broadcast (but the two
a delivery row keeps itself: broadside.campaigns.broadcasts.ledger)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import Model
from broadside.core.timeutil import utcnow


class Event(Model):
    """Rows are inserted, never updated (invariant 9: evidence). Deleted only with what they
    belong to (the cascades: an erased subscriber, a deleted broadcast) and by the owner's
    retention: a settled broadcast's per-delivery events (broadside.campaigns.broadcasts.compaction)."""

    __tablename__ = "events"
    __table_args__ = (
        # Partial (these three): most events belong to no broadcast (an import's, a sign-up's:
        # migration 0017), no delivery or no automation message, and an index entry for each
        # NULL cost every event bytes (and an import's batch time) no query ever read.
        Index("ix_events_broadcast_id", "broadcast_id", "id",
              postgresql_where=text("broadcast_id IS NOT NULL"),
              sqlite_where=text("broadcast_id IS NOT NULL")),
        Index("ix_events_subscriber_id", "subscriber_id", "id"),
        Index("ix_events_delivery_id", "delivery_id",
              postgresql_where=text("delivery_id IS NOT NULL"),
              sqlite_where=text("delivery_id IS NOT NULL")),
        Index("ix_events_automation_message_id", "automation_message_id",
              postgresql_where=text("automation_message_id IS NOT NULL"),
              sqlite_where=text("automation_message_id IS NOT NULL")),
        # Only a subscription's events name a list; deleting the list reads them (0019).
        Index("ix_events_list_id", "list_id",
              postgresql_where=text("list_id IS NOT NULL"),
              sqlite_where=text("list_id IS NOT NULL")),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # e.g. claimed, sent, skipped, failed, unknown, retry, queued, paused, resumed, cancelled,
    # finished, unsubscribed, resubscribed, bounce, complaint, suppressed, unsuppressed
    kind: Mapped[str] = mapped_column(String(32))
    broadcast_id: Mapped[int | None] = mapped_column(
        ForeignKey("broadcasts.id", ondelete="CASCADE")
    )
    delivery_id: Mapped[int | None] = mapped_column(ForeignKey("deliveries.id", ondelete="CASCADE"))
    # Erasing a subscriber deletes their events (privacy), so this cascades too.
    subscriber_id: Mapped[int | None] = mapped_column(
        ForeignKey("subscribers.id", ondelete="CASCADE")
    )
    list_id: Mapped[int | None] = mapped_column(ForeignKey("mailing_lists.id", ondelete="SET NULL"))
    # An automation's own changes, and each of its messages' (`broadside.campaigns.automations`).
    automation_id: Mapped[int | None] = mapped_column(
        ForeignKey("automations.id", ondelete="CASCADE")
    )
    automation_message_id: Mapped[int | None] = mapped_column(
        ForeignKey("automation_messages.id", ondelete="CASCADE")
    )
    detail: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Who caused it, when a person (a page) or an API token did (broadside.core.actors): NULL
    # for the worker, a subscriber's own click, a provider's webhook. No FOREIGN KEY: the
    # person or token may be removed, and the evidence stays.
    actor_person_id: Mapped[int | None]
    actor_token_id: Mapped[int | None]
