"""Single-use codes minted in the send log: one per claimed row of a broadcast or an
automation step that mints them (`broadside.campaigns.codes`).

A code belongs to the row that records its send (`source_kind`, `source_id`: a delivery or an
automation message), and that pair is UNIQUE: however often a row is claimed (a retried or
duplicated job, a row given back to pending after a failure), it carries one code. The code
itself is UNIQUE across the installation. `redeemed_at` is the redemption state (NULL:
unredeemed), moved only by `broadside.campaigns.codes.redemption`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import Model
from broadside.core.timeutil import utcnow

SOURCE_KINDS = ("delivery", "automation_message")
MAX_PREFIX = 12
CODE_LENGTH = 8  # the random part, after "PREFIX-"


class Code(Model):
    __tablename__ = "codes"
    __table_args__ = (
        # One code per send-log row: what makes a retried claim find the code it minted.
        UniqueConstraint("source_kind", "source_id", name="uq_codes_source"),
        CheckConstraint("source_kind IN ('delivery', 'automation_message')", name="source_kind"),
        # A person's codes (their page), newest first.
        Index("ix_codes_subscriber", "subscriber_id", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    code: Mapped[str] = mapped_column(String(MAX_PREFIX + 1 + CODE_LENGTH), unique=True)
    prefix: Mapped[str] = mapped_column(String(MAX_PREFIX))
    source_kind: Mapped[str] = mapped_column(String(24))
    source_id: Mapped[int]
    # Erasing a person keeps the code (it may be redeemed at a till) but forgets whose it was.
    subscriber_id: Mapped[int | None] = mapped_column(
        ForeignKey("subscribers.id", ondelete="SET NULL"))
    # From which message: a broadcast, or an automation's step (never deleted, so no keys).
    broadcast_id: Mapped[int | None] = mapped_column(
        ForeignKey("broadcasts.id", ondelete="SET NULL"))
    automation_id: Mapped[int | None]
    step_id: Mapped[int | None]
    minted_at: Mapped[datetime] = mapped_column(default=utcnow)
    redeemed_at: Mapped[datetime | None]
