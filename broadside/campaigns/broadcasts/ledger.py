"""The one way a delivery changes state: a predicate-guarded UPDATE, its counters and its events.

Invariant 4 (claim before send) and 9 (evidence) live here. Every transition names the status
it expects (`WHERE id = ? AND status = ?`), so a retried or duplicated job that finds the row
already moved changes nothing; there is no read-then-write. The broadcast's counters move by
exactly the rows that changed, in the same transaction, so the progress bar never has to
count the deliveries table. Every writer of `Delivery.status` comes through here: the
worker's claims and outcomes, orphan repair, the owner's cancel and "send again", and a
provider's verified delivery event (`unknown -> sent`, broadside.feedback.settle: the one way an
unknown row settles without the owner, and only on the provider's own signed word).

The worker's hot path is two statements per batch of rows, each still guarded row by row: its
claim reads and claims the next due rows in one `UPDATE ... WHERE id IN (the due ids) AND
status = 'pending' RETURNING` (`claim_due`), and a flush moves each group of outcomes in one
statement on PostgreSQL (`UPDATE ... FROM unnest(arrays) WHERE t.id = v.id AND t.status =
'sending' RETURNING t.id`: `move_rows`, through `bulk_moves`), so the database spends one
statement, not one per row, on a batch (on a two-core host the database's CPU is the mail
server's too).

Evidence (invariant 9) without duplicates: which moves write an event and which the row keeps
instead, and the outgoing webhook event each move sends, are `delivery_events`; this module
calls them in the transaction of the move. Nor is our Message-ID stored: it names the row
(`broadside.mail.message_refs`), so a `message_id` value a caller passes is not written
(`DERIVED`).

Lock order: the broadcast row first, then its deliveries (then subscribers). Every
transaction that touches both takes them in that order, so a cancel during a fast send
cannot deadlock on PostgreSQL (a cancel used to lock the broadcast then the deliveries while
a claim locked the deliveries then the broadcast's counters). Here the counters are written
FIRST, with the number of rows asked for, corrected afterwards when fewer moved. A lifecycle
move (`lifecycle`) locks the broadcast row alone, and work on its deliveries runs after it in
the same transaction (`cancel_pending`). SQLite serialises writers anyway.
Taking the broadcast row first also makes a cancel's "skip every pending row" exact.

A large cancel (`skip_pending_chunk`, run by the worker in committed chunks after the owner's
click) writes no event per row either: a skipped row's status and reason ("cancelled") are
never overwritten, so the row is each recipient's evidence, and the broadcast's one
"cancelled" event says how many were to be skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, literal, select, update
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import delivery_events
from broadside.campaigns.broadcasts.bulk_moves import unnest_move
from broadside.core.events import ACTORS, actor_literals
from broadside.core.models import Broadcast, Delivery, Event
from broadside.core.models.sending import DeliveryStatus
from broadside.core.timeutil import utcnow

# One counter column per delivery status (`pending_count`, `sent_count`, ...).
COUNTER: dict[str, Any] = {status: getattr(Broadcast, f"{status}_count") for status in DeliveryStatus}



@dataclass
class Change:
    """One delivery's move, with the values to write and the event detail to record."""

    delivery_id: int
    subscriber_id: int | None
    values: dict[str, Any] = field(default_factory=dict)
    detail: str = ""
    data: dict[str, Any] | None = None


def move_counters(session: Session, broadcast_id: int, moves: dict[tuple[str, str], int]) -> None:
    deltas: dict[str, int] = {}
    for (source, target), count in moves.items():
        if count:
            deltas[source] = deltas.get(source, 0) - count
            deltas[target] = deltas.get(target, 0) + count
    params = {f"d_{COUNTER[s].key}": d for s, d in deltas.items() if d}
    if params:
        # On the table, not the entity: the ORM's bulk-update bookkeeping cost more than the
        # statement, twice per batch of sends. Callers commit before reading the counters.
        params["_broadcast_id"] = broadcast_id
        session.connection().execute(_counters_statement(tuple(sorted(params))), params)


_counter_statements: dict[tuple[str, ...], Any] = {}  # bind names -> UPDATE of the counters


def _counters_statement(names: tuple[str, ...]):
    """One UPDATE per set of counters moved, built once (like `_move_statement`): batches
    shrink to a few rows under load, so this runs often; `count = count + :delta` as before."""
    statement = _counter_statements.get(names)
    if statement is None:
        columns = [name[2:] for name in names if name.startswith("d_")]
        statement = (
            update(_BROADCASTS).where(_BROADCASTS.c.id == bindparam("_broadcast_id"))
            .values({key: _BROADCASTS.c[key] + bindparam(f"d_{key}") for key in columns})
        )
        _counter_statements[names] = statement
    return statement


