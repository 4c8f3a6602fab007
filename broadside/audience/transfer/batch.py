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

PostgreSQL takes the batch in as few passes as the batch needs (each statement's cost per
batch: bench/import_statements.py). One statement looks everyone up once, refreshes the
known people who change and counts what the rest needs. A batch of only new addresses (a
first import) is then written in one more statement with no lookups at all; a batch of only
known people with nobody to put on the list (a re-import) is done; any other batch inserts
its new people and then, in one statement and one snapshot, classifies every row and adds
the subscriptions and their events. Each way gives the counts and rows the general way gives.

Nobody already on the list is re-activated, downgraded or asked again: an existing
subscription keeps its status, and a suppressed person is never put on a list. The statements
that create the subscriptions are the subscription lifecycle's (`join_staged_*` in
`broadside.audience.subscriptions`, the one writer of their status); this module stages the
batch and writes the people. The counts returned say what each row was (`importer`
explains them to the owner).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from json.encoder import encode_basestring_ascii

from sqlalchemy import Connection, DateTime, bindparam, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.audience import subscriptions
from broadside.campaigns.automations.entering import enter_joined
from broadside.core.timeutil import utcnow
from broadside.webhooks import emitter

Row = tuple[str, str, dict[str, str]]  # (normalised email, name, attributes)

# No index on PostgreSQL's: every statement reads it whole (a batch's addresses are distinct
# already: the importer rejects a repeated one as a duplicate), and the primary key's index
# was two fifths of the COPY's time.
_PG_STAGE = ("CREATE TEMP TABLE IF NOT EXISTS import_stage (email text NOT NULL, "
             "name text NOT NULL, attributes text NOT NULL) ON COMMIT DELETE ROWS")
_SQLITE_STAGE = ("CREATE TEMP TABLE IF NOT EXISTS import_stage (email TEXT PRIMARY KEY, "
                 "name TEXT NOT NULL, attributes TEXT NOT NULL)")

# The attributes a known person ends with: theirs, with the file's values on top (a dict
# merge: the file only has non-empty string values, so RFC 7396's null rule never applies).
_PG_OLD = ("CASE WHEN json_typeof(s.attributes) = 'object' THEN s.attributes::jsonb "
           "ELSE '{}'::jsonb END")
# The file's attributes to write over a known person's: all of them but those that only spell
# the stored value as text (an export writes the number 42, true or a list as its JSON: read
# back, "42" must not turn the number into a string). Only in the SET of a row that changes.
_PG_PATCH = f"""(SELECT coalesce(jsonb_object_agg(f.key, f.value), '{{}}'::jsonb)
  FROM jsonb_each(st.attributes::jsonb) AS f
  WHERE (jsonb_typeof({_PG_OLD} -> f.key) IN ('number', 'boolean', 'array', 'object')
         AND ({_PG_OLD} -> f.key)::text = f.value #>> '{{}}') IS NOT TRUE)"""
# Whether a known person's name or attributes would change. The stored text equal to the
# staged one (an earlier import of the same row stored exactly it) is answered without
# parsing either as jsonb; `IS TRUE`: a NULL column falls through to the full comparison.
_PG_CHANGED = f"""((st.name <> '' AND st.name IS DISTINCT FROM s.name)
       OR NOT ((s.attributes::text = st.attributes) IS TRUE
               OR {_PG_OLD} @> st.attributes::jsonb))"""
# Everyone of the batch already known, in one pass of lookups: those whose name or attributes
# change are updated (the condition is evaluated again on the row it updates, so a row
# changed meanwhile is judged as it now is), and the counts say what the rest of the batch
# needs: nothing known (every address new), everyone known and nobody to put on the list (a
# re-import: nothing more to do), or neither.
_PG_KNOWN = f"""
WITH found AS MATERIALIZED (
  SELECT s.id, s.suppression, sub.id AS subscription, sub.status, st.name, st.attributes,
         {_PG_CHANGED} AS changed
  FROM import_stage AS st
  JOIN subscribers AS s ON s.email = st.email
  LEFT JOIN subscriptions AS sub ON sub.subscriber_id = s.id AND sub.list_id = :list_id
), refreshed AS (
  UPDATE subscribers AS s
  SET name = CASE WHEN st.name <> '' THEN st.name ELSE s.name END,
      attributes = ({_PG_OLD} || {_PG_PATCH})::json
  FROM found AS st
  WHERE st.changed AND s.id = st.id AND {_PG_CHANGED}
)
SELECT count(*),
  count(*) FILTER (WHERE suppression IS NOT NULL),
  count(*) FILTER (WHERE suppression IS NULL AND status = 'unsubscribed'),
  count(*) FILTER (WHERE suppression IS NULL AND subscription IS NULL)
FROM found
"""
_SQLITE_OLD = ("CASE WHEN json_type(subscribers.attributes) = 'object' "
               "THEN subscribers.attributes ELSE '{}' END")
