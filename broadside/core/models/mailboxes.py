"""Bounce mailboxes: where each one's reading stands, and every message read from it
(broadside.feedback.mailbox).

`bounce_mailboxes`: one row per mailbox (`key`: its server, login and folder, hashed;
broadside.core.mailbox_urls.Mailbox.key), written only by broadside.feedback.mailbox.state:
the UIDVALIDITY and the highest UID read (`uid_validity`, `last_uid`: a new UIDVALIDITY
means the server renumbered, so reading starts again from the first message, and the
processed rows below keep each message once by its Message-ID), the counts and the last
error the System page shows.

`mailbox_messages`: one row per message processed, written in the transaction of its effect
(the suppression, the delivery failed), so a message is applied once: UNIQUE per mailbox and
(UIDVALIDITY, UID), and per mailbox and Message-ID (`message_key`: the Message-ID, or the
SHA-256 of the message when it has none), so a copy of the same bounce at another UID is
found processed too.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import Model
from broadside.core.timeutil import utcnow

OUTCOMES = ("hard", "soft", "complaint", "unmatched", "unrecognised")


class BounceMailbox(Model):
    __tablename__ = "bounce_mailboxes"

    key: Mapped[str] = mapped_column(String(40), primary_key=True)
    label: Mapped[str] = mapped_column(String(300), default="")  # the URL, masked
    uid_validity: Mapped[int | None] = mapped_column(BigInteger)
    last_uid: Mapped[int] = mapped_column(BigInteger, default=0)
    processed_count: Mapped[int] = mapped_column(BigInteger, default=0)
    unrecognised_count: Mapped[int] = mapped_column(BigInteger, default=0)
    last_read_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    last_error_at: Mapped[datetime | None]


class MailboxMessage(Model):
    __tablename__ = "mailbox_messages"
    __table_args__ = (
        UniqueConstraint("mailbox_key", "uid_validity", "uid", name="uq_mailbox_messages_uid"),
        UniqueConstraint("mailbox_key", "message_key", name="uq_mailbox_messages_message"),
        CheckConstraint("outcome IN (" + ", ".join(f"'{o}'" for o in OUTCOMES) + ")",
                        name="outcome"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    mailbox_key: Mapped[str] = mapped_column(String(40))
    uid_validity: Mapped[int] = mapped_column(BigInteger)
    uid: Mapped[int] = mapped_column(BigInteger)
    message_key: Mapped[str] = mapped_column(String(300))
    outcome: Mapped[str] = mapped_column(String(16))
    detail: Mapped[str] = mapped_column(Text, default="")
    processed_at: Mapped[datetime] = mapped_column(default=utcnow)
