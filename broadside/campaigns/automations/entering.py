"""People entering automations: the entry and every step's message, written together.

Entering is set-based: one `INSERT ... SELECT` of entries (UNIQUE per automation and person,
ON CONFLICT DO NOTHING, so a double click, a re-import or two racing requests enter a person
once) RETURNING exactly who this call entered, then one `INSERT ... SELECT` of messages per
step from exactly those entries (UNIQUE per step and person: the send log). An entry is itself an
append-only record (when, how, in which evaluation), never updated, so it needs no event of
its own, as a broadcast's snapshot writes no event per pending row; each message's moves
append theirs through the ledger (invariant 9). Each step's message is due at the person's
own time: when they entered plus the delays of the steps up to it. Nothing here commits: a
welcome is written in the transaction of the subscription it welcomes (the sign-up
confirmation, the owner's page, the API, each batch of an import), so a crash leaves nobody
welcomed who did not join and nobody joined who should have been welcomed.

Lifecycle campaigns (`evaluate`) run in priority order in one evaluation; a person entered by
a higher-priority automation of this evaluation is not entered by a lower one (the entry
records the evaluation), and an evaluation cut short by its time budget keeps its number for
the next run, which continues it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, insert, literal, or_, select, update
from sqlalchemy.orm import Session

from broadside.core.db import dialect_insert
from broadside.core.models import (
    Automation,
    AutomationEntry,
    AutomationMessage,
    AutomationStep,
    Segment,
    Subscriber,
)
from broadside.core.models.automations import ENTERING
from broadside.core.timeutil import utcnow
from broadside.segments import reach as segment_reach
from broadside.segments import service as segments
from broadside.webhooks import emitter

_ENTRIES = AutomationEntry.__table__
_MESSAGES = AutomationMessage.__table__

EVALUATION_BATCH = 10_000  # people entered per statement group in a lifecycle evaluation
EVALUATION_BUDGET_SECONDS = 3.0  # one evaluation job's share of the worker, like a slice


def live_steps(session: Session, automation_id: int) -> list[AutomationStep]:
    return list(session.scalars(
        select(AutomationStep)
        .where(AutomationStep.automation_id == automation_id, AutomationStep.removed_at.is_(None))
        .order_by(AutomationStep.position)
    ))


def enter(session: Session, automation: Automation, people: ColumnElement[bool],
          their_entries: ColumnElement[bool], *, source: str,
          list_for: ColumnElement[Any] | int | None, evaluation: int | None = None,
          now: datetime | None = None) -> int:
    """Enter the people `people` selects (a condition over `Subscriber`; `their_entries` is
    the same set as a condition over entries, e.g. their ids or an id range) into one
    automation; returns how many entered (those already in it are left alone). `list_for`:
    the list their messages are re-checked against (an id, or an expression over
    `Subscriber`). Neither condition carries a long list of ids: ten thousand bound
    parameters cost more to send than the rows cost to write. Does not commit."""
    now = now or utcnow()
    if not isinstance(list_for, ColumnElement):
        list_for = literal(list_for, _ENTRIES.c.list_id.type)
    entered_ids = list(session.execute(
        dialect_insert(session, _ENTRIES)
        .from_select(
            ["automation_id", "subscriber_id", "source", "evaluation", "entered_at", "list_id"],
            select(literal(automation.id, _ENTRIES.c.automation_id.type), Subscriber.id,
                   literal(source, _ENTRIES.c.source.type),
                   literal(evaluation, _ENTRIES.c.evaluation.type),
                   literal(now, _ENTRIES.c.entered_at.type), list_for)
            # (SQLite parses "INSERT ... SELECT ... ON CONFLICT" only with a WHERE.)
            .where(people),
        )
        .on_conflict_do_nothing(index_elements=["subscriber_id", "automation_id"])
        .returning(_ENTRIES.c.subscriber_id)
    ).scalars())
    entered = len(entered_ids)
    if entered:
        _emit_entered(session, automation, entered_ids, now)
    if not entered:
        return entered
    # The entries this call made: among these people, this automation's, stamped with this
    # exact moment (anyone already in it entered at another).
    mine = and_(their_entries, _ENTRIES.c.automation_id == automation.id,
                _ENTRIES.c.entered_at == now)
    offset = 0
    for step in live_steps(session, automation.id):
        if step.revision_id is None:
            continue  # a step never saved with content has nothing to send
        offset += step.delay_seconds
        if automation.record_only and step.codes_prefix is None:
            # Record only: nothing is sent. A step that mints a code still gets its message
            # row, the send log its code is minted in (the worker logs it, sends nothing).
            continue
        session.execute(insert(_MESSAGES).from_select(
            ["automation_id", "step_id", "position", "revision_id", "subscriber_id", "list_id",
             "status", "due_at", "attempts"],
            select(_ENTRIES.c.automation_id, literal(step.id, _MESSAGES.c.step_id.type),
                   literal(step.position, _MESSAGES.c.position.type),
                   literal(step.revision_id, _MESSAGES.c.revision_id.type),
                   _ENTRIES.c.subscriber_id, _ENTRIES.c.list_id,
                   literal("pending", _MESSAGES.c.status.type),
                   literal(now + timedelta(seconds=offset), _MESSAGES.c.due_at.type),
                   literal(0, _MESSAGES.c.attempts.type)).where(mine),
        ))
    return entered


def _emit_entered(session: Session, automation: Automation, subscriber_ids: list[int],
                  now: datetime) -> None:
    """`automation.entered` for each person who entered, in bulk (only if an endpoint wants it)."""
    emitter.emit_many(session, "automation.entered", lambda: [
        {"automation": {"id": automation.id, "name": automation.name}, "subscriber": person}
        for person in emitter.people(session, subscriber_ids).values()], now)


def welcome_automations(session: Session, list_id: int) -> list[Automation]:
    """The automations that welcome people joining this list, and take them now."""
    return list(session.scalars(
        select(Automation).where(Automation.trigger_type == "joined_list",
                                 Automation.list_id == list_id,
                                 Automation.status.in_(ENTERING))
        .order_by(Automation.id)
    ))


def enter_joined(session: Session, list_id: int, subscriber_ids: Sequence[int], *, source: str,
                 now: datetime | None = None) -> int:
    """Welcome people who have just become active on a list, in the caller's transaction:
    they enter every enabled automation triggered by joining it. Returns the entries made."""
    ids = sorted(set(subscriber_ids))
    if not ids:
        return 0
    automations = welcome_automations(session, list_id)
    entered = 0
    for automation in automations:
        for start in range(0, len(ids), 1000):
            chunk = ids[start:start + 1000]
            entered += enter(session, automation, Subscriber.id.in_(chunk),
                             _ENTRIES.c.subscriber_id.in_(chunk), source=source, list_for=list_id,
                             now=now)
    return entered


# ---------------------------------------------------------------- lifecycle campaigns


@dataclass
class EvaluationResult:
    evaluation: int | None = None
    entered: dict[int, int] | None = None  # automation id -> people entered in this run
    finished: bool = True  # False: the budget ran out; the rest is picked up by the next run


_CAMPAIGNS = and_(Automation.trigger_type == "segment", Automation.status.in_(ENTERING),
                  Automation.segment_id.is_not(None))


def due_campaigns(session: Session, now: datetime | None = None) -> list[Automation]:
    """Segment-triggered automations whose evaluation is due, highest priority first."""
    now = now or utcnow()
    candidates = session.scalars(
        select(Automation).where(_CAMPAIGNS)
        .order_by(Automation.priority.desc(), Automation.id)
    ).all()
    return [a for a in candidates
            if a.evaluating is not None or a.last_evaluated_at is None
            or a.last_evaluated_at + timedelta(hours=a.every_hours) <= now]


def evaluate(session: Session, *, now: datetime | None = None,
             budget_seconds: float = EVALUATION_BUDGET_SECONDS,
             batch: int = EVALUATION_BATCH) -> EvaluationResult:
    """One lifecycle evaluation (or its continuation): every due segment automation in
    priority order enters the people its segment matches who never entered it and whom no
    higher-priority automation of this evaluation entered. Commits after each batch; stops at
    a batch boundary when the budget is spent."""
    now = now or utcnow()
    started = time.monotonic()
    due = due_campaigns(session, now)
    if not due:
        session.commit()
        return EvaluationResult()
    carried = [a.evaluating for a in due if a.evaluating is not None]
    evaluation = max(carried) if carried else int(now.timestamp() * 1_000_000)
    session.execute(update(Automation).where(Automation.id.in_([a.id for a in due]))
                    .values(evaluating=evaluation).execution_options(synchronize_session=False))
    session.commit()
    result = EvaluationResult(evaluation, {})
    assert result.entered is not None
    for automation in due:
        segment = session.get(Segment, automation.segment_id)
        done = segment is None
        after = 0
        while not done:
            if time.monotonic() - started >= budget_seconds:
                result.finished = False
                return result
            assert segment is not None
            group = segments.rules_of(segment)
            already = exists().where(_ENTRIES.c.subscriber_id == Subscriber.id,
                                     or_(_ENTRIES.c.automation_id == automation.id,
                                         _ENTRIES.c.evaluation == evaluation))
            # The batch is read first: the selection itself changes once they have entered.
            # Keyset: each batch goes on from the last person the previous one looked at, so
            # the people entered already are not read again (a continuation starts over once).
            matches = and_(segments.segment_clause(session, group), ~already)
            people = list(session.scalars(select(Subscriber.id)
                                          .where(Subscriber.id > after, matches)
                                          .order_by(Subscriber.id).limit(batch)))
            if not people:
                entered = 0
            else:
                # The batch as an id range: (after, last], the people in it matching.
                last = people[-1]
                entered = enter(
                    session, automation,
                    and_(Subscriber.id > after, Subscriber.id <= last, matches),
                    and_(_ENTRIES.c.subscriber_id > after, _ENTRIES.c.subscriber_id <= last),
                    source="segment", list_for=segment_reach.delivery_list(group),
                    evaluation=evaluation, now=utcnow())
                after = last
            result.entered[automation.id] = result.entered.get(automation.id, 0) + entered
            done = len(people) < batch
            if done:
                session.execute(update(Automation).where(Automation.id == automation.id)
                                .values(evaluating=None, last_evaluated_at=now)
                                .execution_options(synchronize_session=False))
            session.commit()
        if segment is None:
            session.execute(update(Automation).where(Automation.id == automation.id)
                            .values(evaluating=None, last_evaluated_at=now)
                            .execution_options(synchronize_session=False))
            session.commit()
    return result