# `_PG_PATCH` on SQLite (json_each gives a number's, a boolean's or a list's own text).
_SQLITE_PATCH = f"""(SELECT coalesce(json_group_object(f.key, f.value), '{{}}')
  FROM json_each(st.attributes) AS f
  WHERE NOT EXISTS (SELECT 1 FROM json_each({_SQLITE_OLD}) AS o
    WHERE o.key = f.key AND o.type NOT IN ('text', 'null')
      AND (CASE o.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'
           ELSE CAST(o.value AS TEXT) END)
          = (CASE WHEN o.type IN ('array', 'object') AND json_valid(f.value)
             THEN json(f.value) ELSE f.value END)))"""
_SQLITE_UPDATE = f"""
UPDATE subscribers
SET name = CASE WHEN st.name <> '' THEN st.name ELSE subscribers.name END,
    attributes = json_patch({_SQLITE_OLD}, {_SQLITE_PATCH})
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
# The reader's language or time zone the file gives, on the people of the batch it names.
_SET_COLUMN = {column: text(f"UPDATE subscribers SET {column} = :value WHERE email IN :emails "
                            f"AND ({column} IS NULL OR {column} <> :value)").bindparams(
    bindparam("emails", expanding=True)) for column in ("locale", "timezone")}
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


def _sql(statement: str, postgres: bool):
    """The statement for this database: SQLite is told to drive the joins from the staging
    table (CROSS JOIN fixes the order; left to itself it scans `subscribers`)."""
    sql = text(statement.format(
        join="JOIN" if postgres else "CROSS JOIN",
        attributes="st.attributes::json" if postgres else "st.attributes",
    ))
    return sql.bindparams(bindparam("now", type_=DateTime())) if ":now" in statement else sql


def _pg(statement: str):
    """A PostgreSQL statement as it is (its text has jsonb's braces: no `format`)."""
    sql = text(statement)
    return sql.bindparams(bindparam("now", type_=DateTime())) if ":now" in statement else sql


def attributes_json(attributes: dict[str, str]) -> str:
    """`json.dumps(attributes)` of a row's attributes (a flat map of strings), the same text
    (the re-import's comparison relies on it: `_PG_CHANGED`) at a quarter of the cost:
    `json.dumps` builds its encoder again for each call, a fifth of a batch's staging."""
    return "{" + ", ".join([f"{encode_basestring_ascii(key)}: {encode_basestring_ascii(value)}"
                            for key, value in attributes.items()]) + "}"


def _stage(connection: Connection, batch: Sequence[Row]) -> None:
    rows = [(email, name, attributes_json(attributes)) for email, name, attributes in batch]
    if connection.dialect.name == "postgresql":
        driver = connection.connection.driver_connection
        with driver.cursor() as cursor:  # type: ignore[union-attr]
            # Each statement here starts from the staged batch and looks its rows up by
            # unique indexes: nested loops are the right plan whatever the list's size. Left
            # to itself the planner hash-joins the whole list's subscriptions once per batch,
            # or (with the stale statistics of tables an import is filling:
            # `refresh_statistics`) scans a table it believes empty: work that grows with the
            # list, making an import quadratic. The staging table is not ANALYZEd (it was,
            # each batch): with these two off, the one choice left is which side drives the
            # loop, and the planner's estimate of a batch from the table's pages already
            # makes it the batch. DELETE, not TRUNCATE: the table is empty unless one
            # transaction writes two batches (PostgreSQL empties it at commit), and TRUNCATE
            # gave it a new file every batch. One round trip (no parameters: the simple
            # protocol takes several statements).
            cursor.execute(f"{_PG_STAGE}; DELETE FROM import_stage; "
                           "SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off")
            with cursor.copy("COPY import_stage (email, name, attributes) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
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
                consent: str, welcome: bool = False, now: datetime | None = None,
                settings: dict[tuple[str, str], list[str]] | None = None) -> dict[str, int]:
    """Upsert one batch of distinct addresses; returns the Tally counts it adds. With
    `welcome` (and people who already opted in), exactly the people this batch put on the
    list enter its welcome automations, in the batch's own transaction: a crash mid-import
    leaves nobody welcomed who was not imported and nobody imported who should have been
    welcomed (a resumed import finds them on the list already, so it neither re-adds nor
    re-welcomes them). People asked to confirm enter them when they confirm, as sign-ups do.
    `settings`: the file's language tags and time zones, each (column, value) with the
    addresses it names (a known person's is replaced, as their name is); one statement per
    value, none without a `locale` or `timezone` column."""
    now = now or utcnow()
    connection = session.connection()
    asking = consent == "confirm"
    status = subscriptions.joining_status(asking).value
    detail = f"imported (import {import_id})" + (", asked to confirm" if asking else "")
    values = {"list_id": list_id, "now": now, "asking": asking, "detail": detail}
    _stage(connection, batch)
    if connection.dialect.name == "postgresql":
        joined, suppressed, unsubscribed = _write_postgres(connection, len(batch), values)
    else:
        joined, suppressed, unsubscribed = _write_sqlite(connection, values)
    for (column, value), emails in (settings or {}).items():
        connection.execute(_SET_COLUMN[column], {"value": value, "emails": emails})
    counts = {"imported": len(joined), "skipped_unsubscribed": int(unsubscribed),
              "skipped_suppressed": int(suppressed),
              # Someone a sign-up put on the list while the batch was written is on it now.
              "updated": len(batch) - len(joined) - int(unsubscribed) - int(suppressed)}
    if joined:
        emitter.emit_many(session, "subscriber.created", lambda: [
            {"subscriber": person, "list_id": list_id, "status": status, "source": "import"}
            for person in emitter.people(session, joined).values()], now)
        if welcome and not asking:
            # People welcomed, not entries made (each person enters every welcome series).
            counts["welcomed"] = min(
                enter_joined(session, list_id, joined, source="import", now=now), len(joined))
    return counts


def _write_postgres(connection: Connection, size: int, values: dict
                    ) -> tuple[list[int], int, int]:
    """The staged batch on PostgreSQL: (the ids put on the list, suppressed, unsubscribed).
    Each path gives what the general statements give for the same rows (`_PG_KNOWN`)."""
    known, suppressed, unsubscribed, joinable = connection.execute(
        _pg(_PG_KNOWN), {"list_id": values["list_id"]}).one()
    list_id, now = values["list_id"], values["now"]
    how = {"asking": values["asking"], "detail": values["detail"]}
    if known == size and joinable == 0:
        # Everyone known and nobody to put on the list (a re-import): the known people's
        # refresh was all there was to write.
        return [], int(suppressed), int(unsubscribed)
    if known == 0:
        try:
            with connection.begin_nested():
                joined = subscriptions.create_and_join_staged_postgres(
                    connection, list_id, now, **how)
            return joined, 0, 0
        except IntegrityError:
            pass  # someone created one of these addresses meanwhile: the general way
    if known < size:
        connection.execute(_sql(_INSERT_PEOPLE, True), {"now": now})
    suppressed, unsubscribed, joined = subscriptions.join_staged_postgres(
        connection, list_id, now, **how)
    return joined, suppressed, unsubscribed


def _write_sqlite(connection: Connection, values: dict) -> tuple[list[int], int, int]:
    connection.execute(text(_SQLITE_UPDATE))
    connection.execute(_sql(_INSERT_PEOPLE, False), {"now": values["now"]})
    suppressed, unsubscribed = connection.execute(
        _sql(_CLASSIFY, False), {"list_id": values["list_id"]}).one()
    joined = subscriptions.join_staged_sqlite(
        connection, values["list_id"], values["now"], asking=values["asking"],
        detail=values["detail"])
    return joined, int(suppressed), int(unsubscribed)
