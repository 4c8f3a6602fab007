"""A subscription's lifecycle: the one place that writes `Subscription.status` (and the fields
that move with it: `confirmed_at`, `unsubscribed_at`, `unsubscribe_source`), that creates a
subscription and that deletes one for the owner.

Every change is a named transition in `TRANSITIONS`: the states it may leave (none: the row
is created), the state it enters (none: the row is deleted), the fields it sets, the event it
appends and the outgoing webhook it emits. Each is ONE guarded statement (`... WHERE
status IN (<from-states>)`, an INSERT ... ON CONFLICT DO NOTHING for a creation) whose row
count decides whether the event is appended, in the caller's transaction: a double click, a
retried one-click POST or two racing requests change the row once and record it once.
Nothing here commits.

The transitions, and why:

- `subscribe`: (none) -> active. The owner adds someone (their page, the API, a bulk
  "add to list") or imports them saying they opted in. Only a subscription that does not
  exist is created: an existing one keeps its status, so nobody who left is re-added.
- `sign_up`: (none) -> unconfirmed. The public form, or an import that asks people to
  confirm; the double opt-in email follows (`broadside.audience.signup`).
- `confirm`: unconfirmed -> active when the reader presses Confirm on the newest link mailed
  to them (the link's time is `confirmation_sent_at`, in the guard). unsubscribed -> active
  only when that link was mailed AFTER they left, i.e. by a new sign-up: an old link never
  brings back someone who has unsubscribed since (`confirmable` says the same in Python).
- `leave`: unconfirmed | active -> unsubscribed, for every way of leaving (a link in an email,
  one-click, the preferences page, the owner, the API, a bulk unsubscribe); `unsubscribe_source`
  says which.
- `rejoin`: unsubscribed -> active, only by the person's own action (the undo button and the
  preferences page behind their signed link); the link proves they read the address, so it
  counts as a confirmation if there was none. An unconfirmed subscription is not touched:
  undo cannot skip a pending double opt-in.
- `remove`: unconfirmed | active -> (deleted), the owner's bulk "remove from list", as if they
  had never been added. An unsubscribed subscription is kept: it is the record that stops
  anyone re-adding them.

There is no owner "re-add" of someone who left, and an import never touches an existing
subscription: an unsubscribed person in a file stays unsubscribed (counted as
`skipped_unsubscribed`), someone unconfirmed stays unconfirmed (an "opted_in" file does not
confirm them), someone active is not downgraded by a "confirm" file. Suppression (bounced,
complained, blocked) is the subscriber's, not the subscription's: it is never a status here.

Set-based variants keep the bulk paths fast: `subscribe_many`, `leave_many` and
`remove_many` for the owner's bulk actions (a thousand people per statement), and the
statements an import's batch creates its subscriptions with (`join_staged_*`: thousands of
rows per statement, from the batch's staging table, `broadside.audience.transfer.batch`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BindParameter,
    Connection,
    DateTime,
    bindparam,
    delete,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.orm import Session

from broadside.core.db import dialect_insert, rowcount
from broadside.core.events import actor_columns, record_event
from broadside.core.models import Event, Subscriber, Subscription
from broadside.core.models.audience import SubscriptionStatus
from broadside.core.timeutil import utcnow
from broadside.webhooks import emitter

UNCONFIRMED = SubscriptionStatus.UNCONFIRMED
ACTIVE = SubscriptionStatus.ACTIVE
UNSUBSCRIBED = SubscriptionStatus.UNSUBSCRIBED
STAYING = (UNCONFIRMED, ACTIVE)  # on the list, whether confirmed or not

_SUBSCRIPTIONS = Subscription.__table__
_c = _SUBSCRIPTIONS.c
NOW = bindparam("_now", type_=DateTime())


def given(name: str) -> BindParameter:
    """A value the caller passes by name to `move` (e.g. how they left)."""
    return bindparam(name)


# `confirm`'s extra guard: the link is the newest one mailed (a new email makes older links
# stop working), and someone who left is brought back only by a link mailed after they left.
# Every way of leaving sets unsubscribed_at; a row without one (written before it was kept)
# is judged by the link alone, as it was before this guard.
_NEWEST_LINK_SINCE_LEAVING = (
    (_c.confirmation_sent_at == bindparam("sent_at", type_=DateTime()))
    & or_(_c.status != UNSUBSCRIBED.value, _c.unsubscribed_at.is_(None),
          _c.confirmation_sent_at > _c.unsubscribed_at)
)


@dataclass(frozen=True)
class Transition:
    name: str
    sources: tuple[SubscriptionStatus, ...]  # (): the subscription is created
    target: SubscriptionStatus | None  # None: the subscription is deleted
    event: str  # the event kind appended when the row moved
    sets: Mapping[str, Any] = field(default_factory=dict)
    guard: Any = None  # an extra WHERE clause, beyond the from-states
    webhook: str | None = None  # the outgoing `subscriber.*` event, where there is one


def _table(*transitions: Transition) -> dict[str, Transition]:
    return {t.name: t for t in transitions}


TRANSITIONS: dict[str, Transition] = _table(
    Transition("subscribe", (), ACTIVE, "subscribed", webhook="subscriber.created"),
    Transition("sign_up", (), UNCONFIRMED, "subscribed", webhook="subscriber.created"),
    Transition("confirm", (UNCONFIRMED, UNSUBSCRIBED), ACTIVE, "confirmed",
               {"confirmed_at": NOW, "unsubscribed_at": None, "unsubscribe_source": None},
               guard=_NEWEST_LINK_SINCE_LEAVING),
    Transition("leave", STAYING, UNSUBSCRIBED, "unsubscribed",
               {"unsubscribed_at": NOW, "unsubscribe_source": given("source")},
               webhook="subscriber.unsubscribed"),
    Transition("rejoin", (UNSUBSCRIBED,), ACTIVE, "resubscribed",
               {"unsubscribed_at": None, "unsubscribe_source": None,
                "confirmed_at": func.coalesce(_c.confirmed_at, NOW)}),
    Transition("remove", STAYING, None, "removed"),
)


def confirmable(status: str, confirmation_sent_at: datetime | None,
                unsubscribed_at: datetime | None) -> bool:
    """Whether a confirmation link mailed at `confirmation_sent_at` may still make this
    subscription active: `confirm`'s guard, read in Python (the page before the button)."""
    if status == UNCONFIRMED:
        return True
    return (status == UNSUBSCRIBED and confirmation_sent_at is not None
            and (unsubscribed_at is None or confirmation_sent_at > unsubscribed_at))


