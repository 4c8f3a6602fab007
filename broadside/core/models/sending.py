"""Broadcasts, their frozen revisions, one delivery row per recipient, and transactional mail."""

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
from broadside.core.timeutil import utcnow


class BroadcastStatus(StrEnum):
    """Where a broadcast is; only `broadside.campaigns.broadcasts.lifecycle` moves it from one to another."""

    DRAFT = "draft"
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    SENDING = "sending"
    PAUSED = "paused"
    SENT = "sent"
    CANCELLED = "cancelled"


class DeliveryStatus(StrEnum):
    """Where one recipient's copy is; only `broadside.campaigns.broadcasts.ledger` moves it."""

    PENDING = "pending"
    SENDING = "sending"  # claimed: committed before any SMTP (invariant 4)
    SENT = "sent"
    SKIPPED = "skipped"
    FAILED = "failed"
    UNKNOWN = "unknown"  # may or may not have arrived: never resent automatically (invariant 5)


# What the frequency cap counts as a copy someone got: sent, and those that may have arrived.
MAY_HAVE_RECEIVED = (DeliveryStatus.SENT.value, DeliveryStatus.UNKNOWN.value,
                     DeliveryStatus.SENDING.value)

BROADCAST_STATUSES = tuple(s.value for s in BroadcastStatus)
DELIVERY_STATUSES = tuple(s.value for s in DeliveryStatus)


def _one_of(statuses: tuple[str, ...]) -> str:
    return "status IN (" + ", ".join(f"'{s}'" for s in statuses) + ")"


