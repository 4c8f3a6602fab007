"""Automations: mail that goes out by itself, each message to each person at most once.

An automation has a trigger (someone joins a list, or matches a segment), ordered steps, each
with a delay and frozen revisions of its content, and a state (`broadside.campaigns.automations.
lifecycle` is its only writer). Entering a person writes one `AutomationEntry` (UNIQUE per
automation and person: nobody enters twice) and one `AutomationMessage` per step (UNIQUE per
step and person: that key is the send log, so no path can send a step twice to one person).
Messages move through the same states as a broadcast's deliveries, written only by
`broadside.campaigns.automations.ledger`.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import NEVER_REUSE_IDS, Model
from broadside.core.models.sending import DELIVERY_STATUSES, FrozenContent
from broadside.core.timeutil import utcnow


class AutomationStatus(StrEnum):
    """Where an automation is; only `broadside.campaigns.automations.lifecycle` moves it."""

    DISABLED = "disabled"  # a new automation starts here; its due messages are held
    ENABLED = "enabled"  # people enter it and its due messages are sent
    PAUSED = "paused"  # the worker met a channel-wide error: held, with the reason
    DELETED = "deleted"  # kept for the send log; its pending messages were skipped


AUTOMATION_STATUSES = tuple(s.value for s in AutomationStatus)
TRIGGERS = ("joined_list", "segment", "feed")
# Entering and sending: people enter enabled (and paused: the channel will come back) ones.
ENTERING = (AutomationStatus.ENABLED.value, AutomationStatus.PAUSED.value)


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN (" + ", ".join(f"'{v}'" for v in values) + ")"


class Automation(Model):
    __tablename__ = "automations"
    __table_args__ = (
        CheckConstraint(_one_of("status", AUTOMATION_STATUSES), name="status"),
        CheckConstraint(_one_of("trigger_type", TRIGGERS), name="trigger_type"),
        Index("ix_automations_status", "status"),
        NEVER_REUSE_IDS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    # The name lower-cased while the automation is not deleted (NULL once it is): UNIQUE, so
    # two live automations never share a name, even when saved at the same moment.
    name_key: Mapped[str | None] = mapped_column(String(200), unique=True)
    trigger_type: Mapped[str] = mapped_column(String(16))
    # joined_list: the list; segment: the segment and how often it is evaluated; feed: the
    # list (or segment) each new item of its `Feed` is sent to.
    list_id: Mapped[int | None] = mapped_column(
        ForeignKey("mailing_lists.id", ondelete="SET NULL"), index=True
    )
    segment_id: Mapped[int | None] = mapped_column(
        ForeignKey("segments.id", ondelete="SET NULL"), index=True
    )
    every_hours: Mapped[int] = mapped_column(default=12)
    # Lifecycle campaigns are evaluated highest priority first.
    priority: Mapped[int] = mapped_column(default=0)
    # Record only: people are logged as entered and nothing is sent.
    record_only: Mapped[bool] = mapped_column(default=False)
    status: Mapped[str] = mapped_column(String(16), default=AutomationStatus.DISABLED.value)
    pause_reason: Mapped[str | None] = mapped_column(Text)
    last_evaluated_at: Mapped[datetime | None]
    # The lifecycle evaluation under way for it (kept across a run cut short by its time
    # budget, so the next run continues the same evaluation); None between evaluations.
    evaluating: Mapped[int | None] = mapped_column(BigInteger)
    # The sending identity its messages go out through; NULL: the default identity.
    identity_id: Mapped[int | None] = mapped_column(ForeignKey("identities.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class AutomationStep(Model):
    """One message of the series: its delay after the previous one, and its editable content.
    What is sent is a frozen `AutomationRevision`; saving changed content freezes a new one."""

    __tablename__ = "automation_steps"
    __table_args__ = (Index("ix_automation_steps_automation", "automation_id", "position"),
                      NEVER_REUSE_IDS)

    id: Mapped[int] = mapped_column(primary_key=True)
    automation_id: Mapped[int] = mapped_column(ForeignKey("automations.id", ondelete="CASCADE"))
    position: Mapped[int]  # 1, 2, ... among the steps not removed
    delay: Mapped[str] = mapped_column(String(40), default="PT0S")  # ISO 8601, as the owner wrote it
    delay_seconds: Mapped[int] = mapped_column(default=0)
    subject: Mapped[str] = mapped_column(String(300), default="")
    preheader: Mapped[str] = mapped_column(String(300), default="")
    body: Mapped[str] = mapped_column(Text, default="")
    # How the body is written: "markdown" (the default) or "html" (the owner's own HTML, or
    # the rich-text editor's, sanitised for email when frozen). `editor` is the compose mode the
    # owner last chose ("markdown", "rich" or "html"); it decides nothing about the email.
    body_format: Mapped[str] = mapped_column(String(16), default="markdown",
                                             server_default="markdown")
    editor: Mapped[str] = mapped_column(String(16), default="markdown", server_default="markdown")
    # The plain-text part as the owner wrote it; None: made from the body when frozen.
    text_body: Mapped[str | None] = mapped_column(Text)
    # The attachments (ids in `attachments`) sent with it, in order; None: none.
    # The versions in other languages, as a broadcast's (`Broadcast.versions`).
    versions: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    attachment_ids: Mapped[list[int] | None] = mapped_column(JSON)
    # "Mint a code per recipient": the codes' prefix (None: off), frozen into each revision.
    codes_prefix: Mapped[str | None] = mapped_column(String(12))
    # The revision new messages are assigned (the newest one frozen).
    revision_id: Mapped[int | None]
    # A removed step keeps its messages (the send log); its pending ones were skipped.
    removed_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class AutomationRevision(FrozenContent, Model):
    """A step's content as frozen when it was saved; never updated afterwards (invariant 8)."""

    __tablename__ = "automation_revisions"

    id: Mapped[int] = mapped_column(primary_key=True)
    step_id: Mapped[int] = mapped_column(
        ForeignKey("automation_steps.id", ondelete="CASCADE"), index=True
    )
    # The codes' prefix as frozen with this content (None: no codes): what claims mint.
    codes_prefix: Mapped[str | None] = mapped_column(String(12))