_DELIVERIES = Delivery.__table__
_BROADCASTS = Broadcast.__table__
_EVENTS = Event.__table__
# `values` key meaning "add this to attempts" (claim: +1; a release of an unattempted row: -1).
ATTEMPTS_DELTA = "attempts_delta"
_statements: dict[tuple[str, ...], Any] = {}  # (table, *columns) -> UPDATE


def _move_statement(table: Any, keys: tuple[str, ...]):
    """One compiled-once UPDATE per table and set of columns: this runs for every recipient."""
    statement = _statements.get((table.name, *keys))
    if statement is None:
        values: dict[str, Any] = {"status": bindparam("_target"), "updated_at": bindparam("_now")}
        for key in keys:
            if key == ATTEMPTS_DELTA:
                values["attempts"] = table.c.attempts + bindparam(ATTEMPTS_DELTA)
            else:
                values[key] = bindparam(key)
        statement = (
            update(table)
            .where(table.c.id == bindparam("_id"), table.c.status == bindparam("_source"))
            .values(values)
        )
        _statements[(table.name, *keys)] = statement
    return statement


def move_rows(session: Session, table: Any, changes: Sequence[Change], *, source: str, target: str,
              now: datetime) -> list[Change]:
    """The guarded UPDATEs themselves, for any table of rows in the deliveries' states (a
    broadcast's deliveries, an automation's messages): each row moves from `source` to
    `target` only if it is still in `source`. Returns the changes that moved; no counters,
    no events, no commit."""
    connection = session.connection()
    groups: dict[tuple[str, ...], list[Change]] = {}
    for change in changes:
        groups.setdefault(tuple(sorted(change.values)), []).append(change)
    moved: list[Change] = []
    for keys, group in groups.items():
        statement = _move_statement(table, keys)
        params = [
            {"_id": c.delivery_id, "_source": source, "_target": target, "_now": now, **c.values}
            for c in group
        ]
        if len(group) > 1 and connection.dialect.name == "postgresql":
            # One statement for the whole group, each row still guarded by its own
            # `status = source`; RETURNING names exactly the rows that moved.
            moved_ids = set(connection.execute(*unnest_move(connection.dialect, table, keys, group,
                                                                       source, target, now,
                                                                       attempts_key=ATTEMPTS_DELTA))
                            .scalars())
            moved.extend(c for c in group if c.delivery_id in moved_ids)
            continue
        if len(group) == 1 or not connection.dialect.supports_sane_multi_rowcount:
            moved.extend(
                c
                for c, p in zip(group, params, strict=True)
                if connection.execute(statement, p).rowcount == 1
            )
            continue
        # One executemany (a single round trip with psycopg's pipeline); each row is still
        # guarded by its own WHERE status = source.
        if connection.execute(statement, params).rowcount == len(group):
            moved.extend(group)
            continue
        # Some rows had already left `source` (moved by someone else): the rows this call
        # moved are the ones now in `target` carrying this call's exact timestamp.
        ids = set(
            connection.execute(
                select(table.c.id).where(
                    table.c.id.in_([c.delivery_id for c in group]),
                    table.c.status == target,
                    table.c.updated_at == now,
                )
            ).scalars()
        )
        moved.extend(c for c in group if c.delivery_id in ids)
    return moved


# Values derived rather than stored (`broadside.mail.message_refs.delivery_message_id`).
DERIVED = ("message_id",)


def _stored(change: Change) -> Change:
    if not any(key in change.values for key in DERIVED):
        return change
    values = {k: v for k, v in change.values.items() if k not in DERIVED}
    return Change(change.delivery_id, change.subscriber_id, values, change.detail, change.data)


def transition(
    session: Session,
    broadcast_id: int,
    changes: Iterable[Change],
    *,
    source: str,
    target: str,
    now: datetime | None = None,
) -> list[int]:
    """Move each delivery from `source` to `target` if (and only if) it is still in `source`.

    Returns the ids that moved. Does not commit: the caller owns the transaction.
    """
    changes = [_stored(c) for c in changes]
    if not changes:
        return []
    now = now or utcnow()
    # Lock order: the broadcast row (its counters) before the deliveries.
    move_counters(session, broadcast_id, {(source, target): len(changes)})
    moved = move_rows(session, _DELIVERIES, changes, source=source, target=target, now=now)
    if len(moved) < len(changes):
        # Some had already left `source`: take back the counters they did not earn.
        move_counters(session, broadcast_id, {(source, target): len(moved) - len(changes)})
    # A release (never attempted: attempts back by one) is no attempt to keep.
    attempted = [c for c in moved if c.values.get(ATTEMPTS_DELTA) != -1]
    if attempted and target == DeliveryStatus.PENDING.value:
        delivery_events.keep_first_claim(session, broadcast_id, attempted)
    if moved and (source, target) not in delivery_events.ROW_KEEPS:
        delivery_events.record(session, broadcast_id, moved, delivery_events.EVENT_FOR[target], now)
    if moved and target in delivery_events.WEBHOOK_FOR:
        delivery_events.emit(session, broadcast_id, moved, delivery_events.WEBHOOK_FOR[target], now)
    return [c.delivery_id for c in moved]


