"""The reputation guard's evidence: which sent messages bounced hard or drew a complaint, and
when the guard paused an identity.

A `ReputationMark` is written where a suppression is recorded
(broadside.audience.unsubscribe.reputation_marks, called by the one writer of suppressions),
once per message and kind (UNIQUE), with the identity the message went out through and the
moment it was sent, so "how many of an identity's last 1,000 sends bounced" is a range count
on (identity_key, sent_at) and never reads the send tables' outcome or the events log. Marks
are rare (a bounce or complaint is a few in a hundred sends at worst), so the table stays small
at any audience size. `identity_key` is the identity's id, 0 for the default identity (which
is no row).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import Model
from broadside.core.timeutil import utcnow

MARK_KINDS = ("bounced", "complained")
SOURCE_KINDS = ("delivery", "automation_message", "transactional_message")
DEFAULT_IDENTITY_KEY = 0


class ReputationMark(Model):
    __tablename__ = "reputation_marks"
    __table_args__ = (
        UniqueConstraint("source_kind", "source_id", "kind", name="uq_reputation_marks_message"),
        CheckConstraint("kind IN ('bounced', 'complained')", name="kind"),
        # The guard's and the page's reads: an identity's marks by the time of the send.
        Index("ix_reputation_marks_identity_sent", "identity_key", "sent_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    identity_key: Mapped[int]  # the identity's id; 0: the default identity
    kind: Mapped[str] = mapped_column(String(16))  # bounced (hard) | complained
    source_kind: Mapped[str] = mapped_column(String(24))  # delivery | automation_message | ...
    source_id: Mapped[int]
    # When the message was sent; for a message refused at once (a synchronous 5.1.1, never
    # accepted, so no sent_at) the moment of the refusal, and `refused` is true: such a
    # message counts as a send too (the receiving server saw it).
    sent_at: Mapped[datetime]
    refused: Mapped[bool] = mapped_column(default=False)
    recorded_at: Mapped[datetime] = mapped_column(default=utcnow)


class ReputationPause(Model):
    """The guard paused an identity (written only by broadside.feedback.reputation.guard): the
    reason and figures, and the moment from which it counts again after the owner resumes."""

    __tablename__ = "reputation_pauses"
    __table_args__ = (Index("ix_reputation_pauses_identity", "identity_key", "paused_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    identity_key: Mapped[int]
    paused_at: Mapped[datetime] = mapped_column(default=utcnow)
    reason: Mapped[str] = mapped_column(Text)
    figures: Mapped[dict[str, Any] | None] = mapped_column(JSON)
