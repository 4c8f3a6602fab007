"""The audience snapshot: who a broadcast is for, written as `pending` deliveries in chunks.

Pressing Send must answer at once at any list size, so the press only decides the audience
(`begin`): the candidates are the subscribers whose id is at most the highest one at the press
(`snapshot_until`; people who join later are not in it) and a segment's rules are frozen on
the broadcast. The rows are then written by the worker (`prepare`, called before each slice
of the broadcast; it first counts a list's active subscriptions for the page's "about M"), one
chunk at a time in subscriber-id order (keyset), each chunk ONE transaction that:

1. moves the broadcast's cursor from where it was to the chunk's last id with a guarded UPDATE
   (`WHERE snapshot_cursor = <where it was> AND status IN ('queued', 'sending')`), which is
   also the lock order's first step (the broadcast row, then its deliveries);
2. inserts the chunk's audience as `pending` rows (UNIQUE(broadcast_id, subscriber_id) backs
   the cursor: a row can never be written twice);
3. adds the rows it wrote to `total` and `pending_count`, so the counters grow with each chunk.

So a chunk is all or nothing: a crash mid-chunk rolls it back and the next job starts again
from the committed cursor (nobody missed, nobody twice), and two runners of one broadcast
cannot both write a chunk (one moves the cursor, the other's UPDATE matches no row). A pause
or a cancel stops it (their move takes the broadcast row first; a chunk behind them finds the
status changed and writes nothing; cancel's skip of the pending rows sees every chunk that
committed before it). People who leave before their chunk are not written (the send-time
re-check would have skipped them anyway, invariant 3); `finish` is refused until the cursor
has reached `snapshot_until` (broadside.campaigns.broadcasts.lifecycle), so sending may start after the
first chunk without ever finishing early.

An audience that cannot be large (at most `INLINE_LIMIT` subscribers in the whole database) is
snapshotted whole in the press's own transaction, as it always was: small lists never wait
for the worker. Chunks are short (`CHUNK_SECONDS` per transaction, `PREPARE_SECONDS` per
job), so the worker's transactional mail still goes first and the sends are not starved. A
job whose sends would soon run out of written rows (fewer than `ahead` pending) prepares
longer first, up to `PREPARE_LONGEST`: the sender never waits on the snapshot for want of
time given to it, and a fast sender gives it more of its time.

On PostgreSQL most of a chunk's time is the deliveries' three FOREIGN KEY checks (broadcast,
subscriber, list: one trigger per row each; about three quarters of the INSERT's time under
EXPLAIN ANALYZE at 10,000 rows), not the audience query or the indexes.
"""

from __future__ import annotations

import json
import time

from sqlalchemy import Integer, Row, Select, bindparam, exists, func, insert, literal, select, text, update
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import ab_sending, local_time
from broadside.campaigns.broadcasts.non_openers import not_opened_clause
from broadside.core.db import rowcount
from broadside.core.events import record_event
from broadside.core.models import Broadcast, Delivery, Segment, Subscriber, Subscription
from broadside.core.models.sending import BroadcastStatus, DeliveryStatus
from broadside.core.site_settings import owner_zone
from broadside.core.timeutil import utcnow
from broadside.segments import service as segments
from broadside.segments.reach import delivery_list
from broadside.segments.rules import parse

# Snapshotted in the press's transaction when the database holds at most this many people.
INLINE_LIMIT = 10_000
# A chunk's transaction aims at about this long; a job prepares for about PREPARE_SECONDS.
CHUNK_SECONDS = 0.25
PREPARE_SECONDS = 0.5
PREPARE_LONGEST = 2.0  # while fewer than `ahead` rows are pending (see `prepare`)
FIRST_CHUNK = 5_000  # subscriber ids in the first chunk of a process, before any rate is known
MIN_CHUNK = 1_000
MAX_CHUNK = 200_000

_BROADCASTS = Broadcast.__table__
_DELIVERIES = Delivery.__table__  # Core: the ORM would read the chunk's bounds as rows
_ACTIVE = (BroadcastStatus.QUEUED.value, BroadcastStatus.SENDING.value)

# Subscriber ids per second the last chunks achieved in this process (sizes the next one).
_rate: dict[str, float] = {}

_MOVE_CURSOR = (
    update(_BROADCASTS)
    .where(_BROADCASTS.c.id == bindparam("_id"),
           _BROADCASTS.c.snapshot_cursor == bindparam("_from"),
           _BROADCASTS.c.status.in_(_ACTIVE))
    .values(snapshot_cursor=bindparam("_to"))
)

_NESTED_LOOPS = text("SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off")

_ADD_ROWS = (
    update(_BROADCASTS)
    .where(_BROADCASTS.c.id == bindparam("_id"))
    .values(total=_BROADCASTS.c.total + bindparam("_n"),
            pending_count=_BROADCASTS.c.pending_count + bindparam("_n"))
)


