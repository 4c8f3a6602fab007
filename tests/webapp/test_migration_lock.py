"""Several processes running `flask --app webapp db upgrade` at once (the Procfile's web line,
on several hosts or a supervisor starting several web processes) on a fresh database: one
migrates, the others wait for its lock (broadside/core/migration_lock.py) and then find
nothing to do. Every process succeeds and the schema is made once.

The test holds the lock itself first, so all processes are provably waiting on it (seen in
pg_locks or /proc/locks) while the database is still empty; released, they go one at a time."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from broadside.core.migration_lock import MIGRATION_LOCK_KEY, sqlite_lock_path
from tests.conftest import REDIS_URL
from tests.fresh_databases import empty_database
from tests.helpers import SECRET_KEY, wait_until
from tests.own_apps import own_app
from webapp import REPO_ROOT
from webapp.extensions import db

PROCESSES = 3
FIRST_STEP = "Running upgrade  -> 0001"  # Alembic's line for the first migration


@contextmanager
def holding_the_lock(url: str) -> Iterator[Callable[[], int]]:
    """The migration lock, held by the test; yields a function counting the processes waiting
    for it."""
    if url.startswith("sqlite"):
        path = sqlite_lock_path(url.removeprefix("sqlite:///"))
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        inode = os.fstat(descriptor).st_ino

        def waiting() -> int:  # blocked requests are listed with "->" before them
            lines = Path("/proc/locks").read_text().splitlines()
            return sum(1 for line in lines if " -> FLOCK" in line and f":{inode} " in line)

        try:
            yield waiting
        finally:
            os.close(descriptor)
        return
    with psycopg.connect(url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))

        def waiting() -> int:
            return holder.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            ).fetchone()[0]

        yield waiting


def test_processes_upgrading_at_once_migrate_once(backend, tmp_path, namespace):
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "REDIS_URL": REDIS_URL,
           "SECRET_KEY": SECRET_KEY, "BROADSIDE_NAMESPACE": namespace}
    with empty_database(backend, tmp_path, "broadside_lock") as url:
        env["DATABASE_URL"] = url
        with holding_the_lock(url) as waiting:
            processes = []
            for n in range(PROCESSES):
                processes.append(subprocess.Popen(
                    [sys.executable, "-m", "flask", "--app", "webapp", "db", "upgrade"],
                    cwd=REPO_ROOT, env={**env, "BROADSIDE_INSTANCE_PATH": str(tmp_path / f"i{n}")},
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            try:
                wait_until(lambda: waiting() == PROCESSES, timeout=60)
            except BaseException:
                for process in processes:
                    process.kill()
                    process.wait()
                raise
            config = {"DATABASE_URL": url, "REDIS_URL": REDIS_URL, "SECRET_KEY": SECRET_KEY,
                      "BROADSIDE_NAMESPACE": namespace, "INSTANCE_PATH": str(tmp_path / "t")}
            with own_app(config):
                assert inspect(db.engine).get_table_names() == []  # nobody got past the lock
        outputs = [process.communicate(timeout=120)[0] for process in processes]

        assert [p.returncode for p in processes] == [0] * PROCESSES, outputs
        assert sum(FIRST_STEP in output for output in outputs) == 1, outputs
        with own_app(config) as app, db.engine.connect() as connection:
            migrate = app.extensions["migrate"]
            script = ScriptDirectory.from_config(migrate.migrate.get_config(migrate.directory))
            head = script.get_current_head()
            versions = connection.execute(text("SELECT version_num FROM alembic_version")).all()
            assert versions == [(head,)]
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, db.metadata) == []
