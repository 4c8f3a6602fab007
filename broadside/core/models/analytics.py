"""Reader analytics: counts per broadcast, per link and per day, and (only where the owner
turned it on for a list) who opened or clicked.

Aggregate rows name no person: no subscriber id, no delivery id, no address. Each hit adds one
to a row (`UPDATE ... SET n = n + 1`, or an upsert for a day's row), never a row per hit.
Per-person rows name the delivery, not the subscriber: erasing someone nulls the delivery's
subscriber id, so their rows stop naming anyone in the same transaction as the erase.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import Model
from broadside.core.timeutil import utcnow


class TrackedLink(Model):
    """One link of a broadcast's frozen email, by its position among the tracked links; `url`
    is the address as the owner wrote it (merge fields unfilled: no reader's value)."""

    __tablename__ = "analytics_links"
    __table_args__ = (UniqueConstraint("broadcast_id", "position"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    broadcast_id: Mapped[int] = mapped_column(ForeignKey("broadcasts.id", ondelete="CASCADE"))
    position: Mapped[int]
    url: Mapped[str] = mapped_column(Text)
    clicks: Mapped[int] = mapped_column(default=0)
    bot_clicks: Mapped[int] = mapped_column(default=0)  # suspected scanners and prefetches


class TrackingDay(Model):
    """A broadcast's opens and clicks on one day after sending started (day 0: its first 24
    hours), human and suspected-bot apart."""

    __tablename__ = "analytics_days"
    __table_args__ = (UniqueConstraint("broadcast_id", "day"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    broadcast_id: Mapped[int] = mapped_column(ForeignKey("broadcasts.id", ondelete="CASCADE"))
    day: Mapped[int]
    opens: Mapped[int] = mapped_column(default=0)
    bot_opens: Mapped[int] = mapped_column(default=0)
    clicks: Mapped[int] = mapped_column(default=0)
    bot_clicks: Mapped[int] = mapped_column(default=0)


class PersonActivity(Model):
    """Per-person tracking only: the first time one copy was opened (`position` -1) or one of
    its links clicked. Written only for a broadcast sent with per-person tracking to a list
    whose owner turned it on, and only for hits not taken for a bot."""

    __tablename__ = "analytics_people"
    __table_args__ = (
        UniqueConstraint("delivery_id", "kind", "position"),
        CheckConstraint("kind IN ('open', 'click')", name="kind"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    broadcast_id: Mapped[int] = mapped_column(ForeignKey("broadcasts.id", ondelete="CASCADE"),
                                              index=True)
    delivery_id: Mapped[int] = mapped_column(ForeignKey("deliveries.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(Text)
    position: Mapped[int]
    first_at: Mapped[datetime] = mapped_column(default=utcnow)
