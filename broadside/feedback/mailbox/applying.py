"""One message of a bounce mailbox, applied once: its processed row and its effect in ONE
transaction.

The effect is a provider bounce webhook's (broadside.feedback.service: the same
`record_bounce` / `record_complaint` of broadside.audience.unsubscribe, so the same
suppression, soft-bounce count, events and outgoing webhooks), plus, for a hard bounce, the
message it names moved to `failed` through its own ledger (`sent -> failed`, or
`unknown -> failed`: the first server accepted it, a later one refused it), with the
bounce's words as the reason.

Once only: the `mailbox_messages` row (UNIQUE per mailbox and UIDVALIDITY + UID, and per
mailbox and Message-ID) is inserted first and flushed, before any effect; a second reader,
or the same message read again after a crash between the commit and its MOVE, meets the
UNIQUE key, rolls back, and only moves the message. Nothing is written for a message whose
insert fails, and the effect commits with the row or not at all.

What a message names (broadside.feedback.mailbox.reports): the row of its verified VERP
token; else a Message-ID of ours it quotes, only when that row was sent to an address the
bounce reports failed (a Message-ID can be guessed; an address and a guessed row must agree).
A bounce naming nothing of ours is `unmatched`, and like a message not understood
(`unrecognised`) it goes to the Unrecognised folder for the owner to look at.

Lock order (docs/ARCHITECTURE.md): the broadcast row (its counters, via the ledger), the
delivery, then the subscriber (suppression); the mailbox's own row last.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.audience.unsubscribe.suppression import (
    record_bounce_uncommitted,
    record_complaint_uncommitted,
)
from broadside.campaigns.automations import ledger as automation_ledger
from broadside.campaigns.broadcasts import ledger
from broadside.core.models import (
    AutomationMessage,
    Delivery,
    MailboxMessage,
    Subscriber,
    TransactionalMessage,
)
from broadside.core.timeutil import utcnow
from broadside.delivery import transactional_ledger
from broadside.feedback.mailbox import state
from broadside.feedback.mailbox.reports import COMPLAINT, HARD, Report
from broadside.mail.message_refs import row_of

log = logging.getLogger("broadside.feedback")

PROCESSED, UNRECOGNISED = "Processed", "Unrecognised"  # the folders
SOURCE = "bounce mailbox"
_FAILS_FROM = ("sent", "unknown")


@dataclass(frozen=True)
class Named:
    """The row a bounce names."""

    kind: str  # delivery | automation message | transactional message
    id: int
    status: str
    email: str | None
    subscriber_id: int | None
    broadcast_id: int | None
    message_id: str  # ours, as it went out (for the evidence's link)
    reason: str | None = None  # what the first server said when it accepted it


def _named(session: Session, kind: str, row_id: int) -> Named | None:
    if kind == "transactional message":
        t = session.execute(select(TransactionalMessage.status, TransactionalMessage.to_email,
                                   TransactionalMessage.subscriber_id, TransactionalMessage.message_id,
                                   TransactionalMessage.reason)
                            .where(TransactionalMessage.id == row_id)).first()
        return None if t is None else Named(kind, row_id, t.status, t.to_email.lower(),
                                            t.subscriber_id, None, t.message_id or "", t.reason)
    table: Any = Delivery if kind == "delivery" else AutomationMessage
    owner = table.broadcast_id if kind == "delivery" else table.automation_id
    row = session.execute(select(table.status, Subscriber.email, table.subscriber_id, owner,
                                 table.reason)
                          .outerjoin(Subscriber, Subscriber.id == table.subscriber_id)
                          .where(table.id == row_id)).first()
    if row is None:
        return None
    letter = "d" if kind == "delivery" else "m"
    tail = f".b{row[3]}" if kind == "delivery" else f".a{row[3]}"
    return Named(kind, row_id, row.status, row.email, row.subscriber_id,
                 row[3] if kind == "delivery" else None, f"<broadside.{letter}{row_id}{tail}@mailbox>",
                 row.reason)


def find_named(session: Session, report: Report) -> Named | None:
    """The row the report names (see the module's docstring), or None."""
    for kind, row_id in report.rows:
        found = _named(session, kind, row_id)
        if found is not None:
            return found
    for value in report.message_ids:
        ref = row_of(value.strip("<>"))
        if ref is None:
            continue
        found = _named(session, *ref)
        if found is not None and found.email and found.email.lower() in report.addresses:
            return found
    return None


def _fail(session: Session, named: Named, reason: str, now: datetime) -> bool:
    """The named message, accepted and then bounced: `sent|unknown -> failed`, guarded."""
    if named.status not in _FAILS_FROM:
        return False
    reason = f"bounced: {reason}"[:500]
    # The row's reason becomes the bounce's; what the first server said when it accepted the
    # message stays in the event (invariant 9: the row kept it until now).
    data = {"source": SOURCE, "was": named.status, "accepted_with": named.reason}
    if named.kind == "transactional message":
        return bool(transactional_ledger.transition(session, [transactional_ledger.Move(
            named.id, named.subscriber_id, {"reason": reason}, reason, data)],
            source=named.status, target="failed", now=now))
    change = ledger.Change(named.id, named.subscriber_id,
                           {"reason": reason, "error_class": "recipient"}, reason, data)
    if named.kind == "delivery":
        assert named.broadcast_id is not None
        return bool(ledger.transition(session, named.broadcast_id, [change], source=named.status,
                                      target="failed", now=now))
    return bool(automation_ledger.transition(session, [change], source=named.status,
                                             target="failed", now=now))


def apply_message(session: Session, mailbox_key: str, uid_validity: int, uid: int,
                  report: Report, now: datetime | None = None) -> tuple[str, str] | None:
    """Apply one message's report once; commits. Returns (outcome, folder), or None when it
    was processed already (then it is only moved: to the folder its first outcome chose)."""
    now = now or utcnow()
    named = find_named(session, report) if report.kind else None
    if report.kind is None:
        outcome = "unrecognised"
    elif named is None:
        outcome = "unmatched"
    else:
        outcome = report.kind
    folder = PROCESSED if outcome in ("hard", "soft", "complaint") else UNRECOGNISED
    session.add(MailboxMessage(mailbox_key=mailbox_key, uid_validity=uid_validity, uid=uid,
                               message_key=report.message_key, outcome=outcome,
                               detail=report.detail, processed_at=now))
    try:
        session.flush()  # the UNIQUE keys decide, before any effect
    except IntegrityError:
        session.rollback()
        return None
    if named is not None and named.email:
        ids = [named.message_id, *report.message_ids]
        if report.kind == COMPLAINT:
            record_complaint_uncommitted(session, named.email, message_ids=ids,
                                         detail=report.detail, source=SOURCE)
        else:
            if report.kind == HARD:
                _fail(session, named, report.detail, now)
            record_bounce_uncommitted(session, named.email, report.kind or "hard", message_ids=ids,
                                      detail=report.detail, source=SOURCE)
    state.count(session, mailbox_key, unrecognised=folder == UNRECOGNISED, now=now)
    session.commit()
    log.debug("mailbox %s uid %s: %s (%s)", mailbox_key, uid, outcome,
             f"{named.kind} {named.id}" if named else "names nothing of ours")
    return outcome, folder


def folder_of_processed(session: Session, mailbox_key: str, uid_validity: int, uid: int,
                        message_key: str) -> str:
    """Where an already processed message goes (its first outcome decided)."""
    outcome = session.scalar(select(MailboxMessage.outcome).where(
        MailboxMessage.mailbox_key == mailbox_key,
        ((MailboxMessage.uid_validity == uid_validity) & (MailboxMessage.uid == uid))
        | (MailboxMessage.message_key == message_key)).limit(1))
    return PROCESSED if outcome in ("hard", "soft", "complaint") else UNRECOGNISED
