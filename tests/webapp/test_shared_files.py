"""More than one machine: the logo and an import's upload live in the database, so a web host
or a worker with another instance folder (another machine) serves the logo and runs the import;
revision 0039 upgrades and downgrades (the logos written back to `brand/`)."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest
from sqlalchemy import func, inspect, select, text

from broadside.audience import lists as lists
from broadside.audience.transfer import stored
from broadside.core.models import BrandFile, Import, ImportChunk
from broadside.core.site_settings import get_settings
from tests import design_images as images
from tests.helpers import csrf_token_from, wait_until
from tests.own_apps import own_app
from tests.webapp.import_steps import last_import, upload
from tests.webapp.test_partial_indexes import fresh_url, unmigrated_app  # noqa: F401  (fixtures)
from webapp.extensions import db


def other_host(app_config: dict, tmp_path: Path, name: str) -> dict:
    """The same installation's settings on another machine: its own instance folder."""
    folder = tmp_path / name
    folder.mkdir()
    return {**app_config, "INSTANCE_PATH": str(folder)}


def test_a_logo_uploaded_through_one_web_host_is_served_by_another(
        logged_in_client, app, app_config, tmp_path):
    logo = images.png(40, 20)
    page = logged_in_client.get("/settings/design")
    sent = logged_in_client.post("/settings/design/logo", data={
        "csrf_token": csrf_token_from(page.text), "logo": (io.BytesIO(logo), "logo.png")},
        content_type="multipart/form-data")
    assert sent.status_code == 303
    settings = get_settings(db.session)
    path = f"/brand/logo/{settings.logo_file}"
    assert settings.logo_url == app.config["BASE_URL"] + path  # the emails' URL, as before
    assert not (Path(app.instance_path) / "brand").exists()  # nothing on this host's disk

    with own_app(other_host(app_config, tmp_path, "web2")) as web2:
        served = web2.test_client().get(path)
        assert served.status_code == 200 and served.mimetype == "image/png"
        assert served.data == logo
        assert served.headers["ETag"] == f'"{settings.logo_file.split(".")[0]}"'
        cache = served.headers["Cache-Control"]
        assert "immutable" in cache and "public" in cache and "max-age=31536000" in cache
        again = web2.test_client().get(path, headers={"If-None-Match": served.headers["ETag"]})
        assert again.status_code == 304


def test_a_logo_kept_as_a_file_before_0039_is_taken_in_at_its_first_request(
        app, app_config, tmp_path):
    logo = images.png(30, 10)
    name = f"{hashlib.sha256(logo).hexdigest()[:32]}.png"
    folder = Path(app.instance_path) / "brand"
    folder.mkdir()
    (folder / name).write_bytes(logo)
    older = images.png(30, 10, rgb=(0, 0, 90))  # a logo only old emails show
    older_name = f"{hashlib.sha256(older).hexdigest()[:32]}.png"
    (folder / older_name).write_bytes(older)
    forged = f"{'0' * 32}.png"
    (folder / forged).write_bytes(logo)  # bytes that are not what the name says
    client = app.test_client()
    assert db.session.get(BrandFile, name) is None

    assert client.get(f"/brand/logo/{name}").data == logo
    assert client.get(f"/brand/logo/{forged}").status_code == 404
    assert (folder / name).read_bytes() == logo  # the files stay
    db.session.expire_all()
    assert {f.name for f in db.session.scalars(select(BrandFile))} == {name, older_name}
    with own_app(other_host(app_config, tmp_path, "web2")) as web2:
        assert web2.test_client().get(f"/brand/logo/{name}").data == logo
        assert web2.test_client().get(f"/brand/logo/{older_name}").data == older


@pytest.fixture
def always_background(app_config):
    app_config["IMPORT_INLINE_MAX_BYTES"] = 0


def chunk_count(import_id: int) -> int:
    db.session.expire_all()
    return db.session.scalar(select(func.count()).select_from(ImportChunk)
                             .where(ImportChunk.import_id == import_id))


def test_an_import_uploaded_through_one_host_is_run_by_a_worker_on_another(
        always_background, logged_in_client, app, app_config, tmp_path, worker_factory,
        monkeypatch):
    monkeypatch.setattr(stored, "CHUNK", 4096)  # several chunks, put back in order
    weekly = lists.create_list(db.session, "Weekly")
    content = b"email,name\n" + b"".join(b"p%d@example.com,P %d\n" % (i, i) for i in range(600))
    assert upload(logged_in_client, weekly.id, content).status_code == 303
    record = last_import()
    assert record.status == "queued" and chunk_count(record.id) == -(-len(content) // 4096)
    assert list((Path(app.instance_path) / "imports").glob("*")) == []  # nothing on disk
    progress = logged_in_client.get(f"/subscribers/imports/{record.id}/progress")
    assert "of about 6" in progress.text  # estimated from the stored bytes' start

    elsewhere = other_host(app_config, tmp_path, "worker2")
    worker = worker_factory(BROADSIDE_INSTANCE_PATH=elsewhere["INSTANCE_PATH"])

    def finished() -> bool:
        db.session.expire_all()
        return db.session.get(Import, record.id).status in ("done", "failed")

    wait_until(finished, timeout=30, message=f"the import did not finish\n{worker.output}")
    record = last_import()
    assert (record.status, record.imported, record.error) == ("done", 600, None)
    assert chunk_count(record.id) == 0  # the bytes are gone with the run
    assert list((Path(elsewhere["INSTANCE_PATH"]) / "imports").glob("*")) == []


def test_a_failed_import_leaves_no_bytes_behind(always_background, logged_in_client, app,
                                                run_worker_burst):
    weekly = lists.create_list(db.session, "Weekly")
    upload(logged_in_client, weekly.id, b"email\none@example.com\n")
    record_id = last_import().id
    assert chunk_count(record_id) == 1
    lists.delete_list(db.session, weekly.id)
    assert run_worker_burst() == 0
    assert db.session.get(Import, record_id).status == "failed"
    assert chunk_count(record_id) == 0


def test_0039_upgrades_and_downgrades_writing_the_logos_back(unmigrated_app, backend):  # noqa: F811
    from flask_migrate import downgrade, upgrade

    logo = images.png(8, 8)
    name = f"{hashlib.sha256(logo).hexdigest()[:32]}.png"
    with unmigrated_app.app_context():
        upgrade(revision="0038")
        assert "brand_files" not in inspect(db.engine).get_table_names()
        upgrade(revision="0039")
        tables = set(inspect(db.engine).get_table_names())
        assert {"brand_files", "import_chunks"} <= tables
        db.session.add(BrandFile(name=name, content_type="image/png", data=logo))
        db.session.commit()
        db.session.remove()

        downgrade(revision="0038")
        tables = set(inspect(db.engine).get_table_names())
        assert not {"brand_files", "import_chunks"} & tables
        assert (Path(unmigrated_app.instance_path) / "brand" / name).read_bytes() == logo

        upgrade()
        with db.engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM brand_files")).scalar() == 0
        # Upgraded again, the logo written back is taken in at its first request.
        assert unmigrated_app.test_client().get(f"/brand/logo/{name}").data == logo
        assert db.session.get(BrandFile, name) is not None
        db.session.remove()
