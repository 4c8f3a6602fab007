"""One batch of an import written to its list, set-based: the people upserted, their
subscriptions added in the status the owner chose, an event each, and (for people who already
opted in, when asked) their welcome, all in the batch's transaction.

How: the batch (a few thousand accepted, distinct addresses) is loaded into a temporary
staging table on the batch's own connection (PostgreSQL: COPY; SQLite: one executemany),
and a handful of INSERT ... SELECT / UPDATE ... FROM statements do the rest in the database.
A known person whose name and attributes would not change is not written at all (the
comparison is in SQL), so re-importing a file costs reads only. The staging table is private
to the connection and emptied at the start of each batch (PostgreSQL also empties it at
commit), so two imports never see each other's rows.

Nobody already on the list is re-activated, downgraded or asked again: an existing
subscription keeps its status (INSERT ... WHERE NOT EXISTS ... ON CONFLICT DO NOTHING), and a
suppressed person is never put on a list. The counts returned say which of these each row was
(`importer` explains them to the owner).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, DateTime, bindparam, text
from sqlalchemy.orm import Session

from broadside.automations.entering import enter_joined
from broadside.outgoing import outbox
from broadside.timeutil import utcnow

Row = tuple[str, str, dict[str, str]]  # (normalised email, name, attributes)

_PG_STAGE = ("CREATE TEMP TABLE IF NOT EXISTS import_stage (email text PRIMARY KEY, "
             "name text NOT NULL, attributes text NOT NULL) ON COMMIT DELETE ROWS")
_SQLITE_STAGE = ("CREATE TEMP TABLE IF NOT EXISTS import_stage (email TEXT PRIMARY KEY, "
                 "name TEXT NOT NULL, attributes TEXT NOT NULL)")

# The attributes a known person ends with: theirs, with the file's values on top (a dict
# merge: the file only has non-empty string values, so RFC 7396's null rule never applies).
_PG_OLD = ("CASE WHEN json_typeof(s.attributes) = 'object' THEN s.attributes::jsonb "
           "ELSE '{}'::jsonb END")
_PG_UPDATE = f"""
UPDATE subscribers AS s
SET name = CASE WHEN st.name <> '' THEN st.name ELSE s.name END,
    attributes = ({_PG_OLD} || st.attributes::jsonb)::json
FROM import_stage AS st
WHERE s.email = st.email
  AND ((st.name <> '' AND st.name IS DISTINCT FROM s.name)
       OR NOT ({_PG_OLD} @> st.attributes::jsonb))
"""
_SQLITE_OLD = ("CASE WHEN json_type(subscribers.attributes) = 'object' "
               "THEN subscribers.attributes ELSE '{}' END")
_SQLITE_UPDATE = f"""
UPDATE subscribers
SET name = CASE WHEN st.name <> '' THEN st.name ELSE subscribers.name END,
    attributes = json_patch({_SQLITE_OLD}, st.attributes)
FROM import_stage AS st
WHERE subscribers.email IN (SELECT email FROM import_stage) AND subscribers.email = st.email
  AND ((st.name <> '' AND st.name IS NOT subscribers.name)
       OR json({_SQLITE_OLD}) IS NOT json_patch({_SQLITE_OLD}, st.attributes))
"""
# ON CONFLICT DO NOTHING: a sign-up that created the same address a moment ago wins.
_INSERT_PEOPLE = """
INSERT INTO subscribers (email, name, attributes, created_at, soft_bounce_count)
SELECT st.email, st.name, {attributes}, :now, 0 FROM import_stage AS st
WHERE NOT EXISTS (SELECT 1 FROM subscribers AS s WHERE s.email = st.email)
ON CONFLICT (email) DO NOTHING
"""
# Before any subscription is added: what each row already was on the list.
_CLASSIFY = """
SELECT
  coalesce(sum(CASE WHEN s.suppression IS NOT NULL THEN 1 ELSE 0 END), 0),
  coalesce(sum(CASE WHEN s.suppression IS NULL AND sub.status = 'unsubscribed'
                    THEN 1 ELSE 0 END), 0)
FROM import_stage AS st
{join} subscribers AS s ON s.email = st.email
LEFT JOIN subscriptions AS sub ON sub.subscriber_id = s.id AND sub.list_id = :list_id
"""
_JOIN = """
INSERT INTO subscriptions (subscriber_id, list_id, created_at, status)
SELECT s.id, :list_id, :now, :status FROM import_stage AS st
{join} subscribers AS s ON s.email = st.email
WHERE s.suppression IS NULL AND NOT EXISTS (
  SELECT 1 FROM subscriptions AS x WHERE x.subscriber_id = s.id AND x.list_id = :list_id)
ON CONFLICT (subscriber_id, list_id) DO NOTHING
RETURNING subscriber_id
"""
# Invariant 9: the evidence of each subscription this batch made, in the same statement on
# PostgreSQL (the rows RETURNING gave: a sign-up racing the import keeps its own row and
# event); SQLite takes the same ids in one executemany.
_PG_JOIN_AND_EVENTS = f"""
WITH joined AS ({_JOIN}), evidence AS (
  INSERT INTO events (kind, subscriber_id, list_id, created_at, detail)
  SELECT 'subscribed', subscriber_id, :list_id, :now, :detail FROM joined)