def _update(transition: Transition):
    assert transition.sources and transition.target is not None
    criteria = [_c.subscriber_id == bindparam("_sid"), _c.list_id == bindparam("_lid"),
                _c.status.in_([s.value for s in transition.sources])]
    if transition.guard is not None:
        criteria.append(transition.guard)
    return (update(_SUBSCRIPTIONS).where(*criteria)
            .values(status=transition.target.value, **transition.sets))


_statements = {t.name: _update(t) for t in TRANSITIONS.values()
               if t.sources and t.target is not None}


def move(session: Session, subscriber_id: int, list_id: int, name: str, *,
         detail: str = "", broadcast_id: int | None = None,
         data: dict[str, Any] | None = None, webhook: dict[str, Any] | None = None,
         **values: Any) -> bool:
    """Carry out transition `name` on one subscription if (and only if) it is in one of the
    transition's from-states (and its guard holds). Returns whether it moved; when it did,
    appends the event (with `detail`, `broadcast_id`, `data`) and emits the transition's
    webhook, if any, with the `webhook` fields. `values` are the ones the transition takes
    from the caller (`given`; `sent_at` for `confirm`). Does not commit."""
    moved = rowcount(session.execute(
        _statements[name],
        {"_sid": subscriber_id, "_lid": list_id, "_now": utcnow(), **values})) == 1
    if moved:
        _evidence(session, TRANSITIONS[name], subscriber_id, list_id, detail=detail,
                  broadcast_id=broadcast_id, data=data, webhook=webhook)
    return moved


