"""Files sent with a message: a broadcast's, an automation step's or a transactional
template's attachments (their ids in the sources' and revisions' `attachment_ids`).

The bytes live in the row: the web app stores them and the worker, perhaps on another
machine, reads them back; nothing depends on a shared disk. An attachment is never changed
after its upload (its id in a frozen revision always means the same bytes); it can be deleted
only while no source or revision names it (broadside.mail.attachment_use).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import NEVER_REUSE_IDS, Model
from broadside.core.timeutil import utcnow

MAX_ATTACHMENT_NAME = 200


class Attachment(Model):
    __tablename__ = "attachments"
    # An id in a frozen revision names these bytes for ever: never given to another file.
    __table_args__ = NEVER_REUSE_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    # The file's name as the reader will see it, cleaned (broadside.mail.attachments.clean_name).
    name: Mapped[str] = mapped_column(String(MAX_ATTACHMENT_NAME))
    # Decided by us from the allowed list and the file's own bytes, never by the upload's word.
    content_type: Mapped[str] = mapped_column(String(127))
    size: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    data: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    uploaded_by: Mapped[int | None] = mapped_column(ForeignKey("owners.id", ondelete="SET NULL"))
