"""CSV import into one list, streamed from a file on disk and written in batches.

The upload is checked, then kept in the database with its row (`upload`, `stored`). A
run counts the file's records first (`Import.total_rows`: the progress bar's exact
total), then reads them one by one with the csv module and writes BATCH_SIZE accepted rows per
transaction, set-based (`import_batch`); the addresses already read stay on disk
(`import_seen`), so memory does not grow with the file. The reading and checking run in a
thread one batch ahead of the writing (`readahead`), which is all that touches the database:
while PostgreSQL works on a batch, the next one is read. Bad records are rejected one by one with
their line number and the row as uploaded (`import_report` keeps and shows them); the good
ones still import. A name longer than the column is shortened, with a warning.

The owner says how these people agreed to receive mail (`consent`, never assumed): "opted_in"
adds them `active`; "confirm" adds them `unconfirmed`, and after the rows are written the
import's background job asks each one to confirm (`confirmations.ask_to_confirm`: the
sign-up form's email, sent by the worker). Either way nobody is downgraded or re-asked: people
already on the list keep their status.

Counting: `imported` is a person newly put on the list. `updated` is someone already on it
and subscribed or waiting for confirmation (name and attributes refreshed, status kept).
`skipped_unsubscribed` and `skipped_suppressed` are accepted rows left off the list: they
unsubscribed from it, or their address is suppressed (bounced, complained, blocked); their
name and attributes are refreshed all the same. A row of an export that says the person left
(`status` unsubscribed) or is suppressed is counted so too and written nowhere: an exported
file imported again, here or into another list, never puts back anyone who left. `empty_rows`
are the blank lines, skipped (the first are kept with their line numbers, kind "empty").
`welcomed`: the people a `welcome` import entered into a welcome series (none when the list has
no enabled welcome automation, which the form and the result page say).

`Import.status` moves only through `broadside.audience.transfer.lifecycle` (queued -> running
-> (asking ->) done, or failed; each move a guarded UPDATE); this module calls its moves.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from redis.exceptions import RedisError
from sqlalchemy import update
from sqlalchemy.orm import Session

from broadside.audience.signup import Links
from broadside.audience.transfer import lifecycle, stored
from broadside.audience.transfer import report as import_report
from broadside.audience.transfer.batch import refresh_statistics, write_batch
from broadside.audience.transfer.confirmations import ask_to_confirm
from broadside.audience.transfer.csvfile import (
    HEADER_SNIFF_BYTES,
    Header,
    count_records,
    parse_header,
    records,
)
from broadside.audience.transfer.people import Accepted, EmailNormaliser, validate_record
from broadside.audience.transfer.readahead import ReadAhead
from broadside.audience.transfer.report import (
    MAX_KEPT_ROWS,
    get_import,
    import_dir,
    import_path,
    kept_fields,
)
from broadside.audience.transfer.seen import SeenAddresses
from broadside.audience.transfer.upload import CONSENTS as CONSENTS
from broadside.audience.transfer.upload import Consent as Consent
from broadside.audience.transfer.upload import FileTooLarge as FileTooLarge
from broadside.audience.transfer.upload import receive_upload
from broadside.core.errors import DomainError, NotFound, ValidationError
from broadside.core.i18n import _
from broadside.core.models import Import, ImportRejection, MailingList
from broadside.delivery.queues import Jobs

BATCH_SIZE = 5000
log = logging.getLogger(__name__)


@dataclass
class Tally:
    processed: int = 0
    imported: int = 0
    updated: int = 0
    skipped_unsubscribed: int = 0
    skipped_suppressed: int = 0
    rejected: int = 0
    warnings: int = 0
    empty_rows: int = 0
    welcomed: int = 0

    def counts(self) -> dict[str, int]:
        return {"processed_rows": self.processed, "imported": self.imported,
                "updated": self.updated, "skipped_unsubscribed": self.skipped_unsubscribed,
                "skipped_suppressed": self.skipped_suppressed, "rejected": self.rejected,
                "warnings": self.warnings, "empty_rows": self.empty_rows,
                "welcomed": self.welcomed}


# (line, kind, reason, the fields as uploaded or None): a row for the import's report.
Note = tuple[int, str, str, list[str] | None]


def rejection(header: Header, line: int, reason: str, fields: list[str] | None) -> Note:
    original, cut = kept_fields(None if fields is None else header.original(fields))
    return (line, "rejected", reason + cut, original)


@dataclass
class Chunk:
    """A batch read from the file: the rows accepted so far (up to BATCH_SIZE), the rows
    rejected while reading them, and the counts from the top of the file to its last row."""

    pending: list[tuple[int, Accepted, list[str]]]
    found: list[Note]
    processed: int
    rejected: int
    empty: int = 0


def read_chunks(path: Path, header: Header) -> Iterator[Chunk]:
    """The file's records read, checked and cut into batches; the last chunk may be empty
    (it carries the final counts). Touches no database: it can run in another thread."""
    normalise = EmailNormaliser()
    pending: list[tuple[int, Accepted, list[str]]] = []
    found: list[Note] = []
    processed = rejected = empty = 0
    blank: list[int] = []
    for line, fields, reason in records(path, on_blank=blank.append):
        if blank:
            found.extend((at, "empty", "an empty row", None) for at in blank)
            empty += len(blank)
            blank.clear()
        processed += 1
        if fields is not None and reason is None:
            try:
                pending.append((line, validate_record(header, fields, normalise), fields))
            except ValidationError as exc:
                reason = exc.message
        if reason is not None:
            rejected += 1
            found.append(rejection(header, line, reason, fields))
        if len(pending) >= BATCH_SIZE or len(found) >= BATCH_SIZE:
            yield Chunk(pending, found, processed, rejected, empty)
            pending, found = [], []
    found.extend((at, "empty", "an empty row", None) for at in blank)
    yield Chunk(pending, found, processed, rejected, empty + len(blank))


def run_import(session: Session, import_id: int, path: Path,
               on_batch: Callable[[Tally], None] | None = None) -> Import:
    """Process a stored upload; updates the Import row after every batch and at the end.

    Memory stays flat whatever the file's size: the file is streamed, a batch of BATCH_SIZE
    rows is held at a time, and the addresses already read (for "duplicate of line N") are
    kept on disk (`import_seen`). The first step counts the file's rows (CSV-aware, as the
    import reads them) so the progress bar is exact.
    """
    record = session.get(Import, import_id)
    if record is None:
        raise NotFound(_("There is no such import."))
    list_id = record.list_id
    if list_id is None or session.get(MailingList, list_id) is None:
        raise ValidationError(_("The list this import was for has been deleted."))
    with open(path, "rb") as raw:
        header = parse_header(raw.readline(HEADER_SNIFF_BYTES))
    consent, welcome = record.consent, record.welcome
    if record.total_rows is None:
        session.execute(update(Import).where(Import.id == import_id)
                        .values(total_rows=count_records(path)))
        session.commit()
    tally = Tally()
    # (line, kind, reason, fields): sorted by line at each flush, so the kept rows are the
    # first ones of the file whatever order they were found in.
    found: list[Note] = []
    # Rows kept so far, by kind. A run after a crash reads the file again from the top, so
    # what an earlier run kept goes (in the first batch's transaction).
    kept = {"rejected": 0, "warning": 0, "empty": 0}
    session.execute(ImportRejection.__table__.delete().where(
        ImportRejection.__table__.c.import_id == import_id))
    seen = SeenAddresses(path.with_suffix(".seen"))
    batches = 0
    grew = False  # anyone added to the tables since their statistics were last refreshed
    duplicates = 0

    def flush(chunk: Chunk) -> None:
        nonlocal batches, grew, duplicates
        found.extend(chunk.found)
        if chunk.pending:
            first: dict[str, int] = {}  # each address's first line in this batch
            for at, accepted, _ in chunk.pending:
                if accepted.email not in first:
                    first[accepted.email] = at
            earlier = seen.add_new(first)
            batch: list[tuple[str, str, dict[str, str]]] = []
            settings: dict[tuple[str, str], list[str]] = {}  # language tags, zones: whose
            for at, accepted, row in chunk.pending:
                was = earlier.get(accepted.email)
                if was is None and first[accepted.email] != at:
                    was = first[accepted.email]
                if was is not None:
                    duplicates += 1
                    found.append(rejection(header, at, f"duplicate of line {was} (the same address)",
                                           row))
                    continue
                if accepted.suppression or accepted.status == "unsubscribed":
                    # The file says they left or are suppressed: never put on the list.
                    tally.skipped_suppressed += bool(accepted.suppression)
                    tally.skipped_unsubscribed += not accepted.suppression
                    continue
                batch.append((accepted.email, accepted.name, accepted.attributes))
                for setting in accepted.settings():
                    settings.setdefault(setting, []).append(accepted.email)
                for warning in accepted.warnings:
                    tally.warnings += 1
                    found.append((at, "warning", warning, None))
            batches += 1
            # Batches 1, 2, 4, 8...: the tables grew (the first: whatever came before). Not
            # when nobody was added since the last time (a re-import): nothing grew.
            if batches & (batches - 1) == 0 and (batches == 1 or grew):
                refresh_statistics(session)
                grew = False
            written = write_batch(session, list_id, import_id, batch, consent=consent,
                                  welcome=welcome, settings=settings)
            grew = grew or written["imported"] > 0
            for name, value in written.items():
                setattr(tally, name, getattr(tally, name) + value)
        tally.processed = chunk.processed
        tally.rejected = chunk.rejected + duplicates
        tally.empty_rows = chunk.empty
        notes = []
        for at, kind, reason, kept_row in sorted(found, key=lambda note: note[0]):
            if kept[kind] < MAX_KEPT_ROWS:
                kept[kind] += 1
                notes.append({"import_id": import_id, "line": at, "reason": reason,
                              "kind": kind, "fields": kept_row})
        found.clear()
        if notes:
            session.execute(ImportRejection.__table__.insert(), notes)
        session.execute(update(Import).where(Import.id == import_id).values(**tally.counts()))
        session.commit()
        if on_batch:
            on_batch(tally)

    # The objects alive before the run (the app, its modules: most of the heap) are left out
    # of the garbage collector's full passes while it runs: the rows it reads allocate enough
    # to start one every few thousand rows, and each scanned the whole heap (a third of the
    # reading time). Only when nothing else froze the heap, so unfreezing restores it.
    froze = gc.isenabled() and gc.get_freeze_count() == 0
    if froze:
        gc.freeze()
    try:
        # The file is read and checked one batch ahead, in a thread, while this one writes
        # the batch before: on PostgreSQL the database's work and the reading overlap.
        with ReadAhead(read_chunks(path, header)) as chunks:
            for chunk in chunks:
                flush(chunk)
    finally:
        if froze:
            gc.unfreeze()
        seen.close()
    # An import that asks people to confirm has its emails to queue before it is done.
    lifecycle.move(session, import_id, "ask" if consent == "confirm" else "finish")
    session.commit()
    session.refresh(record)
    return record


def fail_import(session: Session, import_id: int, message: str) -> None:
    """An unfinished import -> failed, with the message the owner reads."""
    session.rollback()
    lifecycle.move(session, import_id, "fail", error=message)
    stored.discard(session, import_id)


def claim(session: Session, import_id: int) -> bool:
    """queued -> running, once: a duplicated job finds it claimed and does nothing."""
    claimed = lifecycle.move(session, import_id, "claim")
    session.commit()
    return claimed


def process(session: Session, import_id: int, path: Path) -> Import | None:
    """Claim and run a stored import, recording any failure on the row; deletes its bytes.

    Returns None when another run already claimed it (a duplicated job does nothing). An
    import asking people to confirm ends `asking`: its emails are `ask`'s to queue.
    """
    if not claim(session, import_id):
        return None
    try:
        run_import(session, import_id, stored.spool(session, import_id, path))
    except ValidationError as exc:
        fail_import(session, import_id, exc.message)
    except Exception:  # the owner sees "failed" instead of "running" forever
        log.exception("import %s failed", import_id)
        fail_import(session, import_id, "The import stopped on an unexpected error (its "
                                        "details are in the worker's log); the rows before "
                                        "the failure were imported.")
    finally:
        path.unlink(missing_ok=True)
    stored.discard(session, import_id)  # done, asking or failed: the bytes are not needed
    return session.get(Import, import_id)


def ask(session: Session, import_id: int, links: Links, jobs: Jobs) -> None:
    """An `asking` import: queue the confirmation email of everyone it added, then `done`.

    Safe to run twice or side by side (each person is claimed: `confirmations`); the worker
    runs it after the rows are written, never a web request.
    """
    record = get_import(session, import_id)
    if record.status != lifecycle.ASKING:
        return
    list_id = record.list_id
    session.commit()

    def counted(queued: int) -> None:
        session.execute(update(Import).where(Import.id == import_id)
                        .values(asked=Import.asked + queued))
        session.commit()

    try:
        if list_id is not None:
            ask_to_confirm(session, list_id, links, jobs, counted)
    except Exception:
        log.exception("import %s: asking to confirm failed", import_id)
        fail_import(session, import_id, (
            "The confirmation emails stopped being queued (the details are in the worker's "
            "log). The "
            "people were imported; to ask the rest, import the same file again with "
            "\"Ask them to confirm\" (nobody is asked twice)."))
        return
    lifecycle.move(session, import_id, "asked")
    session.commit()


def start_import(session: Session, list_id: int, filename: str, stream: IO[bytes], *,
                 instance_path: str | Path, max_bytes: int, inline_max_bytes: int,
                 enqueue: Callable[[int], Any], consent: Consent,
                 welcome: bool = False) -> Import:
    """Receive an upload, then run it now (small files) or hand it to the background job.
    `welcome`: the people it adds enter the list's welcome automations (off by default, so
    importing an existing audience never mails it). An import that asks people to confirm
    always goes to the background job, which queues their emails once the rows are in."""
    record = receive_upload(session, list_id, filename, stream, import_dir(instance_path),
                            max_bytes, consent=consent, welcome=welcome)
    path = import_path(instance_path, record.id)
    if record.size_bytes <= inline_max_bytes and consent == "opted_in":
        process(session, record.id, path)
    else:
        try:
            enqueue(record.id)
        except RedisError:
            fail_import(session, record.id, "The import could not be queued (Redis is not "
                                            "answering). Try again in a moment.")
    return get_import(session, record.id)


def import_now(session: Session, list_id: int, filename: str, stream: IO[bytes], *,
               instance_path: str | Path, max_bytes: int, consent: Consent,
               enqueue: Callable[[int], Any], inline_max_bytes: int | None = None,
               welcome: bool = False) -> tuple[Import, list[ImportRejection] | None]:
    """Receive an upload; process it before returning (the API's import) when it is at most
    `inline_max_bytes` (None: any size), else hand it to the background job and return the
    queued import with None for the rejections (the API answers 202 and the client polls).

    An import processed here that asks people to confirm hands their emails to the
    background job (`ask`); if Redis is not answering, the worker finds the import `asking`
    when it starts."""
    record = receive_upload(session, list_id, filename, stream, import_dir(instance_path),
                            max_bytes, consent=consent, welcome=welcome)
    if inline_max_bytes is not None and record.size_bytes > inline_max_bytes:
        try:
            enqueue(record.id)
        except RedisError:
            fail_import(session, record.id, "The import could not be queued (Redis is not "
                                            "answering). Try again in a moment.")
            raise ServiceUnavailable("The import could not be queued (Redis is not "
                                     "answering). Try again in a moment.") from None
        return get_import(session, record.id), None
    process(session, record.id, import_path(instance_path, record.id))
    record = get_import(session, record.id)
    if record.status == lifecycle.FAILED:
        raise ValidationError(record.error or "The import failed.")
    if record.status == lifecycle.ASKING:
        try:
            enqueue(record.id)
        except RedisError:
            log.warning("import %s: the confirmation emails wait for the worker's restart",
                        record.id)
    return record, import_report.first_rows(session, record.id, "rejected",
                                            limit=MAX_KEPT_ROWS)


class ServiceUnavailable(DomainError):
    status_code = 503