_CLAIM = (
    update(_DELIVERIES)
    .where(_DELIVERIES.c.id.in_(bindparam("ids", expanding=True)), _DELIVERIES.c.status == "pending")
    .values(
        status="sending",
        claimed_at=bindparam("now"),
        updated_at=bindparam("now"),
        attempts=_DELIVERIES.c.attempts + 1,
    )
    .returning(_DELIVERIES.c.id, _DELIVERIES.c.attempts)
)


def claim(
    session: Session, broadcast_id: int, rows: Sequence[tuple[int, int | None]], now: datetime | None = None
) -> list[int]:
    """pending -> sending for a small batch, in one guarded statement; the caller commits
    before any SMTP conversation. Only re-claims (a row's second attempt or later) write a
    `claimed` event: a first claim is the row's own `claimed_at`."""
    if not rows:
        return []
    now = now or utcnow()
    # Lock order: the broadcast row (its counters) before the deliveries.
    move_counters(session, broadcast_id, {("pending", "sending"): len(rows)})
    claimed: dict[int, int] = {
        delivery_id: attempts
        for delivery_id, attempts in session.connection().execute(
            _CLAIM, {"ids": [delivery_id for delivery_id, _ in rows], "now": now})
    }
    moved = [Change(d, s) for d, s in rows if d in claimed]
    if len(moved) < len(rows):
        move_counters(session, broadcast_id, {("pending", "sending"): len(moved) - len(rows)})
    # A first claim is the row's own `claimed_at`; a re-claim overwrites it, so it is recorded.
    again = [c for c in moved if claimed[c.delivery_id] > 1]
    if again:
        delivery_events.record(session, broadcast_id, again, delivery_events.EVENT_FOR["sending"], now)
    return [c.delivery_id for c in moved]


# The next due rows of a broadcast, read and claimed by one statement (the worker's claim).
_DUE_IDS = (
    select(_DELIVERIES.c.id)
    .where(
        _DELIVERIES.c.broadcast_id == bindparam("b_id"),
        _DELIVERIES.c.status == "pending",
        _DELIVERIES.c.next_attempt_at.is_(None) | (_DELIVERIES.c.next_attempt_at <= bindparam("b_now")),
        # An A/B test's rest (-1) only once the winner is written (ab_sending).
        _DELIVERIES.c.variant.is_(None) | (_DELIVERIES.c.variant >= 0) | bindparam("b_rest"),
    )
    .order_by(_DELIVERIES.c.id)
    .limit(bindparam("b_limit"))
)
_CLAIM_DUE = (
    update(_DELIVERIES)
    .where(_DELIVERIES.c.id.in_(_DUE_IDS), _DELIVERIES.c.status == "pending")
    .values(
        status="sending",
        claimed_at=bindparam("b_now"),
        updated_at=bindparam("b_now"),
        attempts=_DELIVERIES.c.attempts + 1,
    )
    .returning(_DELIVERIES.c.id, _DELIVERIES.c.subscriber_id, _DELIVERIES.c.list_id,
               _DELIVERIES.c.attempts, _DELIVERIES.c.variant)
)


def claim_due(session: Session, broadcast_id: int, limit: int, now: datetime | None = None, *,
              rest: bool = False) -> list[tuple[int, int | None, int | None, int | None]]:
    """pending -> sending for up to `limit` of the broadcast's due rows, by id: the read of
    the due rows and their claim in ONE guarded statement (`UPDATE ... WHERE id IN (the due
    ids) AND status = 'pending' RETURNING ...`; SQLite >= 3.35 and PostgreSQL), instead of a
    SELECT and then the claim's UPDATE. Returns (id, subscriber id, list id) of each row
    claimed, by id, and its A/B variant (rows of the test's rest only with `rest`). The
    caller commits before any SMTP conversation (invariant 4).

    Lock order: the counters are moved first, by `limit` (so the broadcast row is held before
    any delivery), and corrected afterwards by the rows that were not there to claim. As in
    `claim`, only a re-claim (a row's second attempt or later) writes a `claimed` event."""
    if limit <= 0:
        return []
    now = now or utcnow()
    move_counters(session, broadcast_id, {("pending", "sending"): limit})
    claimed = sorted(session.connection().execute(
        _CLAIM_DUE, {"b_id": broadcast_id, "b_now": now, "b_limit": limit, "b_rest": rest}).all())
    if len(claimed) < limit:
        move_counters(session, broadcast_id, {("pending", "sending"): len(claimed) - limit})
    again = [Change(row.id, row.subscriber_id) for row in claimed if row.attempts > 1]
    if again:
        delivery_events.record(session, broadcast_id, again, delivery_events.EVENT_FOR["sending"], now)
    return [(row.id, row.subscriber_id, row.list_id, row.variant) for row in claimed]