def create(session: Session, subscriber_id: int, list_id: int, name: str, *, detail: str,
           source: str) -> bool:
    """`subscribe` or `sign_up`: create the subscription unless one exists (whatever its
    status: it is kept). Returns whether it was created; then appends the event and emits
    `subscriber.created`. Does not commit."""
    transition = TRANSITIONS[name]
    assert not transition.sources and transition.target is not None
    # RETURNING says whether this INSERT made the row (rowcount is -1 on psycopg here).
    created = session.execute(
        dialect_insert(session, _SUBSCRIPTIONS)
        .values(subscriber_id=subscriber_id, list_id=list_id, status=transition.target.value,
                created_at=utcnow())
        .on_conflict_do_nothing(index_elements=["subscriber_id", "list_id"])
        .returning(_c.id)
    ).first() is not None
    if created:
        _evidence(session, transition, subscriber_id, list_id, detail=detail,
                  webhook={"status": transition.target.value, "source": source})
    return created


def _evidence(session: Session, transition: Transition, subscriber_id: int, list_id: int, *,
              detail: str, broadcast_id: int | None = None,
              data: dict[str, Any] | None = None, webhook: dict[str, Any] | None = None) -> None:
    record_event(session, transition.event, subscriber_id=subscriber_id, list_id=list_id,
                 broadcast_id=broadcast_id, detail=detail, data=data)
    if transition.webhook is not None:
        emitter.emit_subscriber(session, transition.webhook, subscriber_id, list_id=list_id,
                                **(webhook or {}))


def _events(session: Session, transition: Transition, pairs: Sequence[tuple[int, int]], now: datetime,
            *, detail: str, data: dict[str, Any] | None = None) -> None:
    who = actor_columns()
    session.execute(insert(Event), [
        {"kind": transition.event, "subscriber_id": sid, "list_id": lid, "created_at": now,
         "detail": detail, "data": data, **who} for sid, lid in pairs])


def subscribe_many(session: Session, list_id: int, subscriber_ids: Sequence[int], *,
                   detail: str, source: str) -> list[int]:
    """`subscribe`, set-based: put these people on the list as active unless they have a
    subscription to it already (whatever its status: it is kept); one event each and
    `subscriber.created`. Returns who was put on it, in id order. Does not commit."""
    transition = TRANSITIONS["subscribe"]
    assert transition.target is not None
    status = transition.target.value
    now = utcnow()
    people = select(Subscriber.id, literal(list_id), literal(now, DateTime()),
                    literal(status)).where(
        Subscriber.id.in_(list(subscriber_ids)),
        ~exists().where(_c.subscriber_id == Subscriber.id, _c.list_id == list_id))
    joined = sorted(session.scalars(
        dialect_insert(session, _SUBSCRIPTIONS)
        .from_select(["subscriber_id", "list_id", "created_at", "status"], people)
        .on_conflict_do_nothing(index_elements=["subscriber_id", "list_id"])
        .returning(_c.subscriber_id)))
    if joined:
        _events(session, transition, [(sid, list_id) for sid in joined], now, detail=detail)
        emitter.emit_many(session, "subscriber.created", lambda: [
            {"subscriber": person, "list_id": list_id, "status": status, "source": source}
            for person in emitter.people(session, joined).values()], now)
    return joined


