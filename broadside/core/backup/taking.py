"""Taking a backup: the database's consistent copy, the instance's files and the manifest,
written into one archive under a hidden name and renamed when whole (so a visible archive is
a finished one: `manifest.newest_backup` relies on it)."""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from sqlalchemy import Engine, text

from broadside.core.backup import postgres_tools, rows, sqlite_copy
from broadside.core.backup.manifest import MANIFEST, BackupError, Manifest, sha256_of
from broadside.core.backup.secret_columns import Removed
from broadside.core.timeutil import utcnow

SQLITE_MEMBER = "database/broadside.sqlite3"
DUMP_MEMBER = "database/broadside.pgdump"
ROWS_FOLDER = "database/rows"
# The instance's files an installation cannot do without. Logos and waiting imports are in
# the database since 0039 (`brand_files`, `import_chunks`); these folders hold only what an
# older version wrote there and has not taken in yet (the logo route takes old files in at
# their first request). The secret key signs every link in emails already sent
# (unsubscribe, confirm): a secret, so only with --with-secrets.
INSTANCE_FOLDERS = ("brand", "imports")
SECRET_KEY_FILE = "secret_key"


def compression(path: Path) -> str:
    return "gz" if path.name.endswith((".gz", ".tgz")) else ""


def take_backup(engine: Engine, instance_path: Path, out: Path, *, with_secrets: bool,
                version: str) -> Manifest:
    """Write the archive `out`; its manifest. BackupError (nothing left behind) when it cannot."""
    if out.exists() and out.is_dir():
        raise BackupError(f"{out} is a folder: give the archive's file name, e.g. "
                          f"{out / 'broadside.tar.gz'}.")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".broadside-backup-", dir=out.parent))
    try:
        manifest = _stage(engine, instance_path, staging, with_secrets=with_secrets,
                          version=version)
        _write(staging, manifest, out)
        return manifest
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _stage(engine: Engine, instance_path: Path, staging: Path, *, with_secrets: bool,
           version: str) -> Manifest:
    created = utcnow()
    removed: list[Removed] = []
    kind = engine.dialect.name
    if kind == "sqlite":
        target = staging / SQLITE_MEMBER
        target.parent.mkdir(parents=True)
        try:
            revision, counts, removed = sqlite_copy.copy_database(
                Path(str(engine.url.database)), target, with_secrets=with_secrets)
        except FileNotFoundError as exc:
            raise BackupError(f"There is nothing to back up: {exc}.") from None
        form = "sqlite"
    elif kind == "postgresql":
        revision, counts, removed, form = _postgres(engine, staging, with_secrets)
    else:
        raise BackupError(f"Broadside backs up SQLite and PostgreSQL, not {kind}.")
    if revision is None:
        raise BackupError("The database has no schema yet (no migrations applied): there is "
                          "nothing to back up.")
    files = _instance_files(instance_path, staging, with_secrets)
    members = {path.relative_to(staging).as_posix(): sha256_of(path)
               for path in sorted(staging.rglob("*")) if path.is_file()}
    return Manifest(revision=revision, version=version, database=kind, form=form,
                    created_at=created, secrets=with_secrets, tables=counts, members=members,
                    removed=[r.as_json() for r in removed], files=files)


def _postgres(engine: Engine, staging: Path, with_secrets: bool):
    """One REPEATABLE READ READ ONLY transaction: the revision, the counts and the copy (the
    rows, or pg_dump on the exported snapshot) all see the same moment."""
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as connection:
        program = (postgres_tools.client("pg_dump", postgres_tools.server_major(connection))
                   if with_secrets else "")
        connection.rollback()  # the version's read opened a transaction; the snapshot's is next
        with connection.begin():
            connection.execute(text("SET TRANSACTION READ ONLY"))
            revision = rows.revision_of(connection)
            metadata = rows.reflect(connection)
            if with_secrets:
                snapshot = connection.execute(text("SELECT pg_export_snapshot()")).scalar_one()
                counts = rows.count_rows(connection, metadata)
                target = staging / DUMP_MEMBER
                target.parent.mkdir(parents=True)
                postgres_tools.dump(engine.url, snapshot, target, program)
                return revision, counts, [], "pg_dump"
            counts, removed = rows.write_jsonl(connection, metadata, staging / ROWS_FOLDER,
                                               with_secrets=False)
            return revision, counts, removed, "rows"


def _instance_files(instance_path: Path, staging: Path, with_secrets: bool) -> list[str]:
    names = []
    sources = [p for folder in INSTANCE_FOLDERS for p in sorted((instance_path / folder).glob("*"))
               if p.is_file() and not p.name.startswith(".")]
    if with_secrets and (instance_path / SECRET_KEY_FILE).is_file():
        sources.append(instance_path / SECRET_KEY_FILE)
    for source in sources:
        name = "instance/" + source.relative_to(instance_path).as_posix()
        target = staging / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        names.append(name)
    return names


def _write(staging: Path, manifest: Manifest, out: Path) -> None:
    partial = out.with_name(f".{out.name}.{os.getpid()}.part")
    (staging / MANIFEST).write_bytes(manifest.to_json())
    try:
        # The archive holds every subscriber's address: its owner's alone, from the start.
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle, (
                tarfile.open(fileobj=handle, mode="w:gz") if compression(out)
                else tarfile.open(fileobj=handle, mode="w")) as archive:
            archive.add(staging / MANIFEST, arcname=MANIFEST)
            for name in sorted(manifest.members):
                archive.add(staging / name, arcname=name)
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
