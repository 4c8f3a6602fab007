"""`backup` and `restore` refuse what they must: a damaged archive, a schema newer than the
code, a database that holds rows, a PostgreSQL dump into SQLite, a missing pg_dump; keep the
secrets only when asked; copy consistently while rows are written; and `doctor` says when
the last backup was taken."""

from __future__ import annotations

import io
import json
import tarfile
import threading
from pathlib import Path

import pytest
from flask_migrate import upgrade
from sqlalchemy import func, select, text

from broadside.core.models import Identity, Subscriber, Subscription
from tests.backups import DKIM_KEY, TRANSPORT_PASSWORD, fresh_postgres, readers, table_rows
from tests.own_apps import own_app
from webapp.doctor.report import run_checks
from webapp.doctor.services import schema_head
from webapp.extensions import db


def _backup(app, path: Path, *args: str) -> str:
    result = app.test_cli_runner().invoke(args=["backup", *args, str(path)])
    assert result.exit_code == 0, result.output
    return result.output


def _restore(config: dict, archive: Path) -> tuple[int, str, dict]:
    with own_app(config) as restored:
        result = restored.test_cli_runner().invoke(args=["restore", str(archive)])
        return result.exit_code, result.output, table_rows(db.engine)


def _fresh_sqlite(app_config: dict, tmp_path: Path, name: str = "target") -> dict:
    return {**app_config, "DATABASE_URL": f"sqlite:///{tmp_path / (name + '.db')}",
            "INSTANCE_PATH": str(tmp_path / name)}


def _rewrite(archive: Path, change) -> Path:
    """A copy of the archive with `change(name, data) -> data` applied to each member."""
    out = archive.with_name("changed-" + archive.name)
    with tarfile.open(archive) as source, tarfile.open(out, "w") as target:
        for member in source:
            data = source.extractfile(member).read()
            data = change(member.name, data)
            member.size = len(data)
            target.addfile(member, io.BytesIO(data))
    return out


@pytest.fixture
def installation(app):
    readers(5)
    identity = Identity(name="Product", name_key="product", from_email="p@acme.example",
                        transport_url=f"smtp://mailer:{TRANSPORT_PASSWORD}@127.0.0.1:9",
                        dkim_selector="s1", dkim_private_key=DKIM_KEY)
    db.session.add(identity)
    db.session.commit()
    return app


def test_a_damaged_archive_is_refused_and_nothing_restored(installation, app_config, tmp_path):
    archive = tmp_path / "b.tar"
    _backup(installation, archive)

    flipped = []

    def flip(name: str, data: bytes) -> bytes:
        if not name.startswith("database/") or not data or flipped:
            return data
        flipped.append(name)
        return data[:-1] + bytes([data[-1] ^ 1])  # one bit of one member

    code, output, tables = _restore(_fresh_sqlite(app_config, tmp_path), _rewrite(archive, flip))
    assert code == 1 and flipped
    assert f"{flipped[0]} does not match its checksum" in output
    assert "Nothing was restored" in output
    assert tables == {}  # not even a schema


@pytest.mark.parametrize("backend", ["sqlite"])  # the archive's form is beside the point
def test_a_newer_schema_is_refused(installation, app_config, tmp_path):
    archive = tmp_path / "b.tar"
    _backup(installation, archive)

    def newer(name: str, data: bytes) -> bytes:
        if name != "manifest.json":
            return data
        manifest = json.loads(data)
        manifest["schema_revision"] = "0099_from_the_future"
        return json.dumps(manifest).encode()

    code, output, tables = _restore(_fresh_sqlite(app_config, tmp_path), _rewrite(archive, newer))
    assert code == 1
    assert "0099_from_the_future" in output and "upgrade Broadside first" in output
    assert tables == {}


def test_a_database_holding_rows_is_refused(installation, app_config, tmp_path):
    archive = tmp_path / "b.tar"
    _backup(installation, archive)
    before = table_rows(db.engine)
    code, output, tables = _restore(app_config, archive)  # the installation's own database
    assert code == 1
    assert "The database is not empty" in output and "subscribers (5 rows)" in output
    assert tables == before


@pytest.mark.parametrize("backend", ["sqlite"])  # the archive's form is beside the point
def test_an_older_backup_is_upgraded_after_restoring(app_config, tmp_path):
    old = _fresh_sqlite(app_config, tmp_path, "old")
    with own_app(old) as app:
        upgrade(revision="0037")
        with db.engine.begin() as connection:
            connection.execute(text("INSERT INTO subscribers (email, name, attributes, created_at,"
                                    " soft_bounce_count) VALUES ('old@example.com', 'Old', '{}',"
                                    " '2026-01-01 00:00:00', 0)"))
        _backup(app, tmp_path / "old.tar.gz")
    with fresh_postgres() as url:
        config = {**app_config, "DATABASE_URL": url, "INSTANCE_PATH": str(tmp_path / "new")}
        code, output, tables = _restore(config, tmp_path / "old.tar.gz")
        assert code == 0, output
        assert "Schema upgraded from 0037" in output
        with own_app(config) as restored:
            assert db.session.scalar(text("SELECT version_num FROM alembic_version")) == \
                schema_head(restored)  # the newest, whichever it is
            assert db.session.scalar(select(Subscriber.email)) == "old@example.com"
            db.session.commit()