def cancel_pending(session: Session, broadcast_id: int, reason: str, now: datetime | None = None) -> int:
    """Every row still pending becomes skipped (`reason`), with one event each; returns how many.

    The caller holds the broadcast row already (the lifecycle's cancel moved it in this
    transaction: the lock order), so no claim can take a pending row between the events and
    the UPDATE. Two statements, but their time grows with the rows: the owner's cancel calls
    this only for a small broadcast (`broadside.campaigns.broadcasts.cancelling.INLINE_LIMIT`); a larger
    one is skipped by the worker in chunks (`skip_pending_chunk`, which writes no per-row
    event: the row's status and reason are the evidence). Does not commit.
    """
    now = now or utcnow()
    pending = (_DELIVERIES.c.broadcast_id == broadcast_id) & (
        _DELIVERIES.c.status == DeliveryStatus.PENDING.value
    )
    # Evidence first (one event per row about to move), then the guarded move.
    session.connection().execute(
        insert(_EVENTS).from_select(
            ["kind", "broadcast_id", "delivery_id", "subscriber_id", "detail", "created_at", *ACTORS],
            select(
                literal(delivery_events.EVENT_FOR[DeliveryStatus.SKIPPED], Event.kind.type),
                _DELIVERIES.c.broadcast_id, _DELIVERIES.c.id, _DELIVERIES.c.subscriber_id,
                literal(reason, Event.detail.type),
                literal(now, Event.created_at.type), *actor_literals(),
            ).where(pending),
        )
    )
    moved = session.connection().execute(
        update(_DELIVERIES)
        .where(pending)
        .values(status=DeliveryStatus.SKIPPED.value, reason=reason, updated_at=now)
    ).rowcount
    move_counters(session, broadcast_id, {("pending", "skipped"): moved})
    return moved


def skip_pending_chunk(session: Session, broadcast_id: int, *, after_id: int, limit: int,
                       reason: str = "cancelled", now: datetime | None = None) -> tuple[int, int | None]:
    """One short chunk of a cancelled broadcast's skip (`broadside.campaigns.broadcasts.cancelling`):
    up to `limit` of its rows still pending, by id after `after_id`, become skipped (`reason`).
    Returns (rows moved, the highest id looked at, or None when none is left past `after_id`).

    The ids come from the (broadcast_id, status, id) index. Then, in the lock order, the
    counters first, in ONE statement guarded by `status = 'cancelled'` (so this never skips a
    row of a broadcast that is not cancelled, and the broadcast row is held from here on), then
    the rows' own guarded UPDATE (`AND status = 'pending'`: a row a running slice claimed
    meanwhile is left to that slice, whose re-check releases it as skipped), and the counters
    corrected by the rows that did not move. No per-row event: the row's status and reason are
    its evidence (invariant 9), like `sent`; the broadcast's "cancelled" event says how many.
    The UPDATE names the id range (after_id, last id], on the same index, not a list of ids.
    Does not commit: the caller commits each chunk.
    """
    now = now or utcnow()
    ids = list(session.connection().execute(
        select(_DELIVERIES.c.id)
        .where(_DELIVERIES.c.broadcast_id == broadcast_id,
               _DELIVERIES.c.status == DeliveryStatus.PENDING.value,
               _DELIVERIES.c.id > after_id)
        .order_by(_DELIVERIES.c.id).limit(limit)).scalars())
    if not ids:
        return 0, None
    pending, skipped = COUNTER["pending"].key, COUNTER["skipped"].key
    held = session.connection().execute(
        update(_BROADCASTS)
        .where(_BROADCASTS.c.id == broadcast_id, _BROADCASTS.c.status == "cancelled")
        .values({pending: _BROADCASTS.c[pending] - len(ids),
                 skipped: _BROADCASTS.c[skipped] + len(ids)})).rowcount
    if held != 1:
        return 0, None  # not cancelled (or gone): nothing of it is skipped here
    moved = session.connection().execute(
        update(_DELIVERIES)
        .where(_DELIVERIES.c.broadcast_id == broadcast_id,
               _DELIVERIES.c.status == DeliveryStatus.PENDING.value,
               _DELIVERIES.c.id > after_id, _DELIVERIES.c.id <= ids[-1])
        .values(status=DeliveryStatus.SKIPPED.value, reason=reason, updated_at=now)).rowcount
    if moved != len(ids):
        # A slice claimed some meanwhile (fewer moved), or released some back (more): the
        # counters move by exactly the rows that did.
        move_counters(session, broadcast_id, {("pending", "skipped"): moved - len(ids)})
    return moved, ids[-1]
