"""An archive's manifest (`manifest.json`, its first member), and the newest backup in a
folder (what `doctor` and the System page show).

The manifest names everything restore checks before it touches a database: the format of
this file, the schema revision and the kind of database it came from, the form the database
is stored in, every table's row count (read in the copy's own snapshot) and the SHA-256 of
every other member. It is written last into a staging folder and first into the archive, so
reading it costs one member even in a large gzip archive.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

FORMAT = 1
MANIFEST = "manifest.json"
DATABASE_FORMS = ("sqlite", "pg_dump", "rows")
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz")


class BackupError(Exception):
    """A backup or a restore that cannot go on; the message says why and what to do. Nothing
    was written (a backup's partial file is removed; a restore stops before its target, or
    inside its one transaction)."""


@dataclass
class Manifest:
    revision: str
    version: str
    database: str  # the kind the backup came from: "sqlite" or "postgresql"
    form: str  # how the database is stored: one of DATABASE_FORMS
    created_at: datetime  # naive UTC
    secrets: bool
    tables: dict[str, int]  # rows per table (alembic_version left out)
    members: dict[str, str] = field(default_factory=dict)  # member name -> SHA-256
    removed: list[dict[str, str]] = field(default_factory=list)  # secrets left out
    files: list[str] = field(default_factory=list)  # the instance's files, by member name

    def to_json(self) -> bytes:
        data = {"format": FORMAT, "broadside_version": self.version,
                "schema_revision": self.revision, "database": self.database,
                "form": self.form, "created_at": self.created_at.isoformat() + "Z",
                "secrets_included": self.secrets, "secrets_removed": self.removed,
                "row_counts": self.tables, "files": self.files, "sha256": self.members}
        return json.dumps(data, indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Manifest:
        try:
            data: dict[str, Any] = json.loads(raw)
            if data.get("format") != FORMAT:
                raise BackupError(f"The archive's manifest is format {data.get('format')!r}; "
                                  f"this Broadside reads format {FORMAT}.")
            form = str(data["form"])
            if form not in DATABASE_FORMS:
                raise BackupError(f"The archive's database form {form!r} is not one Broadside "
                                  "knows.")
            return cls(revision=str(data["schema_revision"]),
                       version=str(data["broadside_version"]), database=str(data["database"]),
                       form=form,
                       created_at=datetime.fromisoformat(str(data["created_at"]).rstrip("Z")),
                       secrets=bool(data["secrets_included"]),
                       tables={str(k): int(v) for k, v in data["row_counts"].items()},
                       members={str(k): str(v) for k, v in data["sha256"].items()},
                       removed=list(data.get("secrets_removed") or []),
                       files=[str(f) for f in data.get("files") or []])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BackupError(f"The archive's manifest cannot be read ({exc}): this is not a "
                              "Broadside backup, or it is damaged.") from None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_manifest(path: Path) -> Manifest:
    """The manifest of the archive at `path` (its first member), without reading the rest."""
    try:
        with tarfile.open(path, "r:*") as archive:
            first = archive.next()
            if first is None or first.name != MANIFEST or not first.isfile():
                raise BackupError(f"{path} does not start with a {MANIFEST}: not a Broadside "
                                  "backup.")
            handle = archive.extractfile(first)
            assert handle is not None  # a regular file, checked above
            return Manifest.from_json(handle.read())
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise BackupError(f"{path} cannot be read as a backup archive ({exc}).") from None


def is_archive_name(name: str) -> bool:
    return name.endswith(ARCHIVE_SUFFIXES) and not name.startswith(".")


@dataclass(frozen=True)
class Found:
    path: Path
    manifest: Manifest


def newest_backup(folder: Path, *, tries: int = 5) -> Found | None:
    """The newest archive in `folder` whose manifest reads (the newest `tries` by time are
    tried, so one damaged file does not hide the one before it); None if there is none.
    A backup is written under a hidden name and renamed when whole, so a visible name is a
    finished archive; its checksums are verified by restore, not here (a page view must not
    read gigabytes)."""
    try:
        candidates = sorted((p for p in folder.iterdir() if p.is_file()
                             and is_archive_name(p.name)),
                            key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return None
    for path in candidates[:tries]:
        try:
            return Found(path, read_manifest(path))
        except BackupError:
            continue
    return None
