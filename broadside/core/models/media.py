"""The media library: images the owner uploaded, kept in the database.

In the database rather than on a disk: the web app and the worker may run on different
machines, and a backup of the database then holds every image an email points at. A `media`
row says what the image is (its content hash, type, size at 1x, alt text, who uploaded it);
its bytes, one row per variant (`1x`, and `2x` when the original was wide enough), live in
`media_files`, so listing the library never reads an image's bytes.

The SHA-256 is of the file as uploaded: the same file uploaded twice is one row (UNIQUE), and
it names the public URLs (`/media/<sha256>.<ext>`, `/media/<sha256>@2x.<ext>`), whose bytes
never change once stored.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import NEVER_REUSE_IDS, Model
from broadside.core.timeutil import utcnow

MAX_ALT = 1000
MAX_ORIGINAL_NAME = 255
VARIANTS = ("1x", "2x")


class Media(Model):
    __tablename__ = "media"
    __table_args__ = (NEVER_REUSE_IDS,)  # the API names images by id

    id: Mapped[int] = mapped_column(primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    ext: Mapped[str] = mapped_column(String(8))  # png, jpg, gif, webp
    content_type: Mapped[str] = mapped_column(String(32))
    # The 1x image's size in pixels: what an <img>'s width and height say.
    width: Mapped[int]
    height: Mapped[int]
    alt: Mapped[str] = mapped_column(Text, default="")
    original_name: Mapped[str] = mapped_column(String(MAX_ORIGINAL_NAME), default="")
    original_bytes: Mapped[int]  # the file as uploaded
    bytes_1x: Mapped[int]
    bytes_2x: Mapped[int | None]  # None: no 2x (the original was no wider than the 1x)
    has_2x: Mapped[bool] = mapped_column(default=False)
    animated: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    uploaded_by: Mapped[int | None] = mapped_column(
        ForeignKey("owners.id", ondelete="SET NULL"), index=True)


class MediaFile(Model):
    """One variant's bytes; removed with its image."""

    __tablename__ = "media_files"

    media_id: Mapped[int] = mapped_column(ForeignKey("media.id", ondelete="CASCADE"),
                                          primary_key=True)
    variant: Mapped[str] = mapped_column(String(4), primary_key=True)  # "1x" or "2x"
    data: Mapped[bytes] = mapped_column(LargeBinary)
