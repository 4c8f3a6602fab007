"""A consistent copy of a SQLite database while Broadside writes to it, and its restore.

SQLite's online backup API (`sqlite3.Connection.backup`, all pages in one step) copies the
database as one read transaction sees it, so a send, an import or a page's write in progress
is either wholly in the copy or not at all; the web process and the worker go on writing (WAL).
Without secrets, the copy's secret columns are then blanked and the file rebuilt with
`VACUUM INTO`: an UPDATE leaves the old value in a free page, a rebuilt file has none.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from broadside.core.backup.rows import VERSION_TABLE
from broadside.core.backup.secret_columns import BY_TABLE, Removed, scrub_row


def _tables(connection: sqlite3.Connection) -> list[str]:
    return [row[0] for row in connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name")]


def copy_database(source: Path, target: Path, *, with_secrets: bool
                  ) -> tuple[str | None, dict[str, int], list[Removed]]:
    """Copy the live database at `source` into a new file `target`: (its revision, rows per
    table, the secrets removed)."""
    if not source.is_file():
        raise FileNotFoundError(f"the SQLite database {source} does not exist")
    raw = target.with_name(target.name + ".raw")
    # A read-only URI: the backup never creates or changes the live file.
    with closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=15)) as live, \
            closing(sqlite3.connect(raw)) as copy:
        live.backup(copy)
    try:
        with closing(sqlite3.connect(raw, isolation_level=None)) as copy:
            copy.execute("PRAGMA journal_mode=DELETE")
            revision = _revision(copy)
            removed: list[Removed] = [] if with_secrets else _scrub(copy)
            counts = {name: copy.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0]
                      for name in _tables(copy) if name != VERSION_TABLE}
            copy.execute("VACUUM INTO ?", (str(target),))
    finally:
        raw.unlink(missing_ok=True)
    return revision, counts, removed


def _revision(connection: sqlite3.Connection) -> str | None:
    try:
        row = connection.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
    except sqlite3.DatabaseError:
        return None
    return row[0] if row else None


def _scrub(connection: sqlite3.Connection) -> list[Removed]:
    removed: list[Removed] = []
    present = set(_tables(connection))
    connection.execute("BEGIN")
    for table, secrets in BY_TABLE.items():
        if table not in present:
            continue
        columns = {row[1] for row in connection.execute(f'PRAGMA table_info("{table}")')}
        wanted = [s.column for s in secrets if s.column in columns]
        if not wanted:
            continue
        cursor = connection.execute(f'SELECT rowid AS broadside_rowid, * FROM "{table}"')
        names = [d[0] for d in cursor.description]
        for values in cursor.fetchall():
            row = dict(zip(names, values, strict=True))
            cleaned, gone = scrub_row(table, row)
            if not gone:
                continue
            removed.extend(gone)
            assignments = ", ".join(f'"{c}" = ?' for c in wanted)
            connection.execute(f'UPDATE "{table}" SET {assignments} WHERE rowid = ?',
                               [*(cleaned.get(c) for c in wanted), row["broadside_rowid"]])
    connection.execute("COMMIT")
    return removed


def restore_file(archived: Path, target: Path) -> None:
    """Write the archived database over the (empty) target file through the backup API, so
    connections other processes hold see a whole database, never a half-copied file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(f"file:{archived}?mode=ro", uri=True)) as source, \
            closing(sqlite3.connect(target, timeout=15)) as destination:
        source.backup(destination)
