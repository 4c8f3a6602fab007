"""An import's upload, kept in the database until its run ends (`import_chunks`).

The web host that receives a CSV and the worker that imports it may be different machines, so
the file's bytes go into the database with the Import row (in the same commit), in chunks of
CHUNK bytes ordered by `seq`: neither side ever holds more than one chunk in memory. The worker
writes them back to a scratch file on its own disk (`spool`, owner-only, deleted when the run
ends) and reads that as before. The bytes are deleted when the import is done or has failed
(`discard`) and go with the Import row if it is deleted (ON DELETE CASCADE).

An import queued before the bytes were kept in the database (revision 0039) has its file on
the disk that received it: `spool` uses it when there are no chunks.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import LargeBinary, delete, func, insert, select
from sqlalchemy.orm import Session

from broadside.core.config import private_folder
from broadside.core.errors import ValidationError
from broadside.core.models import ImportChunk

CHUNK = 1024 * 1024
_CHUNKS = ImportChunk.__table__
GONE = "The import's file is gone; upload the file again."


def keep(session: Session, import_id: int, source: Path) -> None:
    """Copy `source` into the import's chunks, one chunk in memory at a time. Does not
    commit: the caller commits it with the Import row (or nothing)."""
    with open(source, "rb") as raw:
        seq = 0
        while data := raw.read(CHUNK):
            session.execute(insert(_CHUNKS), {"import_id": import_id, "seq": seq, "data": data})
            seq += 1


def has_upload(session: Session, import_id: int, path: Path | None = None) -> bool:
    """Whether the import's bytes are still there (in the database, or at `path`: an upload
    from before revision 0039)."""
    stored = session.scalar(select(_CHUNKS.c.seq).where(_CHUNKS.c.import_id == import_id)
                            .limit(1)) is not None
    return stored or (path is not None and path.is_file())


def head(session: Session, import_id: int, size: int) -> bytes:
    """The first `size` bytes of the upload (at most one chunk's), b"" when there are none."""
    sample = session.scalar(select(func.substr(_CHUNKS.c.data, 1, size, type_=LargeBinary))
                            .where(_CHUNKS.c.import_id == import_id, _CHUNKS.c.seq == 0))
    return bytes(sample or b"")


def spool(session: Session, import_id: int, path: Path) -> Path:
    """Write the stored upload to `path` on this host (readable by its owner only) and return
    it; a ValidationError the owner reads when its bytes are gone."""
    seqs = session.scalars(select(_CHUNKS.c.seq).where(_CHUNKS.c.import_id == import_id)
                           .order_by(_CHUNKS.c.seq)).all()
    if not seqs:
        if path.is_file():  # received before revision 0039, on this disk
            return path
        raise ValidationError(GONE)
    private_folder(path.parent)
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        with os.fdopen(os.open(part, flags, 0o600), "wb") as out:
            for seq in seqs:  # one chunk in memory at a time
                out.write(session.execute(select(_CHUNKS.c.data).where(
                    _CHUNKS.c.import_id == import_id, _CHUNKS.c.seq == seq)).scalar_one())
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return path


def discard(session: Session, import_id: int, *, commit: bool = True) -> None:
    """Delete the import's stored bytes (its run ended, or it failed)."""
    session.execute(delete(_CHUNKS).where(_CHUNKS.c.import_id == import_id))
    if commit:
        session.commit()