# The bulk tables (entries and messages, written a hundred thousand rows at a time) carry no
# FOREIGN KEY constraints: on PostgreSQL each is a trigger fired per row, and together they
# were most of the cost of entering people (bench/automations.py: 10 s for 100,000 with them).
# What they would guard is kept by the code that deletes: automations, steps and revisions are
# never deleted (an automation is kept as `deleted`, a removed step as `removed_at`, revisions
# are immutable); erasing a person and deleting a list set the ids that pointed at them to
# NULL in the same transaction (`broadside.campaigns.automations.ledger.forget_person`/`forget_list`),
# as ON DELETE SET NULL did; tests/broadside/campaigns/automations/test_entering.py checks both.


class AutomationEntry(Model):
    """A person entered an automation: once, ever (the UNIQUE key)."""

    __tablename__ = "automation_entries"
    __table_args__ = (
        # Person first: it also serves "has this person entered any automation of this
        # evaluation" (one index where three were, for the speed of entering).
        UniqueConstraint("subscriber_id", "automation_id", name="uq_automation_entries_person"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    automation_id: Mapped[int]  # (no FOREIGN KEYs here: see above)
    # Erasing a person keeps the row (counts stay true) but forgets who it was.
    subscriber_id: Mapped[int | None]
    # joined (owner's page, API, sign-up confirmation), import, segment
    source: Mapped[str] = mapped_column(String(16))
    # The list their messages are re-checked against and carry the unsubscribe link of, as it
    # was when they entered (copied into each message, whose list_id is the one kept true).
    list_id: Mapped[int | None]
    # The lifecycle evaluation that entered them (segment triggers), so a lower-priority
    # automation of the same evaluation leaves them alone.
    evaluation: Mapped[int | None] = mapped_column(BigInteger)
    entered_at: Mapped[datetime] = mapped_column(default=utcnow)


class AutomationMessage(Model):
    """One step for one person: the send log (UNIQUE per step and person)."""

    __tablename__ = "automation_messages"
    __table_args__ = (
        # The send log: one message per step and person. Person first, so it also serves the
        # in-order check (their earlier steps) and their timeline.
        UniqueConstraint("subscriber_id", "step_id", name="uq_automation_messages_step_person"),
        CheckConstraint(_one_of("status", DELIVERY_STATUSES), name="status"),
        Index("ix_automation_messages_due", "status", "due_at"),
        Index("ix_automation_messages_step_status", "step_id", "status"),
        Index("ix_automation_messages_provider_message_id", "provider_message_id"),
        # Revisions in flight (messages sent per revision in the last hour). Partial: a row is
        # entered with no sent_at, so entering 100,000 people writes nothing to it.
        Index("ix_automation_messages_sent", "sent_at", "revision_id",
              sqlite_where=text("sent_at IS NOT NULL"),
              postgresql_where=text("sent_at IS NOT NULL")),
        # An automation's sends by time (broadside.feedback.reputation).
        Index("ix_automation_messages_automation_sent", "automation_id", "sent_at",
              sqlite_where=text("sent_at IS NOT NULL"),
              postgresql_where=text("sent_at IS NOT NULL")),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    # (no FOREIGN KEYs here: see above)
    automation_id: Mapped[int]
    step_id: Mapped[int]
    position: Mapped[int]  # the step's place when they entered: earlier steps go first
    # The frozen content this person gets (kept once due; a newer revision replaces it
    # only while the message is not yet due).
    revision_id: Mapped[int]
    subscriber_id: Mapped[int | None]  # None: erased
    # The list whose subscription is re-checked at send time and whose unsubscribe link the
    # message carries (None: deleted).
    list_id: Mapped[int | None]
    status: Mapped[str] = mapped_column(String(16), default="pending")
    due_at: Mapped[datetime]
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime | None]
    error_class: Mapped[str | None] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    smtp_code: Mapped[int | None]
    message_id: Mapped[str | None] = mapped_column(String(255))
    provider_message_id: Mapped[str | None] = mapped_column(String(255))
    claimed_at: Mapped[datetime | None]
    sent_at: Mapped[datetime | None]
    updated_at: Mapped[datetime | None]


FEED_MODES = ("each", "digest")
FEED_EVERY = ("daily", "weekly")


class Feed(Model):
    """An automation's RSS or Atom feed (trigger `feed`): where it is, how its new items are
    sent (one email per item, or a digest on a schedule), and what the last poll said."""

    __tablename__ = "feeds"
    __table_args__ = (
        CheckConstraint(_one_of("mode", FEED_MODES), name="mode"),
        CheckConstraint("every IS NULL OR " + _one_of("every", FEED_EVERY), name="every"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    automation_id: Mapped[int] = mapped_column(
        ForeignKey("automations.id", ondelete="CASCADE"), unique=True)
    url: Mapped[str] = mapped_column(Text)
    mode: Mapped[str] = mapped_column(String(8), default="each")
    # A digest's schedule: daily or weekly (on `weekday`, 0 = Monday) at `at` ("HH:MM", the
    # owner's time zone).
    every: Mapped[str | None] = mapped_column(String(8))
    at: Mapped[str | None] = mapped_column(String(5))
    weekday: Mapped[int | None]
    # The conditional GET's validators from the last answer.
    etag: Mapped[str | None] = mapped_column(String(255))
    last_modified: Mapped[str | None] = mapped_column(String(64))
    # The items present at the first successful poll are recorded, not sent (`primed_at`).
    primed_at: Mapped[datetime | None]
    polled_at: Mapped[datetime | None]
    next_poll_at: Mapped[datetime | None]
    next_digest_at: Mapped[datetime | None]
    # The last poll's failure in the owner's words (None: it worked); nothing is sent then.
    error: Mapped[str | None] = mapped_column(Text)
    error_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class FeedItem(Model):
    """One item of a feed, once ever (UNIQUE per feed and key: its id, else its link), and the
    broadcast that carried it (None: not sent yet, or seen at the first poll)."""

    __tablename__ = "feed_items"
    __table_args__ = (UniqueConstraint("feed_id", "key", name="uq_feed_items_key"),
                      Index("ix_feed_items_unsent", "feed_id", "broadcast_id"))

    id: Mapped[int] = mapped_column(primary_key=True)
    feed_id: Mapped[int] = mapped_column(ForeignKey("feeds.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(64))  # SHA-256 of the item's id or link
    title: Mapped[str] = mapped_column(Text, default="")
    link: Mapped[str] = mapped_column(Text, default="")
    summary_html: Mapped[str] = mapped_column(Text, default="")  # sanitised as the HTML mode
    published_at: Mapped[datetime | None]
    seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    # True for the items found at the first poll: recorded so they are never sent.
    baseline: Mapped[bool] = mapped_column(default=False)
    broadcast_id: Mapped[int | None] = mapped_column(
        ForeignKey("broadcasts.id", ondelete="SET NULL"))
