"""Sending one transactional template: `POST /api/transactional` and what it stores.

A request names a template (by name or id), an address and `data` (an object its merge fields
read as `{{ data.x }}`), optionally with an `Idempotency-Key`. It is checked field by field,
the template is rendered now from `current_revision` (invariant 8: the row keeps the revision
it came from), and ONE INSERT writes the message with its key and the SHA-256 of the request
(`request_hash`: a canonical JSON of the template's id, the address and the data), committed
before the job is queued (`broadside.delivery.transactional.queue_transactional`). The key
lives only in that row: a crash either kept both or neither, so a client's retry finds the
message or makes it, never a second one.

Idempotency (one owner of the `idempotency_key` column: this module):
- the same key with the same request answers the existing message, nothing more is stored;
- the same key with another request is a Conflict (409);
- two requests with one key at once: the UNIQUE constraint lets one INSERT commit; the other
  rolls back, reads the committed row and answers as above;
- after `KEY_HOURS` the key is cleared (`clear_expired_keys`, the worker's maintenance tick,
  in guarded batches; a request that finds an expired key clears it itself), and the key may
  then name a new request. Keys are global to the installation, not per token.

A refused request (404 template, 422 field or rule) stores nothing, its key included.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.campaigns.transactional.reach import person_of, refusal
from broadside.campaigns.transactional.templates import current_revision, find_template
from broadside.core.addresses import normalise_email
from broadside.core.db import rowcount
from broadside.core.errors import Conflict, NotFound, ValidationError, shown
from broadside.core.models import (
    TransactionalMessage,
    TransactionalTemplate,
    TransactionalTemplateRevision,
)
from broadside.core.timeutil import utcnow
from broadside.delivery.queues import Jobs
from broadside.delivery.transactional import queue_transactional
from broadside.mail.rendering import compiled_revision

KIND = "template"
FIELDS = ("template", "to", "data")
KEY_HOURS = 24
MAX_KEY = 255
MAX_DATA_BYTES = 16_384  # `data` as compact JSON (UTF-8)
MAX_DATA_DEPTH = 8  # objects and arrays inside `data`, itself included
CLEAR_BATCH = 1000


@dataclass(frozen=True)
class SendInput:
    template: int | str
    to: str
    data: dict[str, Any]


@dataclass(frozen=True)
class Accepted:
    id: int
    status: str
    replayed: bool  # an earlier request's message, answered again for its key


def check_key(raw: str | None) -> str | None:
    """The Idempotency-Key header: 1 to MAX_KEY printable ASCII characters, no space."""
    if raw is None:
        return None
    if not 1 <= len(raw) <= MAX_KEY or any(not 0x21 <= ord(c) <= 0x7E for c in raw):
        raise ValidationError(f"Idempotency-Key must be 1 to {MAX_KEY} printable ASCII "
                              "characters without spaces (a UUID fits).", field="Idempotency-Key")
    return raw


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1)
                         for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def parse_send(data: dict[str, Any]) -> SendInput:
    """The request's fields, each refusal naming its field."""
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ValidationError(f"Unknown field {unknown[0]!r}: this request takes template, to "
                              "and data.", field=unknown[0])
    template = data.get("template")
    if template is None or isinstance(template, bool) or not isinstance(template, int | str):
        raise ValidationError("template must be a template's name or id.", field="template")
    to = data.get("to")
    if not isinstance(to, str):
        raise ValidationError("to must be an email address.", field="to")
    try:
        address = normalise_email(to)
    except ValidationError as exc:
        raise ValidationError(exc.message, field="to") from None
    values = data.get("data", {})
    if not isinstance(values, dict):
        raise ValidationError("data must be a JSON object, like {\"code\": \"123456\"}.",
                              field="data")
    if len(canonical(values).encode()) > MAX_DATA_BYTES:
        raise ValidationError(f"data is larger than {MAX_DATA_BYTES:,} bytes as JSON.",
                              field="data")
    if _depth(values) > MAX_DATA_DEPTH:
        raise ValidationError(f"data nests objects and arrays more than {MAX_DATA_DEPTH} deep.",
                              field="data")
    return SendInput(template=template, to=address, data=values)


def request_hash(template_id: int, to: str, data: dict[str, Any]) -> str:
    """What makes two requests the same: the template (by id, however it was named), the
    normalised address and the data, as canonical JSON."""
    return hashlib.sha256(canonical({"template": template_id, "to": to, "data": data})
                          .encode()).hexdigest()


def _cutoff(now: datetime | None = None) -> datetime:
    return (now or utcnow()) - timedelta(hours=KEY_HOURS)


