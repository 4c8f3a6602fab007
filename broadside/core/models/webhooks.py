"""Outgoing webhooks: the owner's endpoints and the outbox of events waiting for each.

`broadside.webhooks.endpoints` is the only writer of an endpoint's `status`;
`broadside.webhooks.ledger` the only writer of an outbox row's `status`. An outbox row is
written in the transaction of the change it reports (`broadside.webhooks.emitter`), one per
endpoint that wanted the event, so a committed change always has its events and a rolled-back
one never does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import NEVER_REUSE_IDS, Model
from broadside.core.timeutil import utcnow

ENDPOINT_STATUSES = ("enabled", "disabled")


class WebhookEndpoint(Model):
    """A URL the owner wants events POSTed to, the events it wants and its signing secret."""

    __tablename__ = "webhook_endpoints"
    __table_args__ = (
        CheckConstraint("status IN ('enabled', 'disabled')", name="status"),
        NEVER_REUSE_IDS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(String(2000))
    # ",subscriber.created,delivery.sent," : matched with LIKE '%,<type>,%' on both engines.
    events: Mapped[str] = mapped_column(Text)
    secret: Mapped[str] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(16), default="enabled")
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    # Since when every attempt has failed (NULL after any success): a day of it disables.
    failing_since: Mapped[datetime | None]
    last_success_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class WebhookMessage(Model):
    """One event for one endpoint: delivered at most once per event id by this side (the
    receiver deduplicates by `event_id` across a crash mid-POST: at-least-once)."""

    __tablename__ = "webhook_outbox"
    __table_args__ = (
        CheckConstraint("status IN ('pending', 'sending', 'delivered', 'failed')", name="status"),
        UniqueConstraint("endpoint_id", "event_id", name="uq_webhook_outbox_endpoint_event"),
        Index("ix_webhook_outbox_due", "status", "next_attempt_at"),
        Index("ix_webhook_outbox_endpoint", "endpoint_id", "id"),
        Index("ix_webhook_outbox_created", "created_at"),  # the monthly prune
        Index("ix_webhook_outbox_subscriber_id", "subscriber_id"),  # erasing a person
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    endpoint_id: Mapped[int] = mapped_column(
        ForeignKey("webhook_endpoints.id", ondelete="CASCADE"))
    event_id: Mapped[str] = mapped_column(String(40))
    event_type: Mapped[str] = mapped_column(String(40))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    # The person the event names, if any: erasing them deletes their events (no FOREIGN KEY,
    # like automation messages, so a ledger flush never waits on or fails for an erase;
    # `broadside.audience.subscribers.service.erase_uncommitted` deletes them).
    subscriber_id: Mapped[int | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(default=utcnow)
    claimed_at: Mapped[datetime | None]
    response_code: Mapped[int | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    delivered_at: Mapped[datetime | None]
    updated_at: Mapped[datetime | None]