def leave_many(session: Session, subscriber_ids: Sequence[int], list_id: int | None, *,
               source: str) -> list[tuple[int, int]]:
    """`leave`, set-based: these people leave the list (every list they are on: None); one
    event each and `subscriber.unsubscribed`, as `move` writes them. Returns the
    (subscriber, list) pairs that changed, in order. Does not commit."""
    transition = TRANSITIONS["leave"]
    assert transition.target is not None
    now = utcnow()
    which: list[Any] = [_c.subscriber_id.in_(list(subscriber_ids)),
             _c.status.in_([s.value for s in transition.sources])]
    if list_id is not None:
        which.append(_c.list_id == list_id)
    pairs = sorted((sid, lid) for sid, lid in session.execute(
        update(_SUBSCRIPTIONS).where(*which)
        .values(status=transition.target.value, unsubscribed_at=now, unsubscribe_source=source)
        .returning(_c.subscriber_id, _c.list_id)))
    if pairs:
        _events(session, transition, pairs, now, detail=source,
                data={"source": source, "broadcast_id": None})
        assert transition.webhook is not None
        def datas() -> list[dict[str, Any]]:
            found = emitter.people(session, [sid for sid, _ in pairs])
            return [{"subscriber": found.get(sid), "list_id": lid, "source": source,
                     "broadcast_id": None} for sid, lid in pairs]

        emitter.emit_many(session, transition.webhook, datas, now)
    return pairs


def remove_many(session: Session, list_id: int, subscriber_ids: Sequence[int], *,
                detail: str) -> list[int]:
    """`remove`, set-based: delete these people's subscriptions to the list unless they left
    it; one event each. Returns who was removed. Does not commit."""
    transition = TRANSITIONS["remove"]
    removed = list(session.scalars(
        delete(Subscription).where(
            Subscription.list_id == list_id, Subscription.subscriber_id.in_(subscriber_ids),
            Subscription.status.in_([s.value for s in transition.sources]))
        .returning(Subscription.subscriber_id).execution_options(synchronize_session=False)))
    if removed:
        _events(session, transition, [(sid, list_id) for sid in sorted(removed)], utcnow(),
                detail=detail)
    return removed


# An import's batch, set-based. The batch is staged in `import_stage` (email, name,
# attributes) on the batch's connection and its new people are in `subscribers` already,
# except for `_PG_ALL_NEW`, which creates them too. Each statement is `subscribe` or
# `sign_up` for thousands of people at once: only a subscription that does not exist is
# created (ON CONFLICT DO NOTHING: a sign-up racing the import keeps its own row and
# event), never for a suppressed person, with its event (invariant 9) in the same statement
# on PostgreSQL and in one executemany on SQLite.
_PG_EVIDENCE = """evidence AS (
  INSERT INTO events (kind, subscriber_id, list_id, created_at, detail)
  SELECT 'subscribed', subscriber_id, :list_id, :now, :detail FROM joined)"""
_SQLITE_JOIN = """
INSERT INTO subscriptions (subscriber_id, list_id, created_at, status)
SELECT s.id, :list_id, :now, :status FROM import_stage AS st
CROSS JOIN subscribers AS s ON s.email = st.email
WHERE s.suppression IS NULL AND NOT EXISTS (
  SELECT 1 FROM subscriptions AS x WHERE x.subscriber_id = s.id AND x.list_id = :list_id)
ON CONFLICT (subscriber_id, list_id) DO NOTHING
RETURNING subscriber_id
"""
# Through the DBAPI with tuples (SQLAlchemy's per-row parameter processing was a tenth of a
# large import); `now` is bound as the DateTime column's own bind processor writes it.
_SQLITE_EVENTS = ("INSERT INTO events (kind, subscriber_id, list_id, created_at, detail) "
                  "VALUES ('subscribed', ?, ?, ?, ?)")