class Broadcast(Model):
    __tablename__ = "broadcasts"
    __table_args__ = (
        CheckConstraint(_one_of(BROADCAST_STATUSES), name="status"),
        Index("ix_broadcasts_status", "status"),
        NEVER_REUSE_IDS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    list_id: Mapped[int | None] = mapped_column(
        ForeignKey("mailing_lists.id", ondelete="SET NULL"), index=True
    )
    # The audience: a list, or a segment (people matching its rules who are active on at
    # least one list). Exactly one is chosen before sending.
    segment_id: Mapped[int | None] = mapped_column(
        ForeignKey("segments.id", ondelete="SET NULL"), index=True
    )
    # The frequency cap, checked at each person's turn: skip anyone who received a broadcast
    # in this many hours. None: no cap.
    skip_if_received_within_hours: Mapped[int | None]
    status: Mapped[str] = mapped_column(String(16), default=BroadcastStatus.DRAFT.value)
    # The editable draft; pressing send freezes a copy into `revisions` (invariant 8).
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
    attachment_ids: Mapped[list[int] | None] = mapped_column(JSON)
    # The versions in other languages (broadside.campaigns.content.versions): a list of
    # {"locale", "subject", "preheader", "body"}; None: one version, the fields above.
    versions: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    # A template's design changes (colour, width, font, footer) over Settings -> Design; None:
    # the design as it is in Settings when frozen.
    design_overrides: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    pause_reason: Mapped[str | None] = mapped_column(Text)
    # A passing state shown to the owner while sending, e.g. waiting for the hourly limit.
    notice: Mapped[str | None] = mapped_column(Text)
    scheduled_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    queued_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    # Automatic resumptions after failures are bounded (invariant 7): `auto_resumes` counts
    # those in a row that saw no progress, measured against `settled_at_resume`, the deliveries
    # that had reached sent, skipped or failed when the worker last resumed it.
    auto_resumes: Mapped[int] = mapped_column(default=0)
    settled_at_resume: Mapped[int] = mapped_column(default=0, server_default="0")
    # Counters kept by the pipeline in the same transaction as each delivery change, so the
    # progress fragment never counts the deliveries table.
    total: Mapped[int] = mapped_column(default=0)
    pending_count: Mapped[int] = mapped_column(default=0)
    sending_count: Mapped[int] = mapped_column(default=0)
    sent_count: Mapped[int] = mapped_column(default=0)
    skipped_count: Mapped[int] = mapped_column(default=0)
    failed_count: Mapped[int] = mapped_column(default=0)
    unknown_count: Mapped[int] = mapped_column(default=0)
    # Sends per second the worker measured over its last slice.
    send_rate: Mapped[float] = mapped_column(default=0.0)
    # The sending identity (its stream, pace and cap); NULL: the default identity. Its From
    # is frozen into the revision when send is pressed (invariant 8).
    identity_id: Mapped[int | None] = mapped_column(ForeignKey("identities.id"), index=True)
    # A "View in your browser" link in each copy (broadside.campaigns.archive.links): True or False as
    # the owner chose; None follows the list's public archive (on when it is on).
    view_in_browser: Mapped[bool | None]
    # Reader tracking (broadside.campaigns.analytics.modes): off | aggregate | per_person. NULL on a draft
    # not yet chosen: Settings' default, frozen at Send. After Send it may only be turned off.
    tracking: Mapped[str | None] = mapped_column(String(16))
    # The audience snapshot, taken by the worker in chunks after the press
    # (broadside.campaigns.broadcasts.snapshot, the one writer of these three and `audience_rules`):
    # people with a subscriber id up to `snapshot_until` (the highest at the press) are
    # candidates; `snapshot_cursor` is the highest id already snapshotted, moved by a guarded
    # UPDATE in each chunk's transaction. Complete when cursor >= until (0 and 0 for a draft,
    # and for every broadcast sent before chunks existed). `audience_estimate`: a list's
    # active subscriptions, counted by the worker before its first chunk (the page's "about
    # M"); None for a segment, and until then.
    snapshot_cursor: Mapped[int] = mapped_column(default=0, server_default="0")
    snapshot_until: Mapped[int] = mapped_column(default=0, server_default="0")
    audience_estimate: Mapped[int | None]
    # A segment's rules as they were at the press: every chunk applies these, so editing or
    # deleting the segment meanwhile never changes who this broadcast is for.
    audience_rules: Mapped[str | None] = mapped_column(Text)
    # "Mint a code per recipient" (broadside.campaigns.codes): the codes' prefix, None: off.
    # Frozen into the revision at Send with the content (invariant 8).
    codes_prefix: Mapped[str | None] = mapped_column(String(12))
    # "Send again to those who did not open": the sent broadcast this draft resends; its
    # audience is the people that one reached who have not opened it (judged at Send).
    resend_of_id: Mapped[int | None] = mapped_column(
        ForeignKey("broadcasts.id", ondelete="SET NULL"), index=True)
    # An A/B test (broadside.campaigns.broadcasts.ab_tests): {"variants": [{"subject",
    # "preheader"?, "body"?}, ...] (2 to 4; the first is the broadcast's own), "share": the
    # test's percentage of the audience, "measure": "opens" | "clicks", "wait_hours",
    # "default": the variant that wins when no difference is clear}. None: no test.
    ab_test: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Recorded at Send: the seed that split the audience (each delivery's `variant`).
    ab_seed: Mapped[int | None] = mapped_column(BigInteger)
    # When the test's copies were all sent, plus the wait: the winner is chosen then.
    ab_wait_until: Mapped[datetime | None]
    # The variant the rest of the audience gets, written once by a guarded UPDATE, with the
    # figures it was chosen on (`ab_result`: rates, intervals, p-value, whether it was clear).
    ab_winner: Mapped[int | None]
    ab_decided_at: Mapped[datetime | None]
    ab_result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # "Send at HH:MM in each reader's time zone" (None: everyone at once); at Send, each zone
    # the readers have and its moment in UTC (`local_due`: {zone: ISO time, "": the owner's}).
    send_at_local: Mapped[str | None] = mapped_column(String(5))
    local_due: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The worker found nothing due before this moment (readers' own hours, the A/B wait): no
    # slice is queued for it until then (jobs.maintenance).
    waiting_until: Mapped[datetime | None]


class FrozenContent:
    """The columns of frozen content (invariant 8), shared by a broadcast's revision and an
    automation step's: never updated once written."""

    subject: Mapped[str] = mapped_column(String(300))
    preheader: Mapped[str] = mapped_column(String(300), default="")
    body_markdown: Mapped[str] = mapped_column(Text)  # the body as written, in `body_format`
    body_format: Mapped[str] = mapped_column(String(16), default="markdown",
                                             server_default="markdown")
    attachment_ids: Mapped[list[int] | None] = mapped_column(JSON)
    # Rendered email layout with merge fields still in place; filled per recipient.
    html_template: Mapped[str] = mapped_column(Text)
    text_template: Mapped[str] = mapped_column(Text)
    from_name: Mapped[str] = mapped_column(String(200), default="")
    from_email: Mapped[str] = mapped_column(String(320))
    postal_address: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Each language's message, frozen with the rest (broadside.campaigns.content.versions:
    # the default version's language and a message per other language); a reader whose
    # language has none gets the columns above. None: one message for everyone in English
    # (every revision before migration 0037).
    versions: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class Revision(FrozenContent, Model):
    """What was sent, frozen when send was pressed; never updated afterwards."""

    __tablename__ = "revisions"

    id: Mapped[int] = mapped_column(primary_key=True)
    # One revision per broadcast: a broadcast is frozen once, when send is pressed.
    broadcast_id: Mapped[int] = mapped_column(
        ForeignKey("broadcasts.id", ondelete="CASCADE"), unique=True
    )
    # The codes' prefix as frozen at Send (None: no codes): what the worker's claims mint.
    codes_prefix: Mapped[str | None] = mapped_column(String(12))
    # An A/B test's other variants as frozen at Send: {"1": message, ...} in the shape of a
    # version's message (broadside.campaigns.content.versions); variant 0 is the columns above.
    variants: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class Delivery(Model):
    """One recipient's copy of a broadcast. Lean on purpose (a large broadcast has a million of
    them): no stored Message-ID (ours names the row: `broadside.mail.message_refs`), three
    indexes that each serve a query, and the row keeps its own claim (`claimed_at`,
    `attempts`) and its final outcome (`status`, `reason`, `smtp_code`, `sent_at`), which the
    evidence timeline reads alongside the events (`broadside.campaigns.broadcasts.ledger`)."""

    __tablename__ = "deliveries"
    __table_args__ = (
        # One copy per person per broadcast; subscriber first, so it also serves the person's
        # own deliveries (the frequency cap, their page, erasure's SET NULL).
        UniqueConstraint("subscriber_id", "broadcast_id", name="uq_deliveries_subscriber_broadcast"),
        CheckConstraint(_one_of(DELIVERY_STATUSES), name="status"),
        # The worker's due rows, the page's status filter and keyset, the counts by status.
        Index("ix_deliveries_broadcast_status", "broadcast_id", "status", "id"),
        # A provider's webhook names its own id: only rows sent through an HTTP API have one.
        Index("ix_deliveries_provider_message_id", "provider_message_id",
              postgresql_where=text("provider_message_id IS NOT NULL"),
              sqlite_where=text("provider_message_id IS NOT NULL")),
        # Deleting a list sets its copies' list to NULL: found here, not by reading them all.
        Index("ix_deliveries_list_id", "list_id"),
        # The reputation guard's last sends of a broadcast, the Deliverability page's sends per
        # day (broadside.feedback.reputation). Partial: a pending row costs it nothing.
        Index("ix_deliveries_broadcast_sent", "broadcast_id", "sent_at",
              postgresql_where=text("sent_at IS NOT NULL"),
              sqlite_where=text("sent_at IS NOT NULL")),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    broadcast_id: Mapped[int] = mapped_column(ForeignKey("broadcasts.id", ondelete="CASCADE"))
    # Erasing a subscriber keeps the row (counts stay true) but forgets who it was.
    subscriber_id: Mapped[int | None] = mapped_column(
        ForeignKey("subscribers.id", ondelete="SET NULL")
    )
    # The list whose subscription the send-time re-check reads and whose unsubscribe link the
    # message carries: the broadcast's list, or for a segment one list the person is on.
    # None on rows written before segments existed: the broadcast's list.
    list_id: Mapped[int | None] = mapped_column(ForeignKey("mailing_lists.id", ondelete="SET NULL"))
    status: Mapped[str] = mapped_column(String(16), default=DeliveryStatus.PENDING.value)
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime | None]
    # transient | recipient | channel | ambiguous | permanent, set with a failure
    error_class: Mapped[str | None] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    smtp_code: Mapped[int | None]
    # The provider's own id for this message (HTTP APIs), which its webhooks name.
    provider_message_id: Mapped[str | None] = mapped_column(String(255))
    claimed_at: Mapped[datetime | None]
    sent_at: Mapped[datetime | None]
    updated_at: Mapped[datetime | None]
    # An A/B test's variant for this reader, fixed at the snapshot: 0..3 a test variant, -1
    # the rest of the audience, who get the winner once chosen (claimed only then). None: no
    # test.
    variant: Mapped[int | None]


class TransactionalMessage(Model):
    """One-off mail (test sends, sign-up confirmations), sent ahead of broadcasts."""

    __tablename__ = "transactional_messages"
    __table_args__ = (
        CheckConstraint(
            "status IN ('pending', 'sending', 'sent', 'failed', 'unknown')",
            name="status",
        ),
        Index("ix_transactional_status", "status", "id"),
        # The retention's batches: the oldest messages whose content is still kept.
        Index("ix_transactional_content_kept", "created_at",
              sqlite_where=text("content_removed_at IS NULL"),
              postgresql_where=text("content_removed_at IS NULL")),
        # Password resets whose body (a live sign-in link) is still kept: removed once settled.
        Index("ix_transactional_resets_kept", "created_at",
              sqlite_where=text("content_removed_at IS NULL AND kind = 'password_reset'"),
              # (as PostgreSQL writes it back: the check of tests/webapp/test_partial_indexes.py)
              postgresql_where=text("content_removed_at IS NULL "
                                    "AND kind::text = 'password_reset'::text")),
        # Invitations whose body (a live link to join) is still kept: the same, at once.
        Index("ix_transactional_invitations_kept", "created_at",
              sqlite_where=text("content_removed_at IS NULL AND kind = 'invitation'"),
              postgresql_where=text("content_removed_at IS NULL "
                                    "AND kind::text = 'invitation'::text")),
        # A person's messages (their page, their export, their erase: by id or by address).
        Index("ix_transactional_subscriber", "subscriber_id"),
        Index("ix_transactional_to_email", "to_email"),
        # Revisions in flight: messages sent from a template's revision in the last hour.
        Index("ix_transactional_sent_revision", "sent_at", "template_revision_id",
              sqlite_where=text("template_revision_id IS NOT NULL"),
              postgresql_where=text("template_revision_id IS NOT NULL")),
        # An identity's sends by time (broadside.feedback.reputation).
        Index("ix_transactional_identity_sent", "identity_id", "sent_at",
              sqlite_where=text("sent_at IS NOT NULL"),
              postgresql_where=text("sent_at IS NOT NULL")),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    # test | confirmation | password_reset | invitation | template
    kind: Mapped[str] = mapped_column(String(32))
    to_email: Mapped[str] = mapped_column(String(320))
    subject: Mapped[str] = mapped_column(String(300))
    html: Mapped[str] = mapped_column(Text, default="")
    text: Mapped[str] = mapped_column(Text, default="")
    headers: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime | None]
    reason: Mapped[str | None] = mapped_column(Text)
    message_id: Mapped[str | None] = mapped_column(String(255))
    broadcast_id: Mapped[int | None] = mapped_column(
        ForeignKey("broadcasts.id", ondelete="SET NULL")
    )
    subscriber_id: Mapped[int | None] = mapped_column(
        ForeignKey("subscribers.id", ondelete="SET NULL")
    )
    # The identity it goes out through (that of what it belongs to); NULL: the default.
    identity_id: Mapped[int | None] = mapped_column(ForeignKey("identities.id"))
    provider_message_id: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    sent_at: Mapped[datetime | None]
    # Sent from a transactional template: the revision it was rendered from (kept when its
    # content is removed, so what was sent stays reconstructible).
    template_revision_id: Mapped[int | None] = mapped_column(
        ForeignKey("transactional_template_revisions.id"), index=True)
    # The attachments (ids in `attachments`) sent with it, in order: those of the broadcast,
    # step or template revision it is a copy of, taken when it was queued; None: none.
    attachment_ids: Mapped[list[int] | None] = mapped_column(JSON)
    # The API client's Idempotency-Key, written in the INSERT of this row (so a crash cannot
    # separate them) with the hash of the request it came with; cleared after 24 hours, when
    # the key may name a new request. UNIQUE: two requests with one key make one row.
    idempotency_key: Mapped[str | None] = mapped_column(String(255), unique=True)
    request_hash: Mapped[str | None] = mapped_column(String(64))
    # After the retention: the SHA-256 of the rendered subject, HTML and text, which are then
    # emptied, and the headers cleared; `content_removed_at` says when. The one writer of these
    # after the INSERT: broadside.delivery.content_retention (its canonical form is there).
    content_sha256: Mapped[str | None] = mapped_column(String(64))
    content_removed_at: Mapped[datetime | None]
