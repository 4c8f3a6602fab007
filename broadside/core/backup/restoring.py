"""Restoring an archive onto an empty database of either kind.

Order, and why: every member's SHA-256 is checked (and nothing unknown or missing is allowed)
before the target is looked at, so a damaged archive never leaves half a restore; a schema
newer than the code's is refused (this code cannot upgrade what it does not know, nor run on
it); a target holding any row is refused (a restore never merges); the schema of the backup's
own revision is built and the rows loaded into it (the archive's columns are that revision's);
every table's count is compared with the manifest's; only then is the schema upgraded to the
code's newest. The row copy is one transaction: a failure there leaves an empty schema.

| archive's form | into SQLite | into PostgreSQL |
|---|---|---|
| sqlite | the file, through SQLite's backup API | the schema by migration, then a row copy |
| rows | the schema by migration, then a row copy | the same |
| pg_dump | refused: a dump needs PostgreSQL | pg_restore, in one transaction |
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from sqlalchemy import Engine, create_engine, func, select, text

from broadside.core.backup import postgres_tools, rows, sqlite_copy
from broadside.core.backup.manifest import MANIFEST, BackupError, Manifest
from broadside.core.backup.taking import DUMP_MEMBER, ROWS_FOLDER, SQLITE_MEMBER


@dataclass(frozen=True)
class Schema:
    """The code's migrations, as the caller (the web side, with Alembic) knows them."""

    head: str
    known: Callable[[str], bool]  # is this revision one of the code's
    migrate: Callable[[str], None]  # upgrade the target database to a revision ("head")


@dataclass
class Restored:
    manifest: Manifest
    tables: dict[str, int]
    files: list[str] = field(default_factory=list)
    upgraded: bool = False


def restore_backup(archive: Path, engine: Engine, instance_path: Path,
                   schema: Schema) -> Restored:
    staging = Path(tempfile.mkdtemp(prefix=".broadside-restore-"))
    try:
        manifest = extract_verified(archive, staging)
        if not schema.known(manifest.revision):
            raise BackupError(f"This backup's schema ({manifest.revision}, Broadside "
                              f"{manifest.version}) is newer than this Broadside's "
                              f"({schema.head}): upgrade Broadside first, then restore. "
                              "Nothing was restored.")
        kind = engine.dialect.name
        if manifest.form == "pg_dump" and kind != "postgresql":
            raise BackupError("This backup is a PostgreSQL dump (taken --with-secrets): it "
                              "restores into PostgreSQL only. Point DATABASE_URL at an empty "
                              "PostgreSQL database, or restore a backup taken without "
                              "--with-secrets (portable to SQLite). Nothing was restored.")
        refuse_unless_empty(engine)
        tables = _restore_database(manifest, staging, engine, schema)
        _check_counts(manifest, tables)
        upgraded = manifest.revision != schema.head
        if upgraded:
            schema.migrate("head")
            engine.dispose()
        files = _restore_files(manifest, staging, instance_path)
        return Restored(manifest, tables, files, upgraded)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _safe(name: str) -> bool:
    path = PurePosixPath(name)
    return not path.is_absolute() and ".." not in path.parts and name == path.as_posix()


def extract_verified(archive: Path, into: Path) -> Manifest:
    """The archive's members into `into`, each checked against the manifest's SHA-256; the
    manifest. BackupError if anything is missing, extra, unsafe or different."""
    found: dict[str, str] = {}
    try:
        with tarfile.open(archive, "r:*") as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST:
                raise BackupError(f"{archive} does not start with a {MANIFEST}: not a "
                                  "Broadside backup. Nothing was restored.")
            handle = tar.extractfile(first)
            assert handle is not None
            manifest = Manifest.from_json(handle.read())
            for member in tar:
                if member is first or member.isdir():
                    continue
                if not member.isfile() or not _safe(member.name) \
                        or member.name not in manifest.members:
                    raise BackupError(f"The archive holds {member.name!r}, which its manifest "
                                      "does not list: it was changed after the backup. "
                                      "Nothing was restored.")
                source = tar.extractfile(member)
                assert source is not None
                target = into / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                digest = hashlib.sha256()
                with target.open("wb") as out:
                    while chunk := source.read(1 << 20):
                        digest.update(chunk)
                        out.write(chunk)
                found[member.name] = digest.hexdigest()
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise BackupError(f"{archive} cannot be read as a backup archive ({exc}): it is "
                          "damaged or truncated. Nothing was restored.") from None
    for name in manifest.files:
        if not name.startswith("instance/") or not _safe(name) or name not in manifest.members:
            raise BackupError(f"The manifest names the file {name!r}, which a backup never "
                              "holds: it was changed after the backup. Nothing was restored.")
    for name, expected in sorted(manifest.members.items()):
        if name not in found:
            raise BackupError(f"The archive lacks {name}, which its manifest lists: it is "
                              "truncated or damaged. Nothing was restored.")
        if found[name] != expected:
            raise BackupError(f"The archive is damaged: {name} does not match its checksum "
                              f"(SHA-256 {found[name][:12]}…, the manifest says "
                              f"{expected[:12]}…). Nothing was restored.")
    return manifest


