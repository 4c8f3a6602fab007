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
- On PostgreSQL the rows are written by one INSERT ... SELECT (the ids never pass through
  Python; readers and writers of other rows are not held). SQLite has one writer at a time,
  and an INSERT ... SELECT holds that lock for the whole scan of the filter (seconds at a
  million, while the worker's claims and outcomes wait), so there the ids are read first, in
  chunks of READ_CHUNK outside any write (`gather`, before the action's row is added: 8 bytes
  a person in the web process), then written in chunks of WRITE_CHUNK rows: the lock is held
  only for the writes. Both are read by keyset on their primary key; each batch deletes the
  rows it went through in its own transaction (`forget`), a failed action all of its own, so
  the table only ever holds what is left to do.
"""

from __future__ import annotations

from array import array

from sqlalchemy import delete, insert, literal, select
from sqlalchemy.orm import Session

from broadside.audience.subscribers.search import Filters, filter_clauses
from broadside.core.db import rowcount
from broadside.core.models import BulkActionMember, Subscriber

Members = BulkActionMember.__table__
READ_CHUNK = 50_000
WRITE_CHUNK = 10_000


def _who(session: Session, subscriber_ids: list[int] | None, filters: Filters | None,
         max_id: int) -> list:
    if subscriber_ids is not None:
        return [Subscriber.id.in_(subscriber_ids)]
    return [*filter_clauses(session, filters or Filters()), Subscriber.id <= max_id]


def gather(session: Session, *, subscriber_ids: list[int] | None, filters: Filters | None,
           max_id: int) -> array | None:
    """On SQLite, the set's ids read ahead, in chunks, before the caller writes anything (so
    no write lock is held while the filter is scanned); None elsewhere, where `fix` writes
    them with one INSERT ... SELECT."""
    if session.get_bind().dialect.name != "sqlite":
        return None
    who = _who(session, subscriber_ids, filters, max_id)
    ids, after = array("q"), 0
    connection = session.connection()
    while True:
        before = len(ids)
        # Core rows, iterated: `scalars().all()` (ORM or Core) costs three times as much.
        ids.extend(row[0] for row in connection.execute(
            select(Subscriber.id).where(*who, Subscriber.id > after)
            .order_by(Subscriber.id).limit(READ_CHUNK)))
        if len(ids) - before < READ_CHUNK:
            return ids
        after = ids[-1]


def fix(session: Session, action_id: int, *, subscriber_ids: list[int] | None,
        filters: Filters | None, max_id: int, gathered: array | None = None) -> int:
    """Write the set in the caller's transaction (the ids `gather` read, or the people found
    now); returns how many people it holds."""
    if gathered is not None:
        write = session.connection().exec_driver_sql
        for start in range(0, len(gathered), WRITE_CHUNK):
            write("INSERT INTO bulk_action_members (action_id, subscriber_id) VALUES (?, ?)",
                  [(action_id, i) for i in gathered[start:start + WRITE_CHUNK]])
        return len(gathered)
    found = select(literal(action_id), Subscriber.id).where(
        *_who(session, subscriber_ids, filters, max_id))
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