def begin(session: Session, broadcast: Broadcast, segment: Segment | None) -> str:
    """At the press, inside the `send` transition's transaction (the broadcast row is locked):
    decide the audience and, when it cannot be large, snapshot it whole. Returns the queued
    event's detail."""
    until = session.scalar(select(func.max(Subscriber.id))) or 0
    session.execute(
        update(Broadcast).where(Broadcast.id == broadcast.id).values(
            snapshot_cursor=0, snapshot_until=until, audience_estimate=None,
            audience_rules=json.dumps(segment.rules) if segment is not None else None,
            total=0, pending_count=0, waiting_until=None,
            # An A/B test's split, drawn from a seed recorded now (ab_sending), and each
            # time zone's moment for "at each reader's own hour" (local_time).
            ab_seed=ab_sending.seed() if broadcast.ab_test else None, ab_wait_until=None,
            ab_winner=None, ab_decided_at=None, ab_result=None,
            local_due=local_time.due_times(session, broadcast.send_at_local, utcnow(),
                                           owner_zone(session))
            if broadcast.send_at_local else None))
    small = session.scalar(select(Subscriber.id).order_by(Subscriber.id)
                           .offset(INLINE_LIMIT).limit(1)) is None
    if small:
        total = _chunk(session, broadcast.id, 0, until, until, announce=False)
        if total is None:  # cannot happen: the caller's transition just moved it to queued
            raise RuntimeError("the snapshot's cursor moved under the press")
        return f"{total} recipients"
    return "preparing the recipient list"


def _estimate(session: Session, broadcast_id: int) -> None:
    """A list's active subscriptions, counted once by the worker before its first chunk (the
    page's "about M"; at a million it is a few hundred ms the press need not wait for)."""
    row = session.execute(select(Broadcast.list_id, Broadcast.audience_rules,
                                 Broadcast.audience_estimate)
                          .where(Broadcast.id == broadcast_id)).one()
    if row.audience_estimate is not None or row.audience_rules is not None or row.list_id is None:
        return
    count = session.scalar(
        select(func.count()).select_from(Subscription)
        .where(Subscription.list_id == row.list_id, Subscription.status == "active")) or 0
    session.execute(update(_BROADCASTS).where(_BROADCASTS.c.id == broadcast_id,
                                              _BROADCASTS.c.audience_estimate.is_(None))
                    .values(audience_estimate=count))
    session.commit()


def _audience(session: Session, broadcast_id: int, list_id: int | None,
              rules: str | None) -> Select | None:
    """The snapshot's rows for subscriber ids in (:lo, :hi], in subscriber-id order (so the
    deliveries' ids, which the worker sends by, follow the order people joined, wherever their
    rows lie on disk): (broadcast, subscriber, pending, 0 attempts, their copy's list). A
    list: its active, unsuppressed subscribers. A segment:
    the people its frozen rules match among those active on some list and unsuppressed, one
    row each, with the list whose subscription is re-checked at their turn and whose
    unsubscribe link they get. None when there is no audience any more (its list deleted)."""
    pending = literal(DeliveryStatus.PENDING.value, Delivery.status.type)
    zero = literal(0, Delivery.attempts.type)
    this = literal(broadcast_id, Delivery.broadcast_id.type)
    lo, hi = bindparam("lo", type_=Integer()), bindparam("hi", type_=Integer())
    if rules is not None:
        group = parse(json.loads(rules))
        return select(this, Subscriber.id, pending, zero, delivery_list(group)).where(
            Subscriber.id > lo, Subscriber.id <= hi, segments.segment_clause(session, group)
        ).order_by(Subscriber.id)
    if list_id is None:
        return None
    # Driven by the subscribers' primary key (the chunk's id range), each person's
    # subscription probed by UNIQUE(subscriber_id, list_id): a join would let the planner
    # scan the whole list by (list_id, status) for every chunk.
    return select(this, Subscriber.id, pending, zero, literal(list_id, Delivery.list_id.type)).where(
        Subscriber.id > lo, Subscriber.id <= hi, Subscriber.suppression.is_(None),
        exists().where(Subscription.subscriber_id == Subscriber.id,
                       Subscription.list_id == list_id, Subscription.status == "active")
    ).order_by(Subscriber.id)


def _per_reader(audience: Select, columns: list[str], row: Row) -> tuple[Select, list[str]]:
    """The audience narrowed and its rows completed as the broadcast asks: a resend only to
    the readers of the original who have not opened it (non_openers), each reader's A/B
    variant (ab_sending) and their own hour's due time (local_time)."""
    if row.resend_of_id is not None:
        audience = audience.where(not_opened_clause(row.resend_of_id))
    variant = ab_sending.variant_expression(row.ab_test, row.ab_seed)
    if variant is not None:
        audience, columns = audience.add_columns(variant), [*columns, "variant"]
    due = local_time.due_expression(row.local_due)
    if due is not None:
        audience, columns = audience.add_columns(due), [*columns, "next_attempt_at"]
    return audience, columns