def refuse_unless_empty(engine: Engine) -> None:
    with engine.connect() as connection:
        metadata = rows.reflect(connection)
        holding = [(t.name, n) for t in rows.data_tables(metadata)
                   if (n := int(connection.scalar(select(func.count()).select_from(t)) or 0))]
    if holding:
        shown = ", ".join(f"{name} ({count} rows)" for name, count in holding[:5])
        raise BackupError(f"The database is not empty ({shown}{', …' if len(holding) > 5 else ''})"
                          ": a restore goes onto an empty database only, never over data. "
                          "Point DATABASE_URL at a new, empty database. Nothing was restored.")


def _drop_everything(engine: Engine) -> None:
    """Empty, but perhaps migrated (a web process started once): its tables go, so the schema
    is the backup's revision's, built afresh."""
    if engine.dialect.name == "sqlite":
        engine.dispose()
        path = Path(str(engine.url.database))
        for suffix in ("", "-wal", "-shm", "-journal"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        return
    with engine.begin() as connection:
        metadata = rows.reflect(connection)
        for table in reversed(metadata.sorted_tables):
            connection.execute(text(f'DROP TABLE IF EXISTS "{table.name}" CASCADE'))
    engine.dispose()


def _restore_database(manifest: Manifest, staging: Path, engine: Engine,
                      schema: Schema) -> dict[str, int]:
    kind = engine.dialect.name
    if manifest.form == "sqlite" and kind == "sqlite":
        engine.dispose()
        sqlite_copy.restore_file(staging / SQLITE_MEMBER, Path(str(engine.url.database)))
        return _counts(engine)
    if manifest.form == "pg_dump":
        with engine.connect() as connection:
            program = postgres_tools.client("pg_restore",
                                            postgres_tools.server_major(connection))
        _drop_everything(engine)
        postgres_tools.restore(engine.url, staging / DUMP_MEMBER, program)
        return _counts(engine)
    with engine.connect() as connection:
        current = rows.revision_of(connection)
    if current != manifest.revision:
        # Empty, but at another revision (or none): the schema of the backup's revision is
        # built afresh, since a migration's downgrade may not exist. At that revision already
        # (a new database the web process migrated), its empty tables are used as they are.
        _drop_everything(engine)
        schema.migrate(manifest.revision)
        engine.dispose()
    source_engine = (create_engine(f"sqlite:///{staging / SQLITE_MEMBER}")
                     if manifest.form == "sqlite" else None)
    try:
        with engine.begin() as target:
            metadata = rows.reflect(target)
            if source_engine is not None:
                with source_engine.connect() as source:
                    written = rows.load(target, metadata,
                                        rows.reflected_rows(source, rows.reflect(source)))
            else:
                written = rows.load(target, metadata, rows.jsonl_rows(staging / ROWS_FOLDER))
            if kind == "postgresql":
                rows.move_sequences_on(target, metadata)
            _check_counts(manifest, written)
    finally:
        if source_engine is not None:
            source_engine.dispose()
    return _counts(engine)


def _counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as connection:
        return rows.count_rows(connection, rows.reflect(connection))


def _check_counts(manifest: Manifest, tables: dict[str, int]) -> None:
    wrong = [f"{name}: {tables.get(name, 0)} restored, {count} backed up"
             for name, count in sorted(manifest.tables.items()) if tables.get(name, 0) != count]
    wrong += [f"{name}: {count} restored, none backed up"
              for name, count in sorted(tables.items())
              if name not in manifest.tables and count]
    if wrong:
        raise BackupError("The restored rows do not match the backup's counts ("
                          + "; ".join(wrong[:5]) + "). Restore onto a new, empty database "
                          "again; if it happens again, the backup itself is unusable.")


def _restore_files(manifest: Manifest, staging: Path, instance_path: Path) -> list[str]:
    restored = []
    for name in manifest.files:
        relative = PurePosixPath(name).relative_to("instance")
        target = instance_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(staging / name, target)
        if relative.name == "secret_key":
            target.chmod(0o600)
        restored.append(relative.as_posix())
    return restored
