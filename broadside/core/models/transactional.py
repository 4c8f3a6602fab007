"""Transactional templates: the owner's password resets, receipts and one-time codes, sent one
at a time through the API (`POST /api/transactional`).

A template is edited; what is sent is always one of its revisions, frozen (invariant 8) when
the template is saved with something new, so a message's wording can be reconstructed whatever
was edited afterwards. A template is never deleted, only marked so (`deleted_at`): its
revisions and the messages sent from them keep what they point at, and its name is free again.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import Model
from broadside.core.models.sending import FrozenContent
from broadside.core.timeutil import utcnow

MAX_TEMPLATE_NAME = 100


class TransactionalTemplate(Model):
    """What the owner edits. Its name is unique among templates not deleted."""

    __tablename__ = "transactional_templates"
    __table_args__ = (
        Index("uq_transactional_templates_live_name", "name", unique=True,
              sqlite_where=text("deleted_at IS NULL"),
              postgresql_where=text("deleted_at IS NULL")),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(MAX_TEMPLATE_NAME))
    subject: Mapped[str] = mapped_column(String(300), default="")
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
    # The identity it goes out through; NULL: the default identity.
    identity_id: Mapped[int | None] = mapped_column(ForeignKey("identities.id"))
    # May reach someone who unsubscribed from the newsletters (a password reset); never a
    # suppressed address.
    essential: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    deleted_at: Mapped[datetime | None]


class TransactionalTemplateRevision(FrozenContent, Model):
    """A template as frozen when it was saved; never updated afterwards (invariant 8). The
    newest revision of a template (highest id) is the one new messages are sent from."""

    __tablename__ = "transactional_template_revisions"

    id: Mapped[int] = mapped_column(primary_key=True)
    template_id: Mapped[int] = mapped_column(ForeignKey("transactional_templates.id"), index=True)
    identity_id: Mapped[int | None] = mapped_column(ForeignKey("identities.id"))
    essential: Mapped[bool] = mapped_column(default=False)
