"""The one writer of `TransactionalMessage.status`: a table of transitions, each move one
UPDATE guarded by the status it expects.

Test sends and sign-up confirmations keep the rules of a broadcast's deliveries:

- claim before send (invariant 4): `claim_due` moves due rows `pending -> sending` (one
  attempt more) in one guarded statement that the worker commits before any send; every later
  move names `sending` (or `unknown`) as the status it expects, so a retried or duplicated job,
  or a second claim of the same row, changes nothing;
- a crash never causes a second copy (invariant 5): `repair_orphans` moves rows a dead worker
  left `sending` to `unknown`, and nothing moves `unknown` back to `pending`; only a
  provider's verified delivery event moves it on, to `sent` (broadside.feedback.settle);
- evidence (invariant 9): each move appends an event in the same transaction, naming the
  message in its data (`transactional_message_id`) and its person when it has one, except
  the two moves the row keeps for good itself: the claim (`attempts`) and the worker's
  `sending -> sent` (`sent_at`, the server's reply in `reason`).

The worker's row source (jobs.transactional) records its outcomes through `transition`;
nothing else writes the status column.

Outgoing webhooks: a message sent from a template through the API (`kind = 'template'`)
that moves to `sent`, `failed` or `unknown` emits `transactional.sent`, `.failed` or
`.unknown` (`WEBHOOK_FOR`) in the transaction of the move, with its id, template, address,
status and reason; test sends, confirmations and password resets emit nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import insert, or_, select, update
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.errors import shown
from broadside.core.events import actor_columns
from broadside.core.models import (
    Event,
    TransactionalMessage,
    TransactionalTemplate,
    TransactionalTemplateRevision,
)
from broadside.core.timeutil import utcnow
from broadside.webhooks import emitter

PENDING, SENDING, SENT, FAILED, UNKNOWN = "pending", "sending", "sent", "failed", "unknown"

# (from, to) -> the event kind recorded, or None where the row itself is the evidence.
TRANSITIONS: dict[tuple[str, str], str | None] = {
    (PENDING, SENDING): None,  # the worker's claim: `attempts` counts it
    (SENDING, SENT): None,  # accepted: `sent_at` and the server's reply
    (SENDING, PENDING): "retry",  # not accepted, tried again later (or released, not tried)
    (SENDING, FAILED): "failed",
    (SENDING, UNKNOWN): "unknown",  # the answer was lost, or the worker died: never resent
    (UNKNOWN, SENT): "sent",  # a provider's signed delivery event
    # A hard bounce read from the bounce mailbox, naming the message by its VERP token
    # (broadside.feedback.mailbox): accepted by the first server, refused further on.
    (SENT, FAILED): "failed",
    (UNKNOWN, FAILED): "failed",
}

# The outgoing webhook event of an API message (kind 'template') entering each status.
WEBHOOK_FOR = {SENT: "transactional.sent", FAILED: "transactional.failed",
               UNKNOWN: "transactional.unknown"}
TEMPLATE_KIND = "template"

# What a move may write besides the status; anything else a caller passes is not a column
# of this table (a delivery's `smtp_code`, `error_class`) and is left out.
COLUMNS = ("reason", "message_id", "provider_message_id", "sent_at", "next_attempt_at")
ATTEMPTS_DELTA = "attempts_delta"  # a value of this name adds to `attempts`
MAX_REASON = 500


@dataclass(frozen=True)
class Move:
    """One message's move: the values to write and the event's detail and data."""

    message_id: int
    subscriber_id: int | None = None
    values: dict[str, Any] = field(default_factory=dict)
    detail: str = ""
    data: dict[str, Any] | None = None


def _of_identity(identity_id: int | None):
    column = TransactionalMessage.identity_id
    return column.is_(None) if identity_id is None else column == identity_id


def _due(now: datetime):
    return or_(TransactionalMessage.next_attempt_at.is_(None),
               TransactionalMessage.next_attempt_at <= now)


def due_ids(session: Session, identity_id: int | None, limit: int = 500,
            now: datetime | None = None) -> list[int]:
    """The pending messages of one identity's stream that are due now, oldest first."""
    return list(session.scalars(
        select(TransactionalMessage.id)
        .where(TransactionalMessage.status == PENDING, _of_identity(identity_id),
               _due(now or utcnow()))
        .order_by(TransactionalMessage.id).limit(limit)))


