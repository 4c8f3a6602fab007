"""What an import tells its owner: progress, the rejected rows with the row as uploaded, the
warnings about rows it imported, and the rejected-rows CSV to fix and upload again.

Bounded: an import keeps the first MAX_KEPT_ROWS rejected rows and the first MAX_KEPT_ROWS
warnings (the counts on the Import row go on counting), and a rejected row's fields only when
they add up to at most MAX_KEPT_ROW_CHARS characters. A file of a million bad rows costs a few
megabytes, and the page says when a cap was reached.

The CSV's columns are `rejected_line` and `rejected_reason`, then the file's own header as
uploaded, with each row's fields exactly as read (cells a spreadsheet would run as a formula
get a leading apostrophe, which the importer strips again). The importer ignores the two
report columns (`broadside.audience.transfer.csvfile.REPORT_COLUMNS`), so fixing a value in place
and uploading the downloaded file as it is re-imports exactly the rows that were rejected.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from broadside.audience.transfer.csvfile import HEADER_SNIFF_BYTES, REPORT_COLUMNS
from broadside.audience.transfer.export import safe_cell
from broadside.audience.transfer.people import SMTPUTF8_WARNING
from broadside.audience.transfer.stored import head
from broadside.campaigns.automations.entering import welcome_automations
from broadside.core.errors import NotFound
from broadside.core.i18n import _
from broadside.core.models import Import, ImportRejection

MAX_KEPT_ROWS = 10_000
MAX_KEPT_ROW_CHARS = 4_000
ROW_NOT_KEPT = (f"; the row is longer than {MAX_KEPT_ROW_CHARS:,} characters, so it is not "
                "repeated here (fix it in your file)")
SHOWN_ON_PAGE = 100
CHUNK_ROWS = 1000


def kept_fields(fields: list[str] | None) -> tuple[list[str] | None, str]:
    """(the fields to keep, a note for the reason): long rows are not kept."""
    if fields is None:
        return None, ""
    if sum(len(f) for f in fields) + len(fields) > MAX_KEPT_ROW_CHARS:
        return None, ROW_NOT_KEPT
    return fields, ""


def import_dir(instance_path: str | Path) -> Path:
    return Path(instance_path) / "imports"


def import_path(instance_path: str | Path, import_id: int) -> Path:
    return import_dir(instance_path) / f"{import_id}.csv"


def get_import(session: Session, import_id: int) -> Import:
    record = session.get(Import, import_id)
    if record is None:
        raise NotFound(_("There is no such import."))
    return record


def first_rows(session: Session, import_id: int, kind: str,
               limit: int = SHOWN_ON_PAGE) -> list[ImportRejection]:
    """The first rejected rows (kind "rejected") or warnings (kind "warning"), by line."""
    return list(session.scalars(
        select(ImportRejection).where(ImportRejection.import_id == import_id,
                                      ImportRejection.kind == kind)
        .order_by(ImportRejection.line, ImportRejection.id).limit(limit)
    ))


def smtputf8_rows(session: Session, import_id: int) -> int:
    """The imported rows whose address needs SMTPUTF8 (among the warnings kept)."""
    return session.scalar(
        select(func.count()).select_from(ImportRejection)
        .where(ImportRejection.import_id == import_id, ImportRejection.kind == "warning",
               ImportRejection.reason == SMTPUTF8_WARNING)) or 0


def welcome_series(session: Session, list_id: int | None) -> list[str]:
    """The names of the automations that would welcome someone this list's import adds now
    (none: ticking "send the welcome series" welcomes nobody, and the pages say so)."""
    if list_id is None:
        return []
    return [automation.name for automation in welcome_automations(session, list_id)]


def empty_lines(session: Session, import_id: int, limit: int = 10) -> list[int]:
    """The lines of the first blank rows the import skipped."""
    return [row.line for row in first_rows(session, import_id, "empty", limit=limit)]


def columns_of(record: Import) -> list[str]:
    """The file's own header as uploaded (empty for an import from before it was kept)."""
    return list((record.header or {}).get("columns") or [])


def rejections_csv(session: Session, record: Import) -> Iterator[str]:
    """The kept rejected rows as CSV, a chunk at a time (see the module docstring)."""
    delimiter = (record.header or {}).get("delimiter") or ","

    def text(rows: list[list[str]]) -> str:
        buffer = io.StringIO()
        csv.writer(buffer, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
        return buffer.getvalue()

    yield text([[*REPORT_COLUMNS, *[safe_cell(c) for c in columns_of(record)]]])
    last = 0
    while True:  # keyset pages by id: no long-lived cursor, no whole result in memory
        rows = session.execute(
            select(ImportRejection.id, ImportRejection.line, ImportRejection.reason,
                   ImportRejection.fields)
            .where(ImportRejection.import_id == record.id, ImportRejection.kind == "rejected",
                   ImportRejection.id > last)
            .order_by(ImportRejection.id).limit(CHUNK_ROWS)
        ).all()
        if not rows:
            break
        yield text([[str(line), safe_cell(reason), *[safe_cell(f) for f in fields or []]]
                    for _, line, reason, fields in rows])
        last = rows[-1][0]
    session.rollback()  # end the read transaction the generator kept open


def estimated_rows(sample: bytes, size_bytes: int) -> int | None:
    """Rows in the file, estimated from its first 64 KB (for the progress bar)."""
    lines = sample.count(b"\n")
    if not lines:
        return None
    if len(sample) >= size_bytes:
        return max(lines - 1, 1)
    return max(int(size_bytes / (len(sample) / lines)) - 1, 1)


@dataclass
class Progress:
    record: Import
    estimated_rows: int | None  # the exact total once counted (`Import.total_rows`)

    @property
    def exact(self) -> bool:
        return self.record.total_rows is not None

    @property
    def finished(self) -> bool:
        return self.record.status in ("done", "failed")

    @property
    def percent(self) -> int | None:
        if self.finished:
            return 100
        if self.record.status == "asking":
            return min(99, int(100 * self.record.asked / max(self.record.imported, 1)))
        if not self.estimated_rows:
            return None
        return min(99, int(100 * self.record.processed_rows / self.estimated_rows))

    @property
    def skipped(self) -> int:
        return self.record.skipped_unsubscribed + self.record.skipped_suppressed

    @property
    def rejected_rows_capped(self) -> bool:
        return self.record.rejected > MAX_KEPT_ROWS

    @property
    def warnings_capped(self) -> bool:
        return self.record.warnings > MAX_KEPT_ROWS


def progress(session: Session, import_id: int, instance_path: str | Path) -> Progress:
    """The import's progress: against the exact row count once the run has counted the file
    (its first step), an estimate from the first 64 KB before that."""
    record = get_import(session, import_id)
    session.refresh(record)
    total = record.total_rows
    if total is None and record.status in ("queued", "running"):
        total = estimated_rows(head(session, import_id, HEADER_SNIFF_BYTES), record.size_bytes)
    return Progress(record, total)