SELECT subscriber_id FROM joined
"""
# Through the DBAPI with tuples (SQLAlchemy's per-row parameter processing was a tenth of a
# large import); `now` is bound as the DateTime column's own bind processor writes it.
_SQLITE_EVENTS = ("INSERT INTO events (kind, subscriber_id, list_id, created_at, detail) "
                  "VALUES ('subscribed', ?, ?, ?, ?)")


def _sql(statement: str, postgres: bool):
    """The statement for this database: SQLite is told to drive the joins from the staging
    table (CROSS JOIN fixes the order; left to itself it scans `subscribers`)."""
    sql = text(statement.format(
        join="JOIN" if postgres else "CROSS JOIN",
        attributes="st.attributes::json" if postgres else "st.attributes",
    ))
    return sql.bindparams(bindparam("now", type_=DateTime())) if ":now" in statement else sql


def _stage(connection: Connection, batch: Sequence[Row]) -> None:
    rows = [(email, name, json.dumps(attributes)) for email, name, attributes in batch]
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(_PG_STAGE)
        connection.exec_driver_sql("TRUNCATE import_stage")
        driver = connection.connection.driver_connection
        with driver.cursor() as cursor:  # type: ignore[union-attr]
            with cursor.copy("COPY import_stage (email, name, attributes) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        # Each statement here starts from the staged batch and looks its rows up by unique
        # indexes: nested loops are the right plan whatever the list's size. Left to itself
        # the planner hash-joins the whole list's subscriptions once per batch, or (with
        # the stale statistics of tables an import is filling: `refresh_statistics`) scans
        # a table it believes empty: work that grows with the list, making an import
        # quadratic. A temporary table gets no statistics from autovacuum at all.
        connection.exec_driver_sql("ANALYZE import_stage")
        connection.exec_driver_sql("SET LOCAL enable_hashjoin = off")
        connection.exec_driver_sql("SET LOCAL enable_mergejoin = off")
    else:
        connection.exec_driver_sql(_SQLITE_STAGE)
        connection.exec_driver_sql("DELETE FROM import_stage")
        connection.exec_driver_sql("INSERT INTO import_stage VALUES (?, ?, ?)", rows)


def refresh_statistics(session: Session) -> None:
    """PostgreSQL: bring the planner's idea of the tables an import fills up to date (the
    importer calls it every few batches: autovacuum's own ANALYZE comes too late for a
    table that grew tenfold in a minute). A sample of each table, not a scan."""
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql("ANALYZE subscribers, subscriptions")


def write_batch(session: Session, list_id: int, import_id: int, batch: Sequence[Row], *,
                consent: str, welcome: bool = False, now: datetime | None = None
                ) -> dict[str, int]:
    """Upsert one batch of distinct addresses; returns the Tally counts it adds. With
    `welcome` (and people who already opted in), exactly the people this batch put on the
    list enter its welcome automations, in the batch's own transaction: a crash mid-import
    leaves nobody welcomed who was not imported and nobody imported who should have been
    welcomed (a resumed import finds them on the list already, so it neither re-adds nor
    re-welcomes them). People asked to confirm enter them when they confirm, as sign-ups do."""
    now = now or utcnow()
    connection = session.connection()
    postgres = connection.dialect.name == "postgresql"
    _stage(connection, batch)
    connection.execute(text(_PG_UPDATE if postgres else _SQLITE_UPDATE))
    connection.execute(_sql(_INSERT_PEOPLE, postgres), {"now": now})
    suppressed, unsubscribed = connection.execute(
        _sql(_CLASSIFY, postgres), {"list_id": list_id}).one()
    asking = consent == "confirm"
    status = "unconfirmed" if asking else "active"
    detail = f"imported (import {import_id})" + (", asked to confirm" if asking else "")
    values = {"list_id": list_id, "now": now, "status": status, "detail": detail}
    if postgres:
        joined = connection.execute(_sql(_PG_JOIN_AND_EVENTS, True), values).scalars().all()
    else:
        joined = connection.execute(_sql(_JOIN, False), values).scalars().all()
        if joined:
            process = DateTime().dialect_impl(connection.dialect).bind_processor(
                connection.dialect)
            stamp = process(now) if process else now
            connection.exec_driver_sql(
                _SQLITE_EVENTS, [(sid, list_id, stamp, detail) for sid in joined])
    counts = {"imported": len(joined), "skipped_unsubscribed": int(unsubscribed),
              "skipped_suppressed": int(suppressed),
              # Someone a sign-up put on the list between the two statements is on it now.
              "updated": len(batch) - len(joined) - int(unsubscribed) - int(suppressed)}
    if joined:
        outbox.emit_many(session, "subscriber.created", lambda: [
            {"subscriber": person, "list_id": list_id, "status": status, "source": "import"}
            for person in outbox.people(session, joined).values()], now)
        if welcome and not asking:
            enter_joined(session, list_id, joined, source="import", now=now)
    return counts
