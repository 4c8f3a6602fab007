"""The public archive's published issues (broadside.campaigns.archive)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import Model
from broadside.core.timeutil import utcnow


class ArchivedIssue(Model):
    """A broadcast the owner published to its list's public archive: its public copy,
    rendered once when published from the frozen revision with no reader's data (no merge
    values, no unsubscribe link), so the public pages only read it. Unpublishing deletes the
    row; the revision never changes (invariant 8), so the copy never goes stale."""

    __tablename__ = "archived_issues"
    __table_args__ = (Index("ix_archived_issues_list_sent", "list_id", "sent_at"),)

    broadcast_id: Mapped[int] = mapped_column(
        ForeignKey("broadcasts.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    list_id: Mapped[int] = mapped_column(ForeignKey("mailing_lists.id", ondelete="CASCADE"))
    slug: Mapped[str] = mapped_column(String(80))
    subject: Mapped[str] = mapped_column(Text)
    summary: Mapped[str] = mapped_column(Text, default="")  # the preheader, as a reader sees it
    html: Mapped[str] = mapped_column(Text)  # the body, sanitised, merge fields filled neutrally
    sent_at: Mapped[datetime]  # when Send was pressed: the issue's date
    published_at: Mapped[datetime] = mapped_column(default=utcnow)
