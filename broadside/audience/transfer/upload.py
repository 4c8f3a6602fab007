"""Receiving an import's upload: copied to a scratch file in chunks (never held in memory) and
checked (a UTF-8 CSV with a header that names an `email` column, not empty, not over the limit)
before its Import row is created; its bytes then go into the database with the row, in one
commit (`stored`: the worker may run on another host), and the scratch file is deleted."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import IO, Literal, get_args

from sqlalchemy.orm import Session

from broadside.audience.transfer import lifecycle, stored
from broadside.audience.transfer.csvfile import check_file
from broadside.core.config import private_folder
from broadside.core.errors import DomainError, NotFound, ValidationError
from broadside.core.i18n import _
from broadside.core.models import Import, MailingList

CHUNK = 1024 * 1024

Consent = Literal["opted_in", "confirm"]
CONSENTS: tuple[Consent, ...] = get_args(Consent)


class FileTooLarge(DomainError):
    status_code = 413


def receive_upload(session: Session, list_id: int, filename: str, stream: IO[bytes],
                   dest_dir: Path, max_bytes: int, *, consent: Consent,
                   welcome: bool = False) -> Import:
    """Copy an upload to `dest_dir` (scratch) and check it; only a usable file creates an
    Import row, which is committed with the file's bytes."""
    if consent not in CONSENTS:
        raise ValidationError(_("Say how these people agreed to receive mail."), field="consent")
    if session.get(MailingList, list_id) is None:
        raise NotFound(_("There is no such list."), field="list_id")
    private_folder(dest_dir)
    part = dest_dir / f"upload-{uuid.uuid4().hex}.part"
    try:
        size = 0
        # A list of people's addresses: readable by the owner only.
        with os.fdopen(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
            while chunk := stream.read(CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise FileTooLarge(
                        f"The file is larger than the import limit of {_human(max_bytes)}."
                    )
                out.write(chunk)
        if size == 0:
            raise ValidationError(_("The file is empty."))
        header = check_file(part)
        record = Import(list_id=list_id, filename=(filename or "upload.csv")[:255],
                        status=lifecycle.INITIAL.value, size_bytes=size, welcome=welcome,
                        consent=consent,
                        header={"delimiter": header.delimiter,
                                "columns": header.original_columns})
        session.add(record)
        session.flush()
        stored.keep(session, record.id, part)
        session.commit()
        return record
    finally:
        part.unlink(missing_ok=True)


def _human(size: int) -> str:
    return f"{size / 1024 / 1024:.0f} MB" if size >= 1024 * 1024 else f"{size:,} bytes"