def test_with_secrets_the_archive_keeps_them(installation, app_config, backend, tmp_path):
    (tmp_path / "instance" / "secret_key").write_text("the-old-installations-key-0123456789")
    archive = tmp_path / "b.tar.gz"
    assert "Secrets are IN this archive" in _backup(installation, archive, "--with-secrets")
    source = table_rows(db.engine)
    code, output, tables = _restore(_fresh_sqlite(app_config, tmp_path), archive)
    if backend == "postgresql":
        # A dump restores into PostgreSQL only: said, and nothing written.
        assert code == 1 and "restores into PostgreSQL only" in output
        assert tables == {}
    else:
        assert code == 0, output
        assert tables == source
    with fresh_postgres() as url:
        config = {**app_config, "DATABASE_URL": url, "INSTANCE_PATH": str(tmp_path / "pg")}
        code, output, tables = _restore(config, archive)
        assert code == 0, output
        assert "Secrets were in the backup" in output
        assert "instance/secret_key is the old installation's again" in output
        assert tables == source
        assert (tmp_path / "pg" / "secret_key").read_text() == \
            "the-old-installations-key-0123456789"


@pytest.mark.parametrize("backend", ["sqlite"])  # the archive's form is beside the point
def test_a_missing_pg_dump_is_named_with_its_package(app_config, tmp_path, monkeypatch):
    with fresh_postgres() as url:
        config = {**app_config, "DATABASE_URL": url, "INSTANCE_PATH": str(tmp_path / "pg")}
        with own_app(config) as app:
            upgrade()
            monkeypatch.setenv("PATH", str(tmp_path / "no-programs-here"))
            result = app.test_cli_runner().invoke(
                args=["backup", "--with-secrets", str(tmp_path / "b.tar")])
            assert result.exit_code == 1
            assert "pg_dump is not on PATH" in result.output
            assert "apt install postgresql-client-" in result.output
            assert list(tmp_path.glob("*.tar*")) == [] and list(tmp_path.glob(".*")) == []
            # A client older than the server (one that says so, as pg_dump 12 would).
            old = tmp_path / "old-client"
            old.mkdir()
            (old / "pg_dump").write_text("#!/bin/sh\necho 'pg_dump (PostgreSQL) 12.22'\n")
            (old / "pg_dump").chmod(0o755)
            monkeypatch.setenv("PATH", str(old))
            result = app.test_cli_runner().invoke(
                args=["backup", "--with-secrets", str(tmp_path / "b.tar")])
            assert result.exit_code == 1
            assert "pg_dump is version 12, older than the server" in result.output
            assert list(tmp_path.glob("*.tar*")) == [] and list(tmp_path.glob(".*")) == []


def test_a_backup_while_rows_are_written_is_one_moment(app, app_config, tmp_path):
    """Each write adds a subscriber and their subscription in one transaction: a consistent
    copy has as many of one as of the other, and its counts are the manifest's."""
    mailing_list = readers(1)
    stop = threading.Event()
    written = {"n": 0}

    def write() -> None:
        with app.app_context():
            while not stop.is_set():
                person = Subscriber(email=f"w{written['n']}@example.com", name="W")
                db.session.add(person)
                db.session.flush()
                db.session.add(Subscription(subscriber_id=person.id, list_id=mailing_list.id,
                                            status="active"))
                db.session.commit()
                written["n"] += 1
            db.session.remove()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        while written["n"] < 20:
            stop.wait(0.01)
        _backup(app, tmp_path / "b.tar")
        at_backup = written["n"]
    finally:
        stop.set()
        writer.join(30)
    assert written["n"] > 20
    code, output, _ = _restore(_fresh_sqlite(app_config, tmp_path), tmp_path / "b.tar")
    assert code == 0, output
    with own_app(_fresh_sqlite(app_config, tmp_path)):
        people = db.session.scalar(select(func.count()).select_from(Subscriber))
        subscriptions = db.session.scalar(select(func.count()).select_from(Subscription))
        db.session.commit()
    assert people == subscriptions and 20 < people <= at_backup + 2


@pytest.mark.parametrize("backend", ["sqlite"])  # the archive's form is beside the point
def test_doctor_says_when_the_last_backup_was_taken(app, tmp_path):
    assert not [c for c in run_checks(app, smtp=False) if c.name == "backups"]
    folder = tmp_path / "backups"
    folder.mkdir()
    app.config["BACKUP_DIR"] = str(folder)
    [line] = [c for c in run_checks(app, smtp=False) if c.name == "backups"]
    assert line.warning and not line.ok and "no backup in" in line.summary
    _backup(app, folder / "first.tar.gz")
    (folder / "not-a-backup.tar").write_bytes(b"damaged")  # newer, but unreadable: skipped
    [line] = [c for c in run_checks(app, smtp=False) if c.name == "backups"]
    assert line.ok and "first.tar.gz" in line.summary and "without secrets" in line.summary

    def old(name: str, data: bytes) -> bytes:
        if name != "manifest.json":
            return data
        manifest = json.loads(data)
        manifest["created_at"] = "2020-01-01T00:00:00Z"
        return json.dumps(manifest).encode()

    (folder / "first.tar.gz").unlink()
    _backup(app, tmp_path / "old.tar")
    _rewrite(tmp_path / "old.tar", old).rename(folder / "old.tar")
    [line] = [c for c in run_checks(app, smtp=False) if c.name == "backups"]
    assert line.warning and not line.ok and "BACKUP_MAX_AGE_HOURS (26 h)" in line.advice