def _chunk(session: Session, broadcast_id: int, lo: int, hi: int, until: int, *,
           announce: bool = True) -> int | None:
    """Snapshot subscriber ids (lo, hi] in the caller's transaction: the guarded cursor move
    first, then the rows, then the counters. Returns the rows written, or None when the
    cursor was not at `lo` or the broadcast is no longer queued or sending (nothing written).
    The last chunk appends a "prepared" event (`announce`; not when the press snapshots it
    whole: its "queued" event says it). Does not commit."""
    if rowcount(session.execute(_MOVE_CURSOR, {"_id": broadcast_id, "_from": lo, "_to": hi})) != 1:
        return None
    row = session.execute(select(Broadcast.list_id, Broadcast.audience_rules, Broadcast.ab_test,
                                 Broadcast.ab_seed, Broadcast.local_due, Broadcast.resend_of_id)
                          .where(Broadcast.id == broadcast_id)).one()
    audience = _audience(session, broadcast_id, row.list_id, row.audience_rules)
    columns = ["broadcast_id", "subscriber_id", "status", "attempts", "list_id"]
    if audience is not None:
        audience, columns = _per_reader(audience, columns, row)
    written = 0
    if audience is not None:
        if session.get_bind().dialect.name == "postgresql":
            # A chunk is a short range of the subscribers' primary key: each person's rows are
            # probed by index (every audience condition is correlated on subscriber_id and
            # indexed). Left to itself the planner may hash the whole list's subscriptions for
            # every chunk, which makes the snapshot quadratic. For this transaction only.
            session.execute(_NESTED_LOOPS)
        written = rowcount(session.execute(
            insert(_DELIVERIES).from_select(columns, audience),
            {"lo": lo, "hi": hi}))
        if written < 0:  # a driver that does not say: count them by the unique index
            written = session.scalar(
                select(func.count()).select_from(Delivery).where(
                    Delivery.broadcast_id == broadcast_id,
                    Delivery.subscriber_id > lo, Delivery.subscriber_id <= hi)) or 0
    if written:
        session.execute(_ADD_ROWS, {"_id": broadcast_id, "_n": written})
    if hi >= until and announce:
        total = session.scalar(select(Broadcast.total).where(Broadcast.id == broadcast_id))
        record_event(session, "prepared", broadcast_id=broadcast_id,
                     detail=f"{total} recipients")
    return written


def _next_bound(session: Session, lo: int, until: int, size: int) -> int:
    """The id that ends a chunk of `size` subscriber ids after `lo` (keyset over the
    primary key; never past `until`)."""
    bound = session.scalar(
        select(Subscriber.id).where(Subscriber.id > lo, Subscriber.id <= until)
        .order_by(Subscriber.id).offset(size - 1).limit(1))
    return until if bound is None else bound


def prepare(session: Session, broadcast_id: int, *, seconds: float = PREPARE_SECONDS,
            ahead: int = 0, longest: float = PREPARE_LONGEST) -> bool:
    """Snapshot chunks of a queued or sending broadcast for about `seconds`, each committed,
    and on up to `longest` seconds while fewer than `ahead` of its rows are pending (the
    rows its next slice may send). Returns whether the snapshot is complete (True too for a
    broadcast with nothing to do: a finished, paused or cancelled one writes nothing here)."""
    started = time.monotonic()
    deadline = started + seconds
    dialect = session.get_bind().dialect.name
    while True:
        state = session.execute(
            select(Broadcast.status, Broadcast.snapshot_cursor, Broadcast.snapshot_until,
                   Broadcast.pending_count)
            .where(Broadcast.id == broadcast_id)).first()
        if state is None or state.snapshot_cursor >= state.snapshot_until:
            session.commit()
            return True
        if state.status not in _ACTIVE:
            session.commit()
            return False
        if state.snapshot_cursor == 0:
            _estimate(session, broadcast_id)
        size = int(min(MAX_CHUNK, max(MIN_CHUNK, _rate.get(dialect, FIRST_CHUNK / CHUNK_SECONDS)
                                      * CHUNK_SECONDS)))
        began = time.monotonic()
        try:
            hi = _next_bound(session, state.snapshot_cursor, state.snapshot_until, size)
            written = _chunk(session, broadcast_id, state.snapshot_cursor, hi, state.snapshot_until)
            session.commit()
        except Exception:
            session.rollback()
            raise
        took = max(time.monotonic() - began, 1e-3)
        _rate[dialect] = size / took
        if written is None:
            continue  # it moved under us (paused, cancelled, another runner): read it again
        if hi >= state.snapshot_until:
            return True
        now = time.monotonic()
        if now >= deadline and (now >= started + longest or state.pending_count + written >= ahead):
            return False
