"""Sending identities: who a message is from and the stream it goes out on.

An identity is a From name and address, a transport URL (SMTP or a provider's HTTP API, its
secrets never shown back), a pace and an hourly cap, and a postal address. Each identity is one
paced stream held by its own Redis lease (broadside.delivery.lease), so two identities send side by side
and two workers for one identity never do (invariant 1, per identity).

The default identity is not a row: it is the environment (SMTP_URL, MAIL_FROM or the sender on
the Settings page, SEND_DELAY_MS, SEND_HOURLY_LIMIT), so an installation that never opens the
identities page keeps working unchanged, and a broadcast, automation or transactional message
whose `identity_id` is NULL goes through it. Rows are the other identities; their state
(active, paused with a reason, deleted) is written only by broadside.delivery.identities.lifecycle.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import CheckConstraint, Float, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import NEVER_REUSE_IDS, Model
from broadside.core.timeutil import utcnow


class IdentityStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"  # the provider refused the channel (login, sender, account): held
    DELETED = "deleted"  # kept so past broadcasts still name it; its name is free again


IDENTITY_STATUSES = tuple(s.value for s in IdentityStatus)


class Identity(Model):
    __tablename__ = "identities"
    __table_args__ = (
        CheckConstraint("status IN (" + ", ".join(f"'{s}'" for s in IDENTITY_STATUSES) + ")",
                        name="status"),
        NEVER_REUSE_IDS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    # lower(name) while not deleted, NULL once deleted: UNIQUE, so live names never clash.
    name_key: Mapped[str | None] = mapped_column(String(100), unique=True)
    from_name: Mapped[str] = mapped_column(String(200), default="")
    from_email: Mapped[str] = mapped_column(String(320))
    # smtp://, ses://, postmark://, resend://, mailgun:// or outbox:// (empty: the outbox).
    # Holds secrets: never rendered, logged or returned by the API (urls.describe masks it).
    transport_url: Mapped[str] = mapped_column(Text, default="")
    delay_ms: Mapped[int] = mapped_column(default=200)
    hourly_limit: Mapped[int] = mapped_column(default=0)  # 0: no cap
    # Requests per second its provider account allows, shared by every identity that sends
    # through the same account (the smallest value set wins); NULL: none set here.
    # broadside.delivery.account_limit keeps it across streams and workers.
    account_rate: Mapped[float | None] = mapped_column(Float)
    postal_address: Mapped[str] = mapped_column(Text, default="")
    # The secret that proves a provider's webhook came from this identity's account
    # (Resend's whsec_…, Mailgun's signing key, the password of Postmark's basic auth).
    webhook_secret: Mapped[str] = mapped_column(String(200), default="")
    # The mailbox its bounces come back to (imaps://user:password@host:993/INBOX, or imap://
    # with STARTTLS); empty: none. Holds a secret, like transport_url: never shown back.
    bounce_mailbox_url: Mapped[str] = mapped_column(Text, default="", server_default="")
    # The domain of its VERP Return-Path (bounces+<token>@<domain>); empty: the mailbox's.
    verp_domain: Mapped[str] = mapped_column(String(253), default="", server_default="")
    # DKIM signing of its SMTP mail (both empty: not signed): the selector published at
    # <selector>._domainkey.<From domain>, and the private key (PEM; a secret, never shown).
    dkim_selector: Mapped[str] = mapped_column(String(63), default="", server_default="")
    dkim_private_key: Mapped[str] = mapped_column(Text, default="", server_default="")
    status: Mapped[str] = mapped_column(String(16), default=IdentityStatus.ACTIVE.value)
    pause_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
