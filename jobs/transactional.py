"""Transactional mail (test sends, sign-up confirmations, the API's template messages) as a
row source of the one send engine (jobs.engine, jobs.rows): its own loop no more, its own
rows and ledger.

The same pipeline as broadcasts, on the stream's higher-priority `transactional` queue: the
lease checked before every claim (invariant 1), the stream's one pacer (2), claims committed
before any send (4: `transactional_ledger.claim_due`), `unknown` never resent (5), errors
classified once and mapped by the one outcome policy (6). Every status change goes through
`broadside.delivery.transactional_ledger`, the one writer of `TransactionalMessage.status`.
A transactional message concerns one person and has nothing to pause (`pausable = False`:
`jobs.classify.next_step` retries a channel-wide refusal with backoff, within the budget).

A job is queued per message, but a slice sends whatever of its stream's transactional mail is
due, oldest first; the jobs of the messages it sent find nothing left to claim. A message due
later (a retry) is requeued by the maintenance tick when it is due.

The maintenance tick repairs rows left `sending` (invariant 5) while no transactional slice of
its identity runs in this process (`running`): the table keeps no claim time to tell a row in
flight from one a dead job left behind.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from email.utils import formataddr, parseaddr

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.ledger import Change
from broadside.campaigns.transactional.reach import person_of, refusal
from broadside.core.models import TransactionalMessage, TransactionalTemplateRevision
from broadside.core.site_settings import get_settings
from broadside.delivery import transactional_ledger
from broadside.delivery.transactional_ledger import Move
from broadside.delivery.transports import MessageFields
from broadside.mail.attachment_use import parts_of
from broadside.mail.message_refs import transactional_message_id
from broadside.mail.mime import MailAttachment, check_message
from broadside.mail.rendering import RenderedEmail, message_bytes
from jobs.classify import unwritable
from jobs.engine import Slice
from jobs.rows import Decision, Prepared, Row
from jobs.runtime import Runtime

log = logging.getLogger("broadside.worker")

_lock = threading.Lock()
_running: dict[int | None, int] = {}  # identity id -> transactional slices running


@contextmanager
def sending(identity_id: int | None) -> Iterator[None]:
    """Marks a transactional slice of this identity as running in this process."""
    with _lock:
        _running[identity_id] = _running.get(identity_id, 0) + 1
    try:
        yield
    finally:
        with _lock:
            _running[identity_id] -= 1
            if not _running[identity_id]:
                del _running[identity_id]


def running(identity_id: int | None) -> bool:
    with _lock:
        return identity_id in _running


class TransactionalLedger:
    """Outcomes recorded through broadside.delivery.transactional_ledger."""

    def transition(self, session: Session, changes: Sequence[Change], *, source: str,
                   target: str, now: datetime) -> list[int]:
        return transactional_ledger.transition(
            session, [Move(c.delivery_id, c.subscriber_id, c.values, c.detail, c.data)
                      for c in changes], source=source, target=target, now=now)

    def attempts_of(self, session: Session, row_id: int) -> int:
        return transactional_ledger.attempts_of(session, row_id)


_MESSAGE = select(TransactionalMessage.kind, TransactionalMessage.to_email,
                  TransactionalMessage.subject, TransactionalMessage.html,
                  TransactionalMessage.text, TransactionalMessage.headers,
                  TransactionalMessage.template_revision_id,
                  TransactionalMessage.attachment_ids)
TEMPLATE_KIND = "template"  # the API's (broadside.campaigns.transactional.sending)


class TransactionalRows:
    """The row source of a slice of one stream's due transactional mail."""

    key_kind = "t"  # idempotency keys of its batches name transactional messages
    pausable = False
    ledger = TransactionalLedger()

    def __init__(self, session: Session, runtime: Runtime) -> None:
        self.session = session
        self.rt = runtime
        self.fields = False
        self.default_from: tuple[str, str] | None = None  # read once per slice
        # The files of the messages' attachment lists, each list read once per slice.
        self.files: dict[tuple[int, ...], tuple[MailAttachment, ...]] = {}

    def open(self, fields: bool) -> str | None:
        self.fields = fields
        return None

    def claim(self, limit: int) -> list[Row]:
        return [Row(row_id, subscriber_id) for row_id, subscriber_id in
                transactional_ledger.claim_due(self.session, self.rt.identity_id, limit)]

    def _sender(self) -> tuple[str, str]:
        """The Settings sender, else MAIL_FROM: for messages that name none (confirmations)."""
        if self.default_from is None:
            settings = get_settings(self.session)
            if settings.sender_email:
                self.default_from = (settings.sender_name or "", settings.sender_email)
            else:
                self.default_from = parseaddr(self.rt.config["MAIL_FROM"])
        return self.default_from

    def decide(self, row: Row) -> Decision:
        """Invariant 3 asks of an API template message what the API asked (the address
        suppressed meanwhile, or unsubscribed meanwhile for a template not essential: its row
        fails with the reason, nothing sent); it has nothing to ask of a message the owner
        asked for a moment ago (a test send, a confirmation to a person not yet subscribed).
        Then its message is built, or its row failed when it cannot make one."""
        kind, to_email, subject, html, text, stored, revision_id, attached = self.session.execute(
            _MESSAGE.where(TransactionalMessage.id == row.id)).one()
        if kind == TEMPLATE_KIND:
            essential = bool(self.session.scalar(
                select(TransactionalTemplateRevision.essential)
                .where(TransactionalTemplateRevision.id == revision_id)))
            refused = refusal(self.session, person_of(self.session, to_email), to_email,
                              essential=essential)
            if refused is not None:
                return Decision(fail=f"Not sent: {refused[1]}")
        headers = dict(stored or {})
        from_name, from_email = headers.pop("From-Name", None), headers.pop("From-Email", None)
        if not from_email:
            from_name, from_email = self._sender()
        message_id = transactional_message_id(row.id, from_email)
        headers["X-Broadside-Kind"] = kind
        rendered = RenderedEmail(subject=subject, html=html, text=text)
        sender = formataddr((from_name or "", from_email))
        ids = tuple(attached or ())
        if ids not in self.files:
            self.files[ids] = parts_of(self.session, ids)
        files = self.files[ids]
        fields = None
        wire = b""
        try:
            if self.fields:
                check_message(rendered, from_addr=sender, to_addr=to_email, message_id=message_id,
                              headers=headers)
                fields = MessageFields(sender=sender, to=to_email, subject=subject, text=text,
                                       html=html, reply_to=None,
                                       headers=[("Message-ID", message_id), *headers.items()],
                                       attachments=files)
            else:
                wire = self.rt.transport.wire(message_bytes(
                    rendered, from_addr=sender, to_addr=to_email, message_id=message_id,
                    headers=headers, attachments=files))
        except Exception as error:  # this message, not the stream
            return Decision(fail=unwritable(error, to_addr=to_email, from_email=from_email,
                                            what=f"transactional message {row.id}")[:500])
        return Decision(message=Prepared(row.id, row.subscriber_id, to_email, message_id, wire,
                                         from_email=from_email, fields=fields))

    def finished(self, deadline: float) -> bool:
        return True  # nothing due now; a retry is requeued by the maintenance tick when due

    def wait_for_due(self, deadline: float) -> bool:
        return False

    def pause(self, reason: str) -> None:
        pass  # nothing of its own to pause; a stream throttled without end pauses its identity

    def notice(self, text: str | None) -> None:
        if text:
            log.info("transactional mail: %s", text)

    def close(self, attempts: int, seconds: float) -> None:
        pass


def transactional_slice(session: Session, runtime: Runtime) -> Slice:
    """One slice of this stream's due transactional mail."""
    return Slice(session, runtime, TransactionalRows(session, runtime))


def due_transactional(session: Session, identity_id: int | None = None) -> list[int]:
    """The pending messages of one identity's stream that are due now."""
    return transactional_ledger.due_ids(session, identity_id)
