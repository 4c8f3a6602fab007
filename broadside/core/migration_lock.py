"""One migration at a time per database (`migrations/env.py` takes this around every upgrade
and downgrade, from the command line or from code).

Several web processes or hosts started at once each run `db upgrade` (the Procfile's web
line): one migrates, the others wait for it, then find the schema current and do nothing.

- PostgreSQL: a session-level advisory lock on `MIGRATION_LOCK_KEY`, held by the migrating
  connection; a process killed mid-migration loses its connection and with it the lock.
- SQLite: an exclusive `flock` on a file beside the database (`sqlite_lock_path`), released
  by the kernel when the process ends. Processes on one host share a SQLite file; no other
  kind of sharing is safe for SQLite anyway.
- An in-memory database belongs to one process: nothing to share, no lock.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, text

# A fixed 64-bit key no other advisory lock of Broadside uses: "broadsid" in ASCII.
MIGRATION_LOCK_KEY = 0x62726F6164736964


def sqlite_lock_path(database: str | None) -> str | None:
    """The lock file beside a SQLite database file (None: in memory)."""
    if not database or ":memory:" in database or "mode=memory" in database:
        return None
    if database.startswith("file:"):  # a URI: file:PATH?options
        database = database[5:].split("?", 1)[0]
    return f"{database}.migrate-lock"


@contextmanager
def migration_lock(connection: Connection) -> Iterator[None]:
    """Held while the body migrates; waits as long as another process migrates."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        connection.commit()  # the lock is the session's: it outlives this transaction
        try:
            yield
        finally:
            if connection.in_transaction():
                connection.rollback()  # a failed migration's transaction, before unlocking
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})
            connection.commit()
        return
    path = sqlite_lock_path(connection.engine.url.database) if connection.dialect.name == "sqlite" else None
    if path is None:
        yield
        return
    # An empty file, readable by all: flock needs only a read descriptor, so a lock file left by
    # an upgrade run as another user (root, once) never stops the service's own.
    descriptor = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # waits while another process migrates
        yield
    finally:
        os.close(descriptor)  # closing the file releases the lock