# PostgreSQL's general case: what each row already was on the list (suppressed, unsubscribed)
# and the subscriptions and events, from one snapshot and one pass of lookups.
_PG_CLASSIFY_JOIN_AND_EVENTS = f"""
WITH people AS MATERIALIZED (
  SELECT s.id, s.suppression, sub.id AS subscription, sub.status
  FROM import_stage AS st
  JOIN subscribers AS s ON s.email = st.email
  LEFT JOIN subscriptions AS sub ON sub.subscriber_id = s.id AND sub.list_id = :list_id
), joined AS (
  INSERT INTO subscriptions (subscriber_id, list_id, created_at, status)
  SELECT id, :list_id, :now, :status FROM people
  WHERE suppression IS NULL AND subscription IS NULL
  ON CONFLICT (subscriber_id, list_id) DO NOTHING
  RETURNING subscriber_id
), {_PG_EVIDENCE}
SELECT (SELECT count(*) FILTER (WHERE suppression IS NOT NULL) FROM people),
  (SELECT count(*) FILTER (WHERE suppression IS NULL AND status = 'unsubscribed') FROM people),
  ARRAY(SELECT subscriber_id FROM joined)
"""
# PostgreSQL, a batch of addresses nobody had (a first import): the people, their
# subscriptions and events in one statement, with no lookups. Nobody else can see, suppress
# or subscribe a person this statement creates, so each is put on the list; without
# ON CONFLICT a row is inserted without the speculative insertion's extra work. A sign-up
# that created one of these addresses since the batch was read makes it fail as a whole
# (unique violation): the caller runs it in a savepoint and then takes the general way.
_PG_ALL_NEW = f"""
WITH new AS (
  INSERT INTO subscribers (email, name, attributes, created_at, soft_bounce_count)
  SELECT email, name, attributes::json, :now, 0 FROM import_stage
  RETURNING id
), joined AS (
  INSERT INTO subscriptions (subscriber_id, list_id, created_at, status)
  SELECT id, :list_id, :now, :status FROM new
  RETURNING subscriber_id
), {_PG_EVIDENCE}
SELECT subscriber_id FROM joined
"""


def _staged(statement: str):
    return text(statement).bindparams(bindparam("now", type_=DateTime()))


def joining_status(asking: bool) -> SubscriptionStatus:
    """The status an import's people join in: `sign_up`'s when they are asked to confirm,
    `subscribe`'s when the owner says they opted in."""
    target = TRANSITIONS["sign_up" if asking else "subscribe"].target
    assert target is not None
    return target


def _values(list_id: int, now: datetime, asking: bool, detail: str) -> dict[str, Any]:
    return {"list_id": list_id, "now": now, "status": joining_status(asking).value,
            "detail": detail}


def join_staged_sqlite(connection: Connection, list_id: int, now: datetime, *, asking: bool,
                       detail: str) -> list[int]:
    """SQLite: put the staged people on the list; returns who was put on it."""
    joined = list(connection.execute(
        _staged(_SQLITE_JOIN), _values(list_id, now, asking, detail)).scalars().all())
    if joined:
        process = DateTime().dialect_impl(connection.dialect).bind_processor(connection.dialect)
        stamp = process(now) if process else now
        connection.exec_driver_sql(
            _SQLITE_EVENTS, [(sid, list_id, stamp, detail) for sid in joined])
    return joined


def join_staged_postgres(connection: Connection, list_id: int, now: datetime, *,
                         asking: bool, detail: str) -> tuple[int, int, list[int]]:
    """PostgreSQL: put the staged people on the list; returns (suppressed, unsubscribed:
    the rows left off it, as they were before this statement, and who was put on it)."""
    suppressed, unsubscribed, joined = connection.execute(
        _staged(_PG_CLASSIFY_JOIN_AND_EVENTS), _values(list_id, now, asking, detail)).one()
    return int(suppressed), int(unsubscribed), list(joined)


def create_and_join_staged_postgres(connection: Connection, list_id: int, now: datetime, *,
                                    asking: bool, detail: str) -> list[int]:
    """PostgreSQL, a batch of addresses nobody had: create the people and put them all on
    the list; raises IntegrityError if one of them exists (the caller's savepoint)."""
    return list(connection.execute(
        _staged(_PG_ALL_NEW), _values(list_id, now, asking, detail)).scalars().all())
