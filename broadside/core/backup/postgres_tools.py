"""PostgreSQL's own client programs: `pg_dump --format=custom` for a backup with secrets, in
the snapshot the manifest's row counts were read in (`--snapshot`, exported by the caller's
REPEATABLE READ transaction), and `pg_restore` into an empty database, in one transaction.

A client older than the server cannot dump it (pg_dump refuses, with words about "server
version mismatch"); both it missing and it being too old are said here before anything starts,
with the Debian package that brings the right one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from sqlalchemy import Connection
from sqlalchemy.engine import URL

from broadside.core.backup.manifest import BackupError

_VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+)")


def server_major(connection: Connection) -> int:
    return int(connection.exec_driver_sql("SHOW server_version_num").scalar_one()) // 10000


def client(program: str, server: int) -> str:
    """The path of `program` (pg_dump or pg_restore), or BackupError saying how to get one at
    least as new as the server."""
    package = f"postgresql-client-{server}"
    path = shutil.which(program)
    if path is None:
        raise BackupError(f"{program} is not on PATH: it is PostgreSQL's client, needed to "
                          f"back up and restore PostgreSQL. Install it (Debian and Ubuntu: "
                          f"`apt install {package}`, or `postgresql-client`) and run this "
                          "again. Nothing was written.")
    answer = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    found = _VERSION.search(answer.stdout)
    major = int(found.group(1)) if found else 0
    if major < server:
        raise BackupError(f"{program} is version {major or 'unknown'}, older than the server "
                          f"(PostgreSQL {server}); it cannot read a newer server. Install "
                          f"{package} (Debian and Ubuntu: `apt install {package}`; put its "
                          f"/usr/lib/postgresql/{server}/bin first on PATH) and run this "
                          "again. Nothing was written.")
    return path


def _connection_args(url: URL) -> tuple[list[str], dict[str, str]]:
    """libpq's arguments for `url`, the password in the environment (never on a command line
    that `ps` shows)."""
    env = dict(os.environ)
    if url.password is not None:
        env["PGPASSWORD"] = str(url.password)
    plain = url.set(drivername="postgresql", password=None)
    return [f"--dbname={plain.render_as_string(hide_password=False)}"], env


def dump(url: URL, snapshot: str, target: Path, program: str) -> None:
    args, env = _connection_args(url)
    done = subprocess.run([program, "--format=custom", "--no-owner", "--no-privileges",
                           f"--snapshot={snapshot}", f"--file={target}", *args],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise BackupError(f"pg_dump failed: {done.stderr.strip()[:500]} Nothing was written.")


def restore(url: URL, dump_file: Path, program: str) -> None:
    args, env = _connection_args(url)
    done = subprocess.run([program, "--no-owner", "--no-privileges", "--single-transaction",
                           "--exit-on-error", *args, str(dump_file)],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise BackupError(f"pg_restore failed (its one transaction was rolled back): "
                          f"{done.stderr.strip()[:500]}")
