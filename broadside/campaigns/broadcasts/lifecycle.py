"""A broadcast's lifecycle: the one place that writes `Broadcast.status`, `pause_reason`,
`notice` and `auto_resumes`.

Every move is a named transition in `TRANSITIONS`: the states it may leave, the state it
enters, the fields it sets and the event it appends (invariant 9). Each is carried out as ONE
predicate-guarded UPDATE (`WHERE id = ? AND status IN (<from-states>)`), so nothing is
read-then-written: of two owners pressing "send" at once, or an owner pressing pause while
the worker finishes, exactly one moves the row and the other is refused, changing nothing.
The event is appended only when the row moved, in the caller's transaction; nothing here
commits.

One write is not a state change and appends no event: the passing `notice` shown while the
worker waits (`set_notice`, only while sending).

Automatic resumption is bounded by runs without progress (invariant 7): `auto_resume` counts
the resumptions in a row that found no more deliveries settled (sent, skipped or failed; not
`unknown`, which is what a crash leaves) than the previous one did, and `stalled` says when
that run has reached `MAX_AUTO_RESUMES`. A worker killed again and again that still delivers
mail between deaths is never stopped by it; one that dies before sending anything is.

Lock order (see `broadside.campaigns.broadcasts.ledger`): a transition locks the broadcast row only;
work that also moves deliveries runs after it, in `then`, so the broadcast row is always
taken first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import BindParameter, DateTime, and_, bindparam, case, exists, func, select, update
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.events import record_event
from broadside.core.models import Broadcast, Delivery
from broadside.core.models.sending import BroadcastStatus, DeliveryStatus
from broadside.core.timeutil import utcnow
from broadside.webhooks import emitter

DRAFT = BroadcastStatus.DRAFT
SCHEDULED = BroadcastStatus.SCHEDULED
QUEUED = BroadcastStatus.QUEUED
SENDING = BroadcastStatus.SENDING
PAUSED = BroadcastStatus.PAUSED
SENT = BroadcastStatus.SENT
CANCELLED = BroadcastStatus.CANCELLED

INITIAL = DRAFT  # a new broadcast (a draft, or a duplicate) starts here
ACTIVE = (QUEUED, SENDING)  # a slice may run: the worker gives these a job

_BROADCASTS = Broadcast.__table__
_DELIVERIES = Delivery.__table__

# Automatic resumptions in a row without progress before the worker gives up and pauses.
MAX_AUTO_RESUMES = 10
# Deliveries that reached a final state by being dealt with (a crash's `unknown` is not one).
SETTLED = _BROADCASTS.c.sent_count + _BROADCASTS.c.skipped_count + _BROADCASTS.c.failed_count

# Field values in the table: the moment of the move, or a value the caller must pass.
NOW = bindparam("_now", type_=DateTime())


def given(name: str) -> BindParameter:
    """A value the caller passes by name to `move` (e.g. the pause reason)."""
    return bindparam(name)


# Extra guard for `finish`: the audience snapshot is complete (the worker writes it in
# chunks while the first ones send: broadside.campaigns.broadcasts.snapshot) and no row of this
# broadcast is pending or in flight.
_NOTHING_LEFT = and_(
    _BROADCASTS.c.snapshot_cursor >= _BROADCASTS.c.snapshot_until,
    ~exists().where(
        _DELIVERIES.c.broadcast_id == bindparam("_id"),
        _DELIVERIES.c.status.in_((DeliveryStatus.PENDING.value, DeliveryStatus.SENDING.value)),
    ),
)


@dataclass(frozen=True)
class Transition:
    name: str
    sources: tuple[BroadcastStatus, ...]
    target: BroadcastStatus
    event: str  # the event kind appended when the row moved
    sets: Mapping[str, Any] = field(default_factory=dict)
    detail: str = ""  # the event's detail unless the caller gives one
    guard: Any = None  # an extra WHERE clause, beyond the from-states

    @property
    def given(self) -> tuple[str, ...]:
        """Names of the values the caller must pass to `move`."""
        return tuple(
            v.key for v in self.sets.values()
            if isinstance(v, BindParameter) and not v.key.startswith("_")
        )


def _table(*transitions: Transition) -> dict[str, Transition]:
    return {t.name: t for t in transitions}


TRANSITIONS: dict[str, Transition] = _table(
    # The owner's "send": the freeze and the audience's decision follow in the same
    # transaction (service.py, snapshot.py); the worker writes a large audience in chunks.
    Transition("send", (DRAFT,), QUEUED, "queued", {"queued_at": NOW, "pause_reason": None}),
    # The worker's maintenance, when a scheduled time has come.
    Transition("send_scheduled", (SCHEDULED,), QUEUED, "queued",
               {"queued_at": NOW, "pause_reason": None}),
    Transition("schedule", (DRAFT,), SCHEDULED, "scheduled", {"scheduled_at": given("scheduled_at")}),
    Transition("unschedule", (SCHEDULED,), DRAFT, "unscheduled", {"scheduled_at": None}),
    # A slice begins; started_at keeps the first start across slices and resumptions.
    Transition("start", (QUEUED,), SENDING, "started",
               {"started_at": func.coalesce(_BROADCASTS.c.started_at, NOW)}),
    # Done only when the snapshot is complete and no row is pending or in flight, in the
    # same statement.
    Transition("finish", (SENDING,), SENT, "finished", {"finished_at": NOW, "notice": None},
               guard=_NOTHING_LEFT),
    # By the owner, or by the worker with the reason (a channel error, too many restarts).
    Transition("pause", ACTIVE, PAUSED, "paused",
               {"pause_reason": given("pause_reason"), "notice": None}),
    # By the owner only: continue from the rows still pending, never restart (invariant 7).
    Transition("resume", (PAUSED,), QUEUED, "resumed",
               {"pause_reason": None, "auto_resumes": 0, "settled_at_resume": SETTLED},
               detail="by the owner"),
    # The worker found it sending without a job (a crash, a Redis flush): bounded (invariant 7).
    # A run of them without progress counts up; progress since the last one starts a new run.
    Transition("auto_resume", (SENDING,), SENDING, "resumed",
               {"auto_resumes": case((SETTLED > _BROADCASTS.c.settled_at_resume, 1),
                                     else_=_BROADCASTS.c.auto_resumes + 1),
                "settled_at_resume": SETTLED},
               detail="automatically, after the worker restarted"),
    # Stop for good; the ledger skips the rows still pending in the same transaction.
    Transition("cancel", (SCHEDULED, QUEUED, SENDING, PAUSED), CANCELLED, "cancelled",
               {"finished_at": NOW, "notice": None}),
    # The owner's "send again" of unknown or exhausted rows, once it had finished.
    Transition("send_again", (SENT,), QUEUED, "resent",
               {"finished_at": None, "auto_resumes": 0, "settled_at_resume": SETTLED}),
)

_statements: dict[str, Any] = {}


def _statement(transition: Transition):
    """Built once per transition: `UPDATE broadcasts SET ... WHERE id = ? AND status IN (...)`."""
    statement = _statements.get(transition.name)
    if statement is None:
        criteria = [
            _BROADCASTS.c.id == bindparam("_id"),
            _BROADCASTS.c.status.in_([s.value for s in transition.sources]),
        ]
        if transition.guard is not None:
            criteria.append(transition.guard)
        statement = (
            update(_BROADCASTS)
            .where(*criteria)
            .values(status=transition.target.value, updated_at=NOW, **transition.sets)
        )
        _statements[transition.name] = statement
    return statement


def move(
    session: Session,
    broadcast_id: int,
    name: str,
    *,
    detail: str | None = None,
    then: Callable[[], str | None] | None = None,
    **values: Any,
) -> bool:
    """Carry out transition `name` on one broadcast if (and only if) it is in one of the
    transition's from-states. Returns whether it moved; when it did, appends the event.

    `values` are the ones the transition takes from the caller (`Transition.given`). `then`
    runs only when the row moved, while this transaction holds the broadcast row (the place
    for moving its deliveries: the lock order); a string it returns is the event's detail.
    Does not commit.
    """
    transition = TRANSITIONS[name]
    now = utcnow()
    moved = rowcount(session.execute(
        _statement(transition), {"_id": broadcast_id, "_now": now, **values}
    )) == 1
    if not moved:
        return False
    if then is not None:
        detail = then() or detail
    record_event(
        session,
        transition.event,
        broadcast_id=broadcast_id,
        detail=transition.detail if detail is None else detail,
    )
    if name in WEBHOOK_FOR:
        emitter.emit(session, WEBHOOK_FOR[name], lambda: _broadcast_data(session, broadcast_id))
    return True


# The outgoing webhook event sent when a broadcast makes these moves.
WEBHOOK_FOR = {"start": "broadcast.started", "finish": "broadcast.finished"}


def _broadcast_data(session: Session, broadcast_id: int) -> dict[str, Any]:
    row = session.execute(
        select(Broadcast.subject, Broadcast.list_id, Broadcast.segment_id, Broadcast.sent_count,
               Broadcast.failed_count, Broadcast.skipped_count,
               Broadcast.unknown_count)
        .where(Broadcast.id == broadcast_id)).one()
    return {"broadcast": {"id": broadcast_id, "subject": row.subject, "list_id": row.list_id,
                          "segment_id": row.segment_id},
            "counts": {"sent": row.sent_count,
                       "failed": row.failed_count, "skipped": row.skipped_count,
                       "unknown": row.unknown_count}}


def pause(session: Session, broadcast_id: int, reason: str) -> bool:
    """The one pause, by the owner or by the worker: queued/sending -> paused with the reason."""
    return move(session, broadcast_id, "pause", pause_reason=reason, detail=reason)


_NOTICE = (
    update(_BROADCASTS)
    .where(_BROADCASTS.c.id == bindparam("_id"), _BROADCASTS.c.status == SENDING.value)
    .values(notice=bindparam("notice"))
)


def set_notice(session: Session, broadcast_id: int, notice: str | None) -> bool:
    """Show (or clear) a passing notice while it sends, e.g. waiting for the hourly limit.

    Guarded by `status = 'sending'`: a pause, cancel or finish clears the notice, and a late
    write from the worker must not bring it back. Not a state change: no event."""
    return rowcount(session.execute(_NOTICE, {"_id": broadcast_id, "notice": notice})) == 1


_STALLED = (
    select(_BROADCASTS.c.auto_resumes)
    .where(_BROADCASTS.c.id == bindparam("_id"),
           _BROADCASTS.c.auto_resumes >= MAX_AUTO_RESUMES,
           SETTLED <= _BROADCASTS.c.settled_at_resume)
)


def stalled(session: Session, broadcast_id: int) -> int | None:
    """How many automatic resumptions in a row saw no progress, when that reached the bound
    and none has been made since the last one; otherwise None. Read by the worker holding the
    lease, about a broadcast that has no job: nothing else settles its deliveries meanwhile."""
    return session.execute(_STALLED, {"_id": broadcast_id}).scalar()
