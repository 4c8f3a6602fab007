"""The portable copy: every table's rows, read through SQLAlchemy from one database and written
into another of either kind, in foreign-key order (the schema's own, reflected from the
target at the backup's revision).

Values travel typed: read with the source's column types (a SQLite DATETIME as a datetime, a
BOOLEAN as a bool, JSON as its value) and, through a `rows` archive, as JSON lines whose
datetimes and bytes are strings, turned back by the target column's type. PostgreSQL's
sequences are moved past each table's largest id afterwards, so the next row the restored
installation inserts takes a new id (ids reach the outside world: links, tokens, API answers).
"""

from __future__ import annotations

import base64
import json
import warnings
from collections.abc import Callable, Iterable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Connection,
    Date,
    DateTime,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    TypeDecorator,
    cast,
    exc,
    func,
    select,
    text,
)

from broadside.core.backup.secret_columns import Removed, scrub_row

VERSION_TABLE = "alembic_version"
BATCH = 500

Rows = Callable[[str], Iterable[dict[str, Any]]]  # a table's name -> its rows


def reflect(connection: Connection) -> MetaData:
    """The tables as the database has them (its revision's schema, not the code's models)."""
    metadata = MetaData()
    with warnings.catch_warnings():
        # Partial and expression indexes are not reflected; rows need only the columns.
        warnings.simplefilter("ignore", exc.SAWarning)
        metadata.reflect(bind=connection)
    return metadata


def data_tables(metadata: MetaData) -> list[Table]:
    """Every table but Alembic's, parents before children."""
    return [t for t in metadata.sorted_tables if t.name != VERSION_TABLE]


def ordered(table: Table) -> Any:
    keys = list(table.primary_key.columns) or list(table.columns)
    return select(table).order_by(*keys)


class JsonText(TypeDecorator[str]):
    """A PostgreSQL JSON column written from its text, cast there: the text read from the
    source goes in as it was."""

    impl = Text
    cache_ok = True

    def __init__(self, target: Any) -> None:
        super().__init__()
        self.target = target

    def bind_expression(self, bindvalue: Any) -> Any:
        return cast(bindvalue, self.target)


def _json_as_text(table: Table, dialect: str) -> None:
    """A JSON column travels as its text, so SQL NULL and JSON `null` stay apart (read as
    values, both are None, and SQLAlchemy writes None back as JSON `null`: `IS NULL` would no
    longer find the row). SQLite keeps JSON as text already."""
    for column in table.columns:
        if isinstance(column.type, JSON):
            column.type = JsonText(column.type) if dialect == "postgresql" else Text()


def _read(table: Table) -> Any:
    keys = list(table.primary_key.columns) or list(table.columns)
    columns = [cast(c, Text).label(c.name) if isinstance(c.type, JSON) else c
               for c in table.columns]
    return select(*columns).order_by(*keys)


def read_rows(connection: Connection, table: Table) -> Iterator[dict[str, Any]]:
    """A table's rows by primary key, each JSON column as its text (see `_json_as_text`)."""
    result = connection.execution_options(yield_per=BATCH).execute(_read(table))
    for row in result.mappings():
        yield dict(row)


def count_rows(connection: Connection, metadata: MetaData) -> dict[str, int]:
    return {t.name: int(connection.scalar(select(func.count()).select_from(t)) or 0)
            for t in data_tables(metadata)}


def revision_of(connection: Connection) -> str | None:
    try:
        return connection.scalar(text(f"SELECT version_num FROM {VERSION_TABLE}"))
    except exc.DBAPIError:
        return None


# ---------------------------------------------------------------- the `rows` archive form

def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bytes | memoryview):
        return base64.b64encode(bytes(value)).decode()
    raise TypeError(f"cannot keep a {type(value).__name__} in a backup")


def write_jsonl(connection: Connection, metadata: MetaData, folder: Path,
                with_secrets: bool) -> tuple[dict[str, int], list[Removed]]:
    """Each table into `folder/<table>.jsonl` (secrets blanked unless `with_secrets`), read on
    `connection` (one snapshot: the caller's REPEATABLE READ transaction)."""
    counts: dict[str, int] = {}
    removed: list[Removed] = []
    folder.mkdir(parents=True, exist_ok=True)
    for table in data_tables(metadata):
        written = 0
        with (folder / f"{table.name}.jsonl").open("w", encoding="utf-8") as handle:
            for row in read_rows(connection, table):
                if not with_secrets:
                    row, gone = scrub_row(table.name, row)
                    removed.extend(gone)
                handle.write(json.dumps(row, default=_plain, ensure_ascii=False) + "\n")
                written += 1
        counts[table.name] = written
    return counts, removed


def jsonl_rows(folder: Path) -> Rows:
    def rows(name: str) -> Iterator[dict[str, Any]]:
        path = folder / f"{name}.jsonl"
        if not path.exists():
            return
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                yield json.loads(line)
    return rows


def _typed(table: Table) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Strings back into the target column's datetimes, dates and bytes."""
    conversions: dict[str, Callable[[Any], Any]] = {}
    for column in table.columns:
        if isinstance(column.type, DateTime):
            conversions[column.name] = datetime.fromisoformat
        elif isinstance(column.type, Date):
            conversions[column.name] = date.fromisoformat
        elif isinstance(column.type, LargeBinary):
            conversions[column.name] = base64.b64decode

    def convert(row: dict[str, Any]) -> dict[str, Any]:
        for name, to in conversions.items():
            value = row.get(name)
            if isinstance(value, str):
                row[name] = to(value)
        return row
    return convert


# ---------------------------------------------------------------- loading into a target

def load(target: Connection, metadata: MetaData, rows: Rows) -> dict[str, int]:
    """Insert every table's rows (from `rows`) into the target's tables, parents first; the
    caller's transaction. Returns the rows written per table."""
    written: dict[str, int] = {}
    for table in data_tables(metadata):
        _json_as_text(table, target.dialect.name)
        convert = _typed(table)
        names = {c.name for c in table.columns}
        batch: list[dict[str, Any]] = []
        count = 0
        for row in rows(table.name):
            unknown = set(row) - names
            if unknown:
                raise ValueError(f"the backup's {table.name} has columns the schema of its "
                                 f"revision has not: {sorted(unknown)}")
            batch.append(convert(dict(row)))
            if len(batch) >= BATCH:
                target.execute(table.insert(), batch)
                count += len(batch)
                batch = []
        if batch:
            target.execute(table.insert(), batch)
            count += len(batch)
        written[table.name] = count
    return written


def reflected_rows(source: Connection, metadata: MetaData) -> Rows:
    tables = {t.name: t for t in data_tables(metadata)}

    def rows(name: str) -> Iterable[dict[str, Any]]:
        table = tables.get(name)
        return read_rows(source, table) if table is not None else ()
    return rows


def move_sequences_on(target: Connection, metadata: MetaData) -> None:
    """PostgreSQL: each table's id sequence past its largest id (a table without one has no
    sequence, and setval of NULL does nothing)."""
    for table in data_tables(metadata):
        for column in table.primary_key.columns:
            if not isinstance(column.type, Integer):
                continue
            target.execute(text(
                "SELECT setval(pg_get_serial_sequence(:table, :column), "
                f'COALESCE((SELECT MAX("{column.name}") FROM "{table.name}"), 0) + 1, false)'),
                {"table": f'"{table.name}"', "column": column.name})
