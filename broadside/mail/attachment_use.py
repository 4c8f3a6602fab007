"""Where attachments are used: the ids a broadcast, an automation step or a transactional
template names (checked when it is saved), the refusal to delete one still named, and the
files the worker attaches to every copy of a revision.

A source's `attachment_ids` is checked when saved: every id an attachment that exists, none
twice, at most MAX_COUNT, and MAX_TOTAL bytes in all (the numbers said). Freezing copies the
list into the revision (broadside.campaigns.content.bodies), and what a revision names is
what its copies carry. An attachment named by any source, revision or queued message cannot
be deleted (409), so a frozen revision never loses a file. (The use is read, then the row
deleted: a save naming the file in between would keep an id whose file is gone, which the
worker leaves out with a line in its log rather than failing every copy.)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.errors import Conflict, ValidationError
from broadside.core.models import (
    Attachment,
    AutomationRevision,
    AutomationStep,
    Broadcast,
    Revision,
    TransactionalMessage,
    TransactionalTemplate,
    TransactionalTemplateRevision,
)
from broadside.core.models.sending import BroadcastStatus
from broadside.mail.attachments import MAX_COUNT, MAX_TOTAL, get_attachment, megabytes
from broadside.mail.mime import MailAttachment

FIELD = "attachments"
log = logging.getLogger("broadside.worker")
# Every table whose rows name attachments by id.
_NAMERS: tuple[Any, ...] = (Broadcast, AutomationStep, TransactionalTemplate, Revision,
                            AutomationRevision, TransactionalTemplateRevision,
                            TransactionalMessage)


def checked_ids(session: Session, value: object, *, where: str = "",
                field: str = FIELD) -> list[int]:
    """`value` (a list of ids, as the API and the forms give it) as the ids to save, or a
    ValidationError naming the first bad one, or the total over MAX_TOTAL with the numbers.
    `where`: what the message is about ("Step 2: "). Ids given twice count once; none is `[]`
    (null is refused: the document says a list)."""
    if not isinstance(value, list | tuple):
        raise ValidationError(_said(where, "attachments must be a list of attachment ids."),
                              field=field)
    ids: list[int] = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or not 0 < item < 2**31:
            shown = json.dumps(item)[:40]
            raise ValidationError(_said(where, f"{field} holds {shown}, which is not an "
                                               "attachment id."), field=field)
        if item not in ids:
            ids.append(item)
    if len(ids) > MAX_COUNT:
        raise ValidationError(_said(where, f"a message carries at most {MAX_COUNT} "
                                           "attachments."), field=field)
    sizes: dict[int, int] = {row.id: row.size for row in session.execute(
        select(Attachment.id, Attachment.size).where(Attachment.id.in_(ids)))} if ids else {}
    missing = next((i for i in ids if i not in sizes), None)
    if missing is not None:
        raise ValidationError(_said(where, f"there is no attachment {missing}."), field=field)
    total = sum(sizes.values())
    if total > MAX_TOTAL:
        raise ValidationError(_said(where, f"the attachments come to {megabytes(total)}; a "
                                           f"message carries at most {megabytes(MAX_TOTAL)} "
                                           "in all."), field=field)
    return ids


def _said(where: str, text: str) -> str:
    return f"{where}{text}" if where else text[:1].upper() + text[1:]


def room_for(session: Session, ids: Sequence[int], size: int) -> None:
    """Refuse adding a file of `size` bytes to a message already carrying `ids`, when the
    total would pass MAX_TOTAL (the numbers said)."""
    held = int(session.scalar(select(func.coalesce(func.sum(Attachment.size), 0))
                              .where(Attachment.id.in_(list(ids)))) or 0) if ids else 0
    if held + size > MAX_TOTAL:
        raise ValidationError(
            f"This file is {megabytes(size)} and the message already carries {megabytes(held)}:"
            f" together {megabytes(held + size)}, over the {megabytes(MAX_TOTAL)} a message may "
            "carry. Link to the file instead.", field="file")


def _named(values: Iterable[object]) -> set[int]:
    found: set[int] = set()
    for value in values:
        if isinstance(value, str):  # SQLite's JSON read as text by a bare column select
            value = json.loads(value)
        if isinstance(value, list):
            found.update(i for i in value if isinstance(i, int))
    return found


def in_use(session: Session, attachment_id: int) -> bool:
    """Whether any source, revision or queued message names the attachment. The lists are
    read and searched here (JSON containment is written differently by each database); an
    installation has few sources, and messages only while queued are read."""
    for model in _NAMERS:
        query = select(model.attachment_ids).where(model.attachment_ids.is_not(None))
        if model is TransactionalMessage:
            query = query.where(TransactionalMessage.status.in_(("pending", "sending")))
        if attachment_id in _named(session.scalars(query)):
            return True
    return False


def delete_attachment(session: Session, attachment_id: int) -> None:
    """Delete an attachment nothing names (committed); Conflict while one does."""
    get_attachment(session, attachment_id)
    if in_use(session, attachment_id):
        session.rollback()
        raise Conflict("This attachment is used by a broadcast, an automation step or a "
                       "transactional template (or a copy of one already sent), so it stays. "
                       "Remove it from them first.", field=FIELD)
    session.execute(delete(Attachment).where(Attachment.id == attachment_id))
    session.commit()


def parts_of(session: Session, ids: Sequence[int] | None) -> tuple[MailAttachment, ...]:
    """The files of a revision, bytes and all, in its order: read once per slice (or per
    revision), then attached to every copy. An id whose file is gone (it cannot be deleted
    while named, so only by hand in the database) is left out rather than failing every
    copy; the worker's log says so."""
    if not ids:
        return ()
    rows = {row.id: row for row in session.execute(
        select(Attachment.id, Attachment.name, Attachment.content_type, Attachment.data)
        .where(Attachment.id.in_(list(ids))))}
    gone = [i for i in ids if i not in rows]
    if gone:
        log.warning("attachments %s are gone; their copies go without them", gone)
    return tuple(MailAttachment(name=rows[i].name, content_type=rows[i].content_type,
                                data=bytes(rows[i].data)) for i in ids if i in rows)


def attach_to_draft(session: Session, broadcast_id: int, value: object) -> list[int]:
    """Set a draft broadcast's attachments (checked; committed). Only a draft changes (its
    revision, once sent, keeps the list it froze): a broadcast no longer a draft is Conflict."""
    ids = checked_ids(session, value)
    result = session.execute(
        update(Broadcast)
        .where(Broadcast.id == broadcast_id, Broadcast.status == BroadcastStatus.DRAFT.value)
        .values(attachment_ids=ids or None)
        .execution_options(synchronize_session=False))
    if rowcount(result) == 0:
        session.rollback()
        raise Conflict("Only a draft's attachments can change; this broadcast has been "
                       "scheduled or sent.", field=FIELD)
    session.commit()
    return ids
