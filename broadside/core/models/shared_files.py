"""Files every host needs, kept in the database rather than in one host's instance folder.

With web processes and workers on several machines, a file written to one host's disk is
missing on the others; the database is what they all reach (as for the media library and
attachments), and a backup of it then holds these files too.

- `brand_files`: the logo's bytes, by the name its URL carries (`<first 32 hex digits of the
  SHA-256>.<ext>`). Content-addressed: a name's bytes never change, and old logos stay (emails
  already sent show them).
- `import_chunks`: an uploaded CSV waiting for its import, in chunks of about 1 MB ordered by
  `seq`, so a 100 MB file is never one value in memory. Deleted when the import finishes or
  fails, and with its Import row (ON DELETE CASCADE).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import Model
from broadside.core.timeutil import utcnow


class BrandFile(Model):
    __tablename__ = "brand_files"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)  # <hash32>.<ext>
    content_type: Mapped[str] = mapped_column(String(32))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ImportChunk(Model):
    __tablename__ = "import_chunks"

    import_id: Mapped[int] = mapped_column(ForeignKey("imports.id", ondelete="CASCADE"),
                                           primary_key=True)
    seq: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)  # 0, 1, 2, ...
    data: Mapped[bytes] = mapped_column(LargeBinary)
