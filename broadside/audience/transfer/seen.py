"""The addresses an import has already read, on disk: how a file of a million rows finds its
duplicates ("duplicate of line N") without holding a million addresses in memory.

A private SQLite file next to the upload (`<import id>.seen`), written without a journal or
fsync (it is scratch: a crashed run starts it again, as it reads the file again from the top),
with a small page cache, so the worker's memory stays flat whatever the file's size. It
belongs to one run of one import and is deleted when the run ends.
"""

from __future__ import annotations

import sqlite3
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

    def add_new(self, firsts: dict[str, int]) -> dict[str, int]:
        """Keep each address of a batch with the line it is first read on in the batch
        (`firsts`, lines after every earlier batch's), and return those read before (each
        with its earlier line). One executemany: an address already kept is ignored, so
        when as many rows went in as were given (the usual batch) none was read before and
        nothing is looked up."""
        self.db.execute("BEGIN")
        before = self.db.total_changes
        self.db.executemany("INSERT OR IGNORE INTO seen VALUES (?, ?)", firsts.items())
        inserted = self.db.total_changes - before
        found: dict[str, int] = {}
        if inserted != len(firsts):
            emails = list(firsts)
            for start in range(0, len(emails), _CHUNK):
                chunk = emails[start:start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                for email, line in self.db.execute(
                        f"SELECT email, line FROM seen WHERE email IN ({marks})", chunk):
                    if line != firsts[email]:
                        found[email] = line
        self.db.execute("COMMIT")
        return found

    def close(self) -> None:
        self.db.close()
        self.path.unlink(missing_ok=True)
