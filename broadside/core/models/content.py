"""What an owner starts a message from: their saved templates, and the reusable blocks a body
names by reference.

The three built-in templates are not rows: they ship as code (broadside/campaigns/content/
builtin.py), so an upgrade brings their newest wording, nothing deletes them, and an emptied
or restored database still has them. `message_templates` holds only the owner's own.

A block is expanded into a draft's body each time the body is read to be frozen (a preview, a
test send, Send), so editing a block changes the drafts that name it; a sent revision keeps
the expanded copy it was frozen with (invariant 8).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import NEVER_REUSE_IDS, Model
from broadside.core.timeutil import utcnow

MAX_TEMPLATE_NAME = 100
MAX_DESCRIPTION = 300
MAX_BLOCK_NAME = 60


class MessageTemplate(Model):
    """An owner's starting point for a broadcast: its words and its design changes."""

    __tablename__ = "message_templates"
    __table_args__ = (UniqueConstraint("name", name="uq_message_templates_name"),
                      NEVER_REUSE_IDS)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(MAX_TEMPLATE_NAME))
    description: Mapped[str] = mapped_column(String(MAX_DESCRIPTION), default="")
    subject: Mapped[str] = mapped_column(String(300), default="")
    preheader: Mapped[str] = mapped_column(String(300), default="")
    body: Mapped[str] = mapped_column(Text, default="")
    body_format: Mapped[str] = mapped_column(String(16), default="markdown",
                                             server_default="markdown")
    editor: Mapped[str] = mapped_column(String(16), default="markdown", server_default="markdown")
    # Colour, width, font, footer over Settings -> Design (broadside/campaigns/content/design.py
    # validates them as Settings does); None: Settings' design.
    design_overrides: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    created_by: Mapped[int | None] = mapped_column(ForeignKey("owners.id", ondelete="SET NULL"))


class ContentBlock(Model):
    """A named piece of a body (a header, a sign-off, a sponsor box), named in bodies as
    `[[block: Name]]` (broadside/campaigns/content/blocks.py)."""

    __tablename__ = "content_blocks"
    __table_args__ = (UniqueConstraint("name", name="uq_content_blocks_name"), NEVER_REUSE_IDS)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(MAX_BLOCK_NAME))
    body: Mapped[str] = mapped_column(Text, default="")
    body_format: Mapped[str] = mapped_column(String(16), default="markdown",
                                             server_default="markdown")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
