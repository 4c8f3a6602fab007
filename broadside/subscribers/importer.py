"""CSV import into one list, streamed from a file on disk and written in batches.

The upload is copied to disk in chunks (never held in memory), checked (a UTF-8 CSV with a
header that names an `email` column, not empty, not over MAX_IMPORT_BYTES) before anything is
written, then read record by record by the csv module and upserted 1,000 rows per
transaction with INSERT ... ON CONFLICT DO NOTHING. Bad records are rejected one by one with
their line number; the good ones still import.

Counting: `imported` is a person newly put on the list. `updated` is every other accepted row:
already on the list (their name and attributes are refreshed, their status is kept, so an
unsubscribed person stays unsubscribed), or suppressed (never added to a list by an import).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from redis.exceptions import RedisError
from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from broadside.automations.entering import enter_joined
from broadside.config import private_folder
from broadside.db import rowcount
from broadside.errors import DomainError, NotFound, ValidationError
from broadside.models import Event, Import, ImportRejection, MailingList, Subscriber, Subscription
from broadside.subscribers.csvfile import (
    HEADER_SNIFF_BYTES,
    EmailNormaliser,
    check_file,
    parse_header,
    records,
    validate_record,
)
from broadside.subscribers.service import dialect_insert
from broadside.timeutil import utcnow

BATCH_SIZE = 1000
CHUNK = 1024 * 1024
log = logging.getLogger(__name__)


class FileTooLarge(DomainError):
    status_code = 413


def import_dir(instance_path: str | Path) -> Path:
    return Path(instance_path) / "imports"


def import_path(instance_path: str | Path, import_id: int) -> Path:
    return import_dir(instance_path) / f"{import_id}.csv"


def receive_upload(session: Session, list_id: int, filename: str, stream: IO[bytes],
                   dest_dir: Path, max_bytes: int, welcome: bool = False) -> Import:
    """Copy an upload to disk and check it; only a usable file creates an Import row."""
    if session.get(MailingList, list_id) is None:
        raise NotFound("There is no such list.")
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
            raise ValidationError("The file is empty.")
        check_file(part)
        record = Import(list_id=list_id, filename=(filename or "upload.csv")[:255],
                        status="queued", size_bytes=size, welcome=welcome)
        session.add(record)
        session.commit()
        part.rename(import_path(dest_dir.parent, record.id))
        return record
    finally:
        part.unlink(missing_ok=True)


def _human(size: int) -> str:
    return f"{size / 1024 / 1024:.0f} MB" if size >= 1024 * 1024 else f"{size:,} bytes"


@dataclass
class Tally:
    processed: int = 0
    imported: int = 0
    updated: int = 0
    rejected: int = 0


def run_import(session: Session, import_id: int, path: Path,
               on_batch: Callable[[Tally], None] | None = None) -> Import:
    """Process a stored upload; updates the Import row after every batch and at the end."""
    record = session.get(Import, import_id)
    if record is None:
        raise NotFound("There is no such import.")
    list_id = record.list_id
    if list_id is None or session.get(MailingList, list_id) is None:
        raise ValidationError("The list this import was for has been deleted.")
    with open(path, "rb") as raw:
        header = parse_header(raw.readline(HEADER_SNIFF_BYTES))
    tally = Tally()
    normalise = EmailNormaliser()
    seen: dict[str, int] = {}
    batch: list[tuple[str, str, dict[str, str]]] = []
    rejections: list[dict[str, Any]] = []

    def flush() -> None:
        if batch:
            imported = _write_batch(session, list_id, import_id, batch, welcome=record.welcome)
            tally.imported += imported
            tally.updated += len(batch) - imported
            batch.clear()
        if rejections:
            session.execute(ImportRejection.__table__.insert(), rejections)
            rejections.clear()
        session.execute(
            update(Import).where(Import.id == import_id).values(
                processed_rows=tally.processed, imported=tally.imported, updated=tally.updated,
                rejected=tally.rejected,
            )
        )
        session.commit()
        if on_batch:
            on_batch(tally)

    for line, fields, reason in records(path):
        tally.processed += 1
        if fields is not None:
            try:
                email, name, attributes = validate_record(header, fields, normalise)
            except ValidationError as exc:
                reason = exc.message
            else:
                first = seen.get(email)
                if first is not None:
                    reason = f"duplicate of line {first} (the same address)"
                else:
                    seen[email] = line
                    batch.append((email, name, attributes))
        if reason is not None:
            tally.rejected += 1
            rejections.append({"import_id": import_id, "line": line, "reason": reason})
        if len(batch) >= BATCH_SIZE or len(rejections) >= BATCH_SIZE:
            flush()
    flush()
    session.execute(
        update(Import).where(Import.id == import_id)
        .values(status="done", finished_at=utcnow())
    )
    session.commit()
    session.refresh(record)
    return record


def _write_batch(session: Session, list_id: int, import_id: int,
                 batch: list[tuple[str, str, dict[str, str]]], *, welcome: bool = False) -> int:
    """Upsert one batch; returns how many people were newly put on the list. With `welcome`,
    exactly the people this batch put on the list enter its welcome automations, in the
    batch's own transaction: a crash mid-import leaves nobody welcomed who was not imported
    and nobody imported who should have been welcomed (a resumed import finds them on the
    list already, so it neither re-adds nor re-welcomes them)."""
    now = utcnow()
    wanted = {e: (n, a) for e, n, a in batch}
    known = {
        row.email: row for row in session.execute(
            select(Subscriber.id, Subscriber.email, Subscriber.name, Subscriber.attributes,
                   Subscriber.suppression).where(Subscriber.email.in_(list(wanted)))
        )
    }
    fresh = [email for email in wanted if email not in known]
    joining: list[int] = []
    if fresh:
        # ON CONFLICT DO NOTHING: a sign-up that created the same address a moment ago wins.
        session.execute(
            dialect_insert(session, Subscriber.__table__).on_conflict_do_nothing(
                index_elements=["email"]
            ),
            [{"email": e, "name": wanted[e][0], "attributes": wanted[e][1], "created_at": now,
              "soft_bounce_count": 0} for e in fresh],
        )
        joining.extend(session.scalars(select(Subscriber.id).where(Subscriber.email.in_(fresh))))
    if known:
        on_list = set(session.scalars(
            select(Subscription.subscriber_id).where(
                Subscription.list_id == list_id,
                Subscription.subscriber_id.in_([row.id for row in known.values()]),
            )
        ))
        changes = []
        for row in known.values():
            name, attributes = wanted[row.email]
            new_name = name or row.name
            new_attributes = {**(row.attributes or {}), **attributes}
            if new_name != row.name or new_attributes != (row.attributes or {}):
                changes.append({"b_id": row.id, "b_name": new_name, "b_attributes": new_attributes})
            # An import never re-activates anyone: existing subscriptions keep their status and
            # suppressed people are not put on lists.
            if row.id not in on_list and row.suppression is None:
                joining.append(row.id)
        if changes:
            table = Subscriber.__table__
            session.execute(
                update(table).where(table.c.id == bindparam("b_id"))
                .values(name=bindparam("b_name"), attributes=bindparam("b_attributes")),
                changes,
            )
    if joining:
        session.execute(
            dialect_insert(session, Subscription.__table__).on_conflict_do_nothing(
                index_elements=["subscriber_id", "list_id"]
            ),
            [{"subscriber_id": sid, "list_id": list_id, "status": "active", "created_at": now}
             for sid in joining],
        )
        session.execute(
            Event.__table__.insert(),
            [{"kind": "subscribed", "subscriber_id": sid, "list_id": list_id, "created_at": now,
              "detail": f"imported (import {import_id})"} for sid in joining],
        )
        if welcome:
            # The subscriptions this batch made carry its exact timestamp (a sign-up racing
            # the import for the same person keeps its own row and its own welcome).
            added = list(session.scalars(select(Subscription.subscriber_id).where(
                Subscription.list_id == list_id, Subscription.subscriber_id.in_(joining),
                Subscription.created_at == now)))
            enter_joined(session, list_id, added, source="import", now=now)
    return len(joining)


def fail_import(session: Session, import_id: int, message: str) -> None:
    session.rollback()
    session.execute(
        update(Import).where(Import.id == import_id)
        .values(status="failed", error=message[:2000], finished_at=utcnow())
    )
    session.commit()


def claim(session: Session, import_id: int) -> bool:
    """queued -> running, once: a duplicated job finds it claimed and does nothing."""
    result = session.execute(
        update(Import).where(Import.id == import_id, Import.status == "queued")
        .values(status="running")
    )
    session.commit()
    return bool(rowcount(result))


def process(session: Session, import_id: int, path: Path) -> Import | None:
    """Claim and run a stored import, recording any failure on the row; deletes the file.

    Returns None when another run already claimed it (a duplicated job does nothing).
    """
    if not claim(session, import_id):
        return None
    try:
        run_import(session, import_id, path)
    except ValidationError as exc:
        fail_import(session, import_id, exc.message)
    except Exception as exc:  # the owner sees "failed" instead of "running" forever
        log.exception("import %s failed", import_id)
        fail_import(session, import_id, f"The import stopped unexpectedly ({type(exc).__name__}); "
                                        "the rows before the failure were imported.")
    finally:
        path.unlink(missing_ok=True)
    return session.get(Import, import_id)


def get_import(session: Session, import_id: int) -> Import:
    record = session.get(Import, import_id)
    if record is None:
        raise NotFound("There is no such import.")
    return record


def first_rejections(session: Session, import_id: int, limit: int = 100) -> list[ImportRejection]:
    return list(session.scalars(
        select(ImportRejection).where(ImportRejection.import_id == import_id)
        .order_by(ImportRejection.line, ImportRejection.id).limit(limit)
    ))


def estimated_rows(path: Path, size_bytes: int) -> int | None:
    """Rows in the file, estimated from its first 64 KB (for the progress bar)."""
    try:
        with open(path, "rb") as raw:
            sample = raw.read(HEADER_SNIFF_BYTES)
    except OSError:
        return None
    lines = sample.count(b"\n")
    if not lines:
        return None
    if len(sample) >= size_bytes:
        return max(lines - 1, 1)
    return max(int(size_bytes / (len(sample) / lines)) - 1, 1)


@dataclass
class Progress:
    record: Import
    estimated_rows: int | None

    @property
    def finished(self) -> bool:
        return self.record.status in ("done", "failed")

    @property
    def percent(self) -> int | None:
        if self.finished:
            return 100
        if not self.estimated_rows:
            return None
        return min(99, int(100 * self.record.processed_rows / self.estimated_rows))


def progress(session: Session, import_id: int, instance_path: str | Path) -> Progress:
    record = get_import(session, import_id)
    session.refresh(record)
    estimate = None
    if record.status in ("queued", "running"):
        estimate = estimated_rows(import_path(instance_path, import_id), record.size_bytes)
    return Progress(record, estimate)


def start_import(session: Session, list_id: int, filename: str, stream: IO[bytes], *,
                 instance_path: str | Path, max_bytes: int, inline_max_bytes: int,
                 enqueue: Callable[[int], Any], welcome: bool = False) -> Import:
    """Receive an upload, then run it now (small files) or hand it to the background job.
    `welcome`: the people it adds enter the list's welcome automations (off by default, so
    importing an existing audience never mails it)."""
    record = receive_upload(session, list_id, filename, stream, import_dir(instance_path),
                            max_bytes, welcome)
    path = import_path(instance_path, record.id)
    if record.size_bytes <= inline_max_bytes:
        process(session, record.id, path)
    else:
        try:
            enqueue(record.id)
        except RedisError:
            path.unlink(missing_ok=True)
            fail_import(session, record.id, "The import could not be queued (Redis is not "
                                            "answering). Try again in a moment.")
    return get_import(session, record.id)


def import_now(session: Session, list_id: int, filename: str, stream: IO[bytes], *,
               instance_path: str | Path, max_bytes: int,
               welcome: bool = False) -> tuple[Import, list[ImportRejection]]:
    """Receive and process an upload before returning (the API's import)."""
    record = receive_upload(session, list_id, filename, stream, import_dir(instance_path),
                            max_bytes, welcome)
    process(session, record.id, import_path(instance_path, record.id))
    record = get_import(session, record.id)
    if record.status == "failed":
        raise ValidationError(record.error or "The import failed.")
    rejections = list(session.scalars(
        select(ImportRejection).where(ImportRejection.import_id == record.id)
        .order_by(ImportRejection.line, ImportRejection.id)
    ))
    return record, rejections
