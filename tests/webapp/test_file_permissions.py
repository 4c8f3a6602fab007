"""What Broadside writes to disk is for the owner's eyes only: the instance folder (0700), the
SQLite database (0600) and every uploaded address list a worker spools to disk (0600)."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

from flask_migrate import upgrade

from broadside.audience import lists as lists
from broadside.audience.transfer import stored
from broadside.core.models import Import
from tests.helpers import SECRET_KEY, csrf_token_from
from webapp import create_app
from webapp.extensions import db


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def migrate_new_installation(instance: Path, database: Path, namespace: str) -> None:
    """What `flask db upgrade` does on a new machine: the app starts, the schema is created."""
    app = create_app({"INSTANCE_PATH": str(instance), "SECRET_KEY": SECRET_KEY,
                      "DATABASE_URL": f"sqlite:///{database}", "BROADSIDE_NAMESPACE": namespace},
                     environ={})
    with app.app_context():
        upgrade()
        db.engine.dispose()


def test_a_new_installation_keeps_its_folder_and_database_private(tmp_path, namespace):
    instance = tmp_path / "instance"
    database = instance / "broadside.db"
    previous = os.umask(0o022)  # the usual umask: files 0644, folders 0755 unless we say so
    try:
        migrate_new_installation(instance, database, namespace)
    finally:
        os.umask(previous)
    assert mode(instance) == 0o700
    assert mode(database) == 0o600
    for sidecar in (Path(f"{database}-wal"), Path(f"{database}-shm")):
        if sidecar.exists():
            assert mode(sidecar) & 0o077 == 0


def test_an_existing_world_readable_database_is_made_private_on_connect(tmp_path, namespace):
    instance = tmp_path / "instance"
    instance.mkdir(mode=0o755)
    database = instance / "broadside.db"
    database.touch(mode=0o644)
    os.chmod(database, 0o644)
    migrate_new_installation(instance, database, namespace)
    assert (mode(instance), mode(database)) == (0o700, 0o600)


def test_an_uploaded_csv_spooled_for_the_worker_is_readable_by_the_owner_only(
        app_config, logged_in_client, app):
    app.config["IMPORT_INLINE_MAX_BYTES"] = 0  # the upload waits for the background job
    weekly = lists.create_list(db.session, "Weekly")
    page = logged_in_client.get("/subscribers/import")
    content = b"email\n" + b"".join(b"p%d@example.com\n" % i for i in range(50))
    response = logged_in_client.post("/subscribers/import", data={
        "csrf_token": csrf_token_from(page.text), "list_id": weekly.id, "consent": "opted_in",
        "file": (io.BytesIO(content), "people.csv"),
    }, content_type="multipart/form-data")
    assert response.status_code == 303
    record = db.session.query(Import).one()
    folder = Path(app.instance_path) / "imports"
    assert not list(folder.glob("*"))  # it waits in the database, not on this disk
    # The worker writes it to a scratch file on its own host while it runs.
    upload = stored.spool(db.session, record.id, folder / f"{record.id}.csv")
    assert upload.read_bytes() == content
    assert (mode(folder), mode(upload)) == (0o700, 0o600)
