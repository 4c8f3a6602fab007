"""Lists, subscribers, their per-list subscriptions, and CSV imports."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, Index, String, Text, UniqueConstraint, false, text
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import NEVER_REUSE_IDS, Model
from broadside.core.timeutil import utcnow


class SubscriptionStatus(StrEnum):
    """Where a person is on one list; only `broadside.audience.subscriptions` moves it."""

    UNCONFIRMED = "unconfirmed"  # signed up (or imported to be asked), not yet confirmed
    ACTIVE = "active"  # receives the list's broadcasts
    UNSUBSCRIBED = "unsubscribed"  # left; kept, so nobody is re-added against their wish


class ImportStatus(StrEnum):
    """Where a CSV import is; only `broadside.audience.transfer.lifecycle` moves it."""

    QUEUED = "queued"
    RUNNING = "running"
    ASKING = "asking"  # its rows are in; the confirmation emails are being queued
    DONE = "done"
    FAILED = "failed"


SUBSCRIPTION_STATUSES = tuple(s.value for s in SubscriptionStatus)
SUPPRESSIONS = ("bounced", "complained", "blocked")


class MailingList(Model):
    __tablename__ = "mailing_lists"
    __table_args__ = NEVER_REUSE_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    signup_enabled: Mapped[bool] = mapped_column(default=False)
    # Who opened or clicked, by person: only when the owner turns it on here (and the list's
    # public pages then say so). Off: a broadcast to this list counts in aggregate at most.
    per_person_tracking: Mapped[bool] = mapped_column(default=False, server_default=false())
    # No tracking at all for this list's readers, whatever a broadcast chose (the API's
    # `"tracking": "off"`; per_person_tracking False is "counts", True is "people").
    no_tracking: Mapped[bool] = mapped_column(default=False, server_default=false())
    # The language of this list's readers who have none of their own; None: Settings'.
    language: Mapped[str | None] = mapped_column(String(35))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # The public archive (broadside.campaigns.archive): off until the owner turns it on; the moment
    # it or its published issues last changed is its pages' Last-Modified.
    archive_enabled: Mapped[bool] = mapped_column(default=False, server_default=false())
    archive_changed_at: Mapped[datetime | None]


class Subscriber(Model):
    __tablename__ = "subscribers"
    __table_args__ = (
        CheckConstraint(
            "suppression IS NULL OR suppression IN ('bounced', 'complained', 'blocked')",
            name="suppression",
        ),
        # The few suppressed people, without reading everyone (migration 0015). Partial on
        # PostgreSQL (0017): its queries ask for a suppression, and nobody imported or signed
        # up has one, so they add no entry. Whole on SQLite: its planner reads the unsuppressed
        # people of an id range (the snapshot's chunks, a segment's audience) from this index
        # alone, 0.78-0.93x the time of reading their rows at a million.
        Index("ix_subscribers_suppression", "suppression",
              postgresql_where=text("suppression IS NOT NULL")),
        # The languages readers have, read at Send to know which footers to freeze
        # (broadside.campaigns.content.languages): partial, so readers without one cost nothing.
        Index("ix_subscribers_locale", "locale", postgresql_where=text("locale IS NOT NULL"),
              sqlite_where=text("locale IS NOT NULL")),
        # The time zones readers have, read at Send for "at each reader's own hour"
        # (broadside.campaigns.broadcasts.local_time): partial, as the languages'.
        Index("ix_subscribers_timezone", "timezone", postgresql_where=text("timezone IS NOT NULL"),
              sqlite_where=text("timezone IS NOT NULL")),
        NEVER_REUSE_IDS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    # Stored normalised (lower-cased), so uniqueness is case-insensitive.
    email: Mapped[str] = mapped_column(String(320), unique=True)
    # Not indexed (migration 0018): every query over names asks for lower(name), ILIKE or
    # a case-insensitive LIKE, which a plain index on the name does not serve.
    name: Mapped[str] = mapped_column(String(200), default="")
    attributes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Suppression applies to every list: bounced, complained, or blocked by the owner.
    suppression: Mapped[str | None] = mapped_column(String(16))
    # The reader's language (a tag, broadside.core.i18n.clean_locale): their broadcast version
    # and the words Broadside writes to them; None: their list's, then the installation's.
    locale: Mapped[str | None] = mapped_column(String(35))
    # The reader's time zone (an IANA name, e.g. "Asia/Tokyo"): "send at 09:00 in each
    # reader's time zone" sends their copy at their 09:00; None: the owner's.
    timezone: Mapped[str | None] = mapped_column(String(64))
    suppressed_at: Mapped[datetime | None]
    suppression_detail: Mapped[str | None] = mapped_column(Text)
    soft_bounce_count: Mapped[int] = mapped_column(default=0)


class Subscription(Model):
    __tablename__ = "subscriptions"
    __table_args__ = (
        UniqueConstraint("subscriber_id", "list_id", name="uq_subscriptions_subscriber_list"),
        CheckConstraint(
            "status IN ('unconfirmed', 'active', 'unsubscribed')",
            name="status",
        ),
        Index("ix_subscriptions_list_status", "list_id", "status"),
        # A person's subscriptions by status, read from the index alone (the dashboard looks
        # up each suppressed person's active lists; migration 0016 put it in place of the
        # index on subscriber_id alone, which the unique key above already covered).
        Index("ix_subscriptions_person", "subscriber_id", "status", "list_id"),
        # The growth chart's joins and leaves of each of the last 30 days, as ranges read
        # from the indexes alone (migrations 0015 and 0016: status is in the index).
        Index("ix_subscriptions_joined", "confirmed_at", "created_at", "status"),
        # Partial (0017): the chart asks for ranges, and a subscription is written with no
        # unsubscribed_at (an import's, a sign-up's).
        Index("ix_subscriptions_unsubscribed_at", "unsubscribed_at",
              postgresql_where=text("unsubscribed_at IS NOT NULL"),
              sqlite_where=text("unsubscribed_at IS NOT NULL")),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    subscriber_id: Mapped[int] = mapped_column(ForeignKey("subscribers.id", ondelete="CASCADE"))
    list_id: Mapped[int] = mapped_column(ForeignKey("mailing_lists.id", ondelete="CASCADE"))
    # SubscriptionStatus; `broadside.audience.subscriptions` is the only writer.
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    confirmed_at: Mapped[datetime | None]
    confirmation_sent_at: Mapped[datetime | None]
    unsubscribed_at: Mapped[datetime | None]
    # How they left: "one-click", "link", "preferences", "owner", "api", "import".
    unsubscribe_source: Mapped[str | None] = mapped_column(String(32))


class Import(Model):
    """A CSV import into one list; large ones run as a background job with progress."""

    __tablename__ = "imports"

    id: Mapped[int] = mapped_column(primary_key=True)
    list_id: Mapped[int | None] = mapped_column(
        ForeignKey("mailing_lists.id", ondelete="SET NULL"), index=True
    )
    filename: Mapped[str] = mapped_column(String(255), default="")
    # ImportStatus; `broadside.audience.transfer.lifecycle` is the only writer.
    status: Mapped[str] = mapped_column(String(16), default=ImportStatus.QUEUED.value)
    size_bytes: Mapped[int] = mapped_column(default=0)
    processed_rows: Mapped[int] = mapped_column(default=0)
    # The file's rows, counted before the first is written (the progress bar's total);
    # None until then.
    total_rows: Mapped[int | None]
    imported: Mapped[int] = mapped_column(default=0)
    updated: Mapped[int] = mapped_column(default=0)
    rejected: Mapped[int] = mapped_column(default=0)
    # Enter the people this import adds into the list's welcome automations.
    welcome: Mapped[bool] = mapped_column(default=False, server_default="0")
    # How these people agreed to receive mail: "opted_in" (added active) or "confirm" (added
    # unconfirmed, each sent the double opt-in email by the worker).
    consent: Mapped[str] = mapped_column(String(16), default="opted_in", server_default="opted_in")
    # The file's header as uploaded ({"delimiter", "columns"}), for the rejected-rows CSV.
    header: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Accepted rows left as they were: unsubscribed from the list, or suppressed.
    skipped_unsubscribed: Mapped[int] = mapped_column(default=0, server_default="0")
    skipped_suppressed: Mapped[int] = mapped_column(default=0, server_default="0")
    warnings: Mapped[int] = mapped_column(default=0, server_default="0")
    # Confirmation emails queued for the people a "confirm" import added.
    asked: Mapped[int] = mapped_column(default=0, server_default="0")
    # Blank rows of the file, skipped (each one's line is kept as an ImportRejection of kind
    # "empty", the first few thousand).
    empty_rows: Mapped[int] = mapped_column(default=0, server_default="0")
    # People a `welcome` import entered into the list's welcome series (0 when it had none).
    welcomed: Mapped[int] = mapped_column(default=0, server_default="0")
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]


class ImportRejection(Model):
    """A rejected row (kind "rejected", with the row's fields as uploaded) or a warning about
    an imported one (kind "warning"); the first few thousand of each per import are kept."""

    __tablename__ = "import_rejections"

    id: Mapped[int] = mapped_column(primary_key=True)
    import_id: Mapped[int] = mapped_column(ForeignKey("imports.id", ondelete="CASCADE"), index=True)
    line: Mapped[int]
    reason: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(16), default="rejected", server_default="rejected")
    fields: Mapped[list[str] | None] = mapped_column(JSON)


class Segment(Model):
    """A name and a rule tree over subscribers (`broadside.segments.rules` validates and
    compiles it). Who matches is decided when asked: a broadcast snapshots it at send time."""

    __tablename__ = "segments"
    __table_args__ = NEVER_REUSE_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    rules: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
