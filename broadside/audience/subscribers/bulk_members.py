"""The set of people a bulk action was confirmed for: written once, at the confirmation, read
batch by batch by the worker, deleted as it goes.

What it guarantees:

- The set is fixed when the owner confirms (`fix`, in the transaction that stores the action's
  row): the selected ids, or everyone the filter matches then (with an id up to the frozen
  highest one). The worker acts on nobody outside it, so someone who comes to match the
  filter afterwards (renamed, unsubscribed meanwhile) is never included: "Erase 1 person?"
  erases at most that one.
- At run time a batch of the set is intersected with the filter as it matches now
  (`still_matching`): someone of the set who no longer matches (or was erased meanwhile) is
  left alone, and counted.
- The rows are written by one INSERT ... SELECT (the ids never pass through Python, so a
  million people cost the database's time, not the web process's memory) and read by keyset
  on their primary key; each batch deletes the rows it went through in its own transaction
  (`forget`), a failed action all of its own, so the table only ever holds what is left to do.
  On SQLite that statement holds the one write lock while it scans the filter; reading the ids
  ahead in chunks and writing them in chunks was tried and held it longer (a million people:
  0.8-0.9 s against 0.3-0.8 s, the Python-side write being slower than the whole statement;
  bench/bulk_confirm.py measures the wait).
"""

from __future__ import annotations

from sqlalchemy import delete, insert, literal, select
from sqlalchemy.orm import Session

from broadside.audience.subscribers.search import Filters, filter_clauses
from broadside.core.db import rowcount
from broadside.core.models import BulkActionMember, Subscriber

Members = BulkActionMember.__table__


def fix(session: Session, action_id: int, *, subscriber_ids: list[int] | None,
        filters: Filters | None, max_id: int) -> int:
    """Write the set in the caller's transaction; returns how many people it holds."""
    if subscriber_ids is not None:
        found = select(literal(action_id), Subscriber.id).where(
            Subscriber.id.in_(subscriber_ids))
    else:
        found = select(literal(action_id), Subscriber.id).where(
            *filter_clauses(session, filters or Filters()), Subscriber.id <= max_id)
    result = session.execute(insert(Members).from_select(["action_id", "subscriber_id"], found)
                             .execution_options(preserve_rowcount=True))  # an INSERT's count
    return rowcount(result)


def next_batch(session: Session, action_id: int, after: int, size: int) -> list[int]:
    """The set's next `size` ids above `after`, ascending."""
    return list(session.scalars(
        select(Members.c.subscriber_id)
        .where(Members.c.action_id == action_id, Members.c.subscriber_id > after)
        .order_by(Members.c.subscriber_id).limit(size)))


def still_matching(session: Session, ids: list[int], filters: Filters | None) -> list[int]:
    """Of `ids`, those still there and (for a filter) matching it now, ascending."""
    clauses = filter_clauses(session, filters) if filters is not None else []
    return list(session.scalars(select(Subscriber.id).where(Subscriber.id.in_(ids), *clauses)
                                .order_by(Subscriber.id)))


def forget(session: Session, action_id: int, up_to: int | None = None) -> int:
    """Delete the set's rows (those up to `up_to`: the batch just done), in the caller's
    transaction; returns how many went."""
    statement = delete(Members).where(Members.c.action_id == action_id)
    if up_to is not None:
        statement = statement.where(Members.c.subscriber_id <= up_to)
    return rowcount(session.execute(statement))