def claim_due(session: Session, identity_id: int | None, limit: int,
              now: datetime | None = None) -> list[tuple[int, int | None]]:
    """pending -> sending for up to `limit` due messages of one identity's stream, oldest
    first, one attempt more each: the due rows read and claimed by one guarded `UPDATE ...
    RETURNING`, so a row claimed meanwhile is not among those returned. Returns (id,
    subscriber id) of each row claimed, by id; the caller commits before any send."""
    if limit <= 0:
        return []
    now = now or utcnow()
    due = (select(TransactionalMessage.id)
           .where(TransactionalMessage.status == PENDING, _of_identity(identity_id), _due(now))
           .order_by(TransactionalMessage.id).limit(limit).scalar_subquery())
    claimed = session.execute(
        update(TransactionalMessage)
        .where(TransactionalMessage.id.in_(due), TransactionalMessage.status == PENDING, _due(now))
        .values(status=SENDING, attempts=TransactionalMessage.attempts + 1)
        .returning(TransactionalMessage.id, TransactionalMessage.subscriber_id)
        .execution_options(synchronize_session=False)
    ).all()
    return sorted((row_id, subscriber_id) for row_id, subscriber_id in claimed)


def transition(session: Session, moves: Iterable[Move], *, source: str, target: str,
               now: datetime | None = None) -> list[int]:
    """Move each message from `source` to `target` if (and only if) it is still in `source`,
    with its values and, where the table says so, its event. Returns the ids that moved.
    Does not commit."""
    if (source, target) not in TRANSITIONS:
        raise ValueError(f"a transactional message never moves {source} -> {target}")
    now = now or utcnow()
    moved: list[Move] = []
    for move in moves:
        values: dict[str, Any] = {k: v for k, v in move.values.items() if k in COLUMNS}
        if "reason" in values and values["reason"] is not None:
            code = move.values.get("smtp_code")
            reason = f"{code} {values['reason']}" if target == SENT and code else values["reason"]
            values["reason"] = reason[:MAX_REASON]
        delta = move.values.get(ATTEMPTS_DELTA)
        if delta:
            values["attempts"] = TransactionalMessage.attempts + delta
        result = session.execute(
            update(TransactionalMessage)
            .where(TransactionalMessage.id == move.message_id, TransactionalMessage.status == source)
            .values(status=target, **values)
            .execution_options(synchronize_session=False))
        if rowcount(result) == 1:
            moved.append(move)
    kind = TRANSITIONS[(source, target)]
    if kind is not None and moved:
        who = actor_columns()
        session.execute(insert(Event), [
            {"kind": kind, "subscriber_id": m.subscriber_id, "detail": m.detail[:2000],
             "data": {**(m.data or {}), "transactional_message_id": m.message_id},
             "created_at": now, **who}
            for m in moved])
    if target in WEBHOOK_FOR and moved:
        _emit(session, [m.message_id for m in moved], target, now)
    return [m.message_id for m in moved]


def _emit(session: Session, message_ids: list[int], target: str, now: datetime) -> None:
    """The moved API messages' webhook events: nothing read unless an endpoint wants them."""

    def datas() -> list[dict[str, Any]]:
        rows = session.execute(
            select(TransactionalMessage.id, TransactionalMessage.to_email,
                   TransactionalMessage.reason, TransactionalMessage.subscriber_id,
                   TransactionalTemplate.id, TransactionalTemplate.name)
            .join(TransactionalTemplateRevision,
                  TransactionalTemplateRevision.id == TransactionalMessage.template_revision_id)
            .join(TransactionalTemplate,
                  TransactionalTemplate.id == TransactionalTemplateRevision.template_id)
            .where(TransactionalMessage.id.in_(message_ids),
                   TransactionalMessage.kind == TEMPLATE_KIND)
            .order_by(TransactionalMessage.id)).all()
        found = emitter.people(session, [row[3] for row in rows])
        return [{"id": row_id, "template": name, "template_id": template_id, "to": to_email,
                 "status": target, "reason": shown(reason),
                 "subscriber": found.get(subscriber_id) if subscriber_id else None}
                for row_id, to_email, reason, subscriber_id, template_id, name in rows]

    emitter.emit_many(session, WEBHOOK_FOR[target], datas, now)


def attempts_of(session: Session, message_id: int) -> int:
    return int(session.scalar(select(TransactionalMessage.attempts)
                              .where(TransactionalMessage.id == message_id)) or 0)


def repair_orphans(session: Session, identity_id: int | None, reason: str) -> int:
    """Invariant 5: the messages of one identity's stream left `sending` by a worker that is
    gone become `unknown` (with `reason`), never resent automatically. Does not commit."""
    rows = session.execute(
        select(TransactionalMessage.id, TransactionalMessage.subscriber_id)
        .where(TransactionalMessage.status == SENDING, _of_identity(identity_id))).all()
    return len(transition(session, [
        Move(row_id, subscriber_id, {"reason": reason}, detail="worker stopped mid-send")
        for row_id, subscriber_id in rows], source=SENDING, target=UNKNOWN))