def _by_key(session: Session, key: str, digest: str) -> Accepted | None:
    """The live message of this key, or None (an expired one's key cleared here)."""
    row = session.execute(select(TransactionalMessage.id, TransactionalMessage.status,
                                 TransactionalMessage.request_hash,
                                 TransactionalMessage.created_at)
                          .where(TransactionalMessage.idempotency_key == key)).first()
    if row is None:
        return None
    if row.created_at < _cutoff():
        _clear(session, TransactionalMessage.id == row.id)
        session.commit()
        return None
    if row.request_hash != digest:
        raise Conflict("This Idempotency-Key was used within the last 24 hours with another "
                       "request (template, to or data); use a new key for a new message.",
                       field="Idempotency-Key")
    return Accepted(row.id, row.status, replayed=True)


def send_template(session: Session, jobs: Jobs, request: SendInput, *, key: str | None,
                  default_from: str) -> Accepted:
    """Store and queue one template message (or answer the one stored for `key`)."""
    try:
        template = find_template(session, request.template)
    except NotFound as exc:
        raise NotFound(exc.message, field="template") from None
    digest = request_hash(template.id, request.to, request.data)
    if key is not None:
        found = _by_key(session, key, digest)
        if found is not None:
            return found
    person = person_of(session, request.to)
    refused = refusal(session, person, request.to, essential=template.essential)
    if refused is not None:
        raise ValidationError(refused[1], field="to")
    revision = current_revision(session, template, default_from)
    compiled = compiled_revision(revision.subject, revision.html_template,
                                 revision.text_template)
    try:
        rendered = compiled.render(email=request.to, name=person.name if person else "",
                                   attributes=person.attributes if person else {},
                                   unsubscribe_url="", data=request.data)
    except ValidationError as exc:
        session.rollback()
        raise ValidationError(exc.message, field="data") from None
    try:
        message = queue_transactional(
            session, jobs, kind=KIND, to_email=request.to, subject=rendered.subject,
            html=rendered.html, text=rendered.text,
            headers={"From-Name": revision.from_name, "From-Email": revision.from_email},
            subscriber_id=person.id if person else None, identity_id=revision.identity_id,
            template_revision_id=revision.id, idempotency_key=key, request_hash=digest,
            attachment_ids=revision.attachment_ids)
    except IntegrityError:
        # Another request with this key committed first (the UNIQUE constraint): its answer.
        session.rollback()
        found = _by_key(session, key, digest) if key is not None else None
        if found is None:
            raise
        return found
    return Accepted(message.id, message.status, replayed=False)


def _clear(session: Session, *where: Any) -> int:
    return rowcount(session.execute(
        update(TransactionalMessage)
        .where(TransactionalMessage.idempotency_key.is_not(None),
               TransactionalMessage.created_at < _cutoff(), *where)
        .values(idempotency_key=None)
        .execution_options(synchronize_session=False)))


def clear_expired_keys(session: Session, *, batch: int = CLEAR_BATCH,
                       max_batches: int = 10) -> int:
    """The maintenance tick's: keys older than KEY_HOURS cleared, in committed batches (each
    UPDATE guarded by the key still set and old), so each may name a new request. Returns
    how many were cleared."""
    cleared = 0
    for _ in range(max_batches):
        ids = list(session.scalars(
            select(TransactionalMessage.id)
            .where(TransactionalMessage.idempotency_key.is_not(None),
                   TransactionalMessage.created_at < _cutoff())
            .order_by(TransactionalMessage.id).limit(batch)))
        if not ids:
            break
        cleared += _clear(session, TransactionalMessage.id.in_(ids))
        session.commit()
        if len(ids) < batch:
            break
    return cleared


@dataclass(frozen=True)
class MessageState:
    id: int
    status: str
    reason: str | None
    to: str
    template_id: int | None
    template: str | None
    attempts: int
    created_at: datetime
    sent_at: datetime | None


def message_state(session: Session, message_id: int) -> MessageState:
    """One API message's state and the reason of its outcome (one read, joined to its
    template); NotFound for any other kind of transactional mail."""
    row = session.execute(
        select(TransactionalMessage.id, TransactionalMessage.status, TransactionalMessage.reason,
               TransactionalMessage.to_email, TransactionalTemplate.id,
               TransactionalTemplate.name, TransactionalMessage.attempts,
               TransactionalMessage.created_at, TransactionalMessage.sent_at)
        .outerjoin(TransactionalTemplateRevision,
                   TransactionalTemplateRevision.id == TransactionalMessage.template_revision_id)
        .outerjoin(TransactionalTemplate,
                   TransactionalTemplate.id == TransactionalTemplateRevision.template_id)
        .where(TransactionalMessage.id == message_id, TransactionalMessage.kind == KIND)).first()
    if row is None:
        raise NotFound(f"There is no transactional message {message_id}.")
    return MessageState(row[0], row[1], shown(row[2]), *row[3:])
