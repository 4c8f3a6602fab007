"""The one way an automation message changes: a predicate-guarded UPDATE and its events.

The same rules as a broadcast's deliveries (`broadside.campaigns.broadcasts.ledger`, whose guarded
`move_rows` this uses): every move names the status it expects, so a retried or duplicated
job changes nothing (invariant 4); every move appends its events in the same transaction
(invariant 9). Messages have no counters to keep: the automations page counts them by step on
their (step, status) index. Every writer of `AutomationMessage.status` and `revision_id` is
here: the worker's claims and outcomes, orphan repair, deleting an automation or removing a
step, a newer revision reaching the messages not yet due, and a provider's verified delivery
event (`unknown -> sent`, broadside.feedback.settle).

Lock order: an automation's lifecycle move locks the automation row first, then its messages
(`skip_pending` runs after the move, in the same transaction); the worker's claims touch
messages only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, bindparam, insert, literal, select, update
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.delivery_events import EVENT_FOR
from broadside.campaigns.broadcasts.ledger import Change, move_rows
from broadside.core.events import ACTORS, actor_columns, actor_literals
from broadside.core.models import AutomationEntry, AutomationMessage, AutomationRevision, Event
from broadside.core.models.sending import DeliveryStatus
from broadside.core.timeutil import utcnow

_MESSAGES = AutomationMessage.__table__
_EVENTS = Event.__table__
_REVISIONS = AutomationRevision.__table__

# A revision that prints no postal address is never sent (as a broadcast without one cannot
# be): its messages stay pending, held, until a revision with an address reaches them
# (`reassign_revision`, when the address is added: broadside.campaigns.automations.refreeze).
# Postal addresses are stored stripped (Settings and identities both), so empty is "none".
UNADDRESSED = _REVISIONS.c.postal_address == ""


def _record(session: Session, moved: Sequence[Change], kind: str, now: datetime) -> None:
    automation_of: dict[int, int] = {
        message_id: automation_id for message_id, automation_id in session.execute(
            select(_MESSAGES.c.id, _MESSAGES.c.automation_id).where(
                _MESSAGES.c.id.in_([c.delivery_id for c in moved])))
    }
    actors_now = actor_columns()
    session.connection().execute(
        insert(_EVENTS),
        [
            {
                "kind": kind,
                "automation_id": automation_of.get(c.delivery_id),
                "automation_message_id": c.delivery_id,
                "subscriber_id": c.subscriber_id,
                "detail": c.detail,
                "data": c.data,
                "created_at": now,
                **actors_now,
            }
            for c in moved
        ],
    )


def transition(session: Session, changes: Iterable[Change], *, source: str, target: str,
               now: datetime | None = None) -> list[int]:
    """Move each message from `source` to `target` if (and only if) it is still in `source`.
    Returns the ids that moved. Does not commit."""
    changes = list(changes)
    if not changes:
        return []
    now = now or utcnow()
    moved = move_rows(session, _MESSAGES, changes, source=source, target=target, now=now)
    if moved:
        _record(session, moved, EVENT_FOR[target], now)
    return [c.delivery_id for c in moved]


_CLAIM = (
    update(_MESSAGES)
    .where(_MESSAGES.c.id.in_(bindparam("ids", expanding=True)), _MESSAGES.c.status == "pending")
    .values(status="sending", claimed_at=bindparam("now"), updated_at=bindparam("now"),
            attempts=_MESSAGES.c.attempts + 1)
    .returning(_MESSAGES.c.id, _MESSAGES.c.revision_id)
)


def claim(session: Session, rows: Sequence[tuple[int, int | None]],
          now: datetime | None = None) -> dict[int, int]:
    """pending -> sending (invariant 4), in one guarded statement; the caller commits before
    any SMTP conversation. Returns each claimed message's revision as the claim found it (a
    newer revision may have reached it since it was read as due: invariant 8, the one sent
    is the one it records)."""
    if not rows:
        return {}
    now = now or utcnow()
    claimed: dict[int, int] = {
        message_id: revision_id for message_id, revision_id in session.connection().execute(
            _CLAIM, {"ids": [message_id for message_id, _ in rows], "now": now})}
    moved = [Change(m, s) for m, s in rows if m in claimed]
    if moved:
        _record(session, moved, EVENT_FOR["sending"], now)
    return {c.delivery_id: claimed[c.delivery_id] for c in moved}


def skip_pending(session: Session, where: ColumnElement[bool], reason: str,
                 now: datetime | None = None) -> int:
    """Every pending message matching `where` becomes skipped (`reason`), one event each;
    two statements whatever their number. The caller holds the automation row already (the
    lifecycle moved it in this transaction). Does not commit."""
    now = now or utcnow()
    pending = where & (_MESSAGES.c.status == DeliveryStatus.PENDING.value)
    session.connection().execute(
        insert(_EVENTS).from_select(
            ["kind", "automation_id", "automation_message_id", "subscriber_id", "detail", "created_at",
             *ACTORS],
            select(
                literal(EVENT_FOR[DeliveryStatus.SKIPPED], Event.kind.type),
                _MESSAGES.c.automation_id,
                _MESSAGES.c.id,
                _MESSAGES.c.subscriber_id,
                literal(reason, Event.detail.type),
                literal(now, Event.created_at.type),
                *actor_literals(),
            ).where(pending),
        )
    )
    return session.connection().execute(
        update(_MESSAGES).where(pending)
        .values(status=DeliveryStatus.SKIPPED.value, reason=reason, updated_at=now)
    ).rowcount


def reassign_revision(session: Session, step_id: int, revision_id: int,
                      now: datetime | None = None) -> int:
    """A step's newer revision reaches its messages that are not yet due, and those held for
    want of a postal address (their revision prints none: the worker never took them); those
    already due (or claimed, or settled) keep the revision they were assigned, so what each
    person got can always be reconstructed. Guarded on `pending`: a message the worker claimed
    meanwhile keeps the revision its claim returned. Does not commit."""
    now = now or utcnow()
    held = _MESSAGES.c.revision_id.in_(
        select(_REVISIONS.c.id).where(_REVISIONS.c.step_id == step_id, UNADDRESSED))
    return session.connection().execute(
        update(_MESSAGES)
        .where(_MESSAGES.c.step_id == step_id,
               _MESSAGES.c.status == DeliveryStatus.PENDING.value,
               (_MESSAGES.c.due_at > now) | held)
        .values(revision_id=revision_id)
    ).rowcount


def forget_person(session: Session, subscriber_id: int) -> None:
    """Erasing a person: their messages and entries stay (the counts stay true) but forget
    who it was, as ON DELETE SET NULL would (the bulk tables carry no FOREIGN KEYs; see
    `broadside.core.models.automations`). A pending message is then skipped at its turn
    ("subscriber erased"). Does not commit."""
    connection = session.connection()
    connection.execute(update(_MESSAGES).where(_MESSAGES.c.subscriber_id == subscriber_id)
                       .values(subscriber_id=None))
    entries = AutomationEntry.__table__
    connection.execute(update(entries).where(entries.c.subscriber_id == subscriber_id)
                       .values(subscriber_id=None))


def forget_list(session: Session, list_id: int) -> None:
    """Deleting a list: messages re-checked against it lose it, so a pending one is skipped at
    its turn ("no longer on the list"). Does not commit."""
    session.connection().execute(update(_MESSAGES).where(_MESSAGES.c.list_id == list_id)
                                 .values(list_id=None))
