"""The addresses an import has already read, on disk: how a file of a million rows finds its
duplicates ("duplicate of line N") without holding a million addresses in memory.

A private SQLite file next to the upload (`<import id>.seen`), written without a journal or
fsync (it is scratch: a crashed run starts it again, as it reads the file again from the top),
with a small page cache, so the worker's memory stays flat whatever the file's size. It
belongs to one run of one import and is deleted when the run ends.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

_CHUNK = 5000  # well under SQLite's 32,766 bound parameters


class SeenAddresses:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.unlink(missing_ok=True)
        self.db = sqlite3.connect(path, isolation_level=None)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "cache_size=-8192",
                       "temp_store=FILE"):
            self.db.execute(f"PRAGMA {pragma}")
        self.db.execute("CREATE TABLE seen (email TEXT PRIMARY KEY, line INTEGER NOT NULL) "
                        "WITHOUT ROWID")

    def first_lines(self, emails: list[str]) -> dict[str, int]:
        """The line each of `emails` was first read on, for those read before."""
        found: dict[str, int] = {}
        for start in range(0, len(emails), _CHUNK):
            chunk = emails[start:start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            found.update(self.db.execute(
                f"SELECT email, line FROM seen WHERE email IN ({marks})", chunk))
        return found

    def add(self, rows: Iterable[tuple[str, int]]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT OR IGNORE INTO seen VALUES (?, ?)", rows)
        self.db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()
        self.path.unlink(missing_ok=True)
