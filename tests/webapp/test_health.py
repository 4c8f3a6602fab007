"""The probes: /healthz says the process serves and asks nothing else; /readyz says whether
the database, Redis and the schema are ready, naming what is not, in English, without a
session."""

from __future__ import annotations

from alembic.migration import MigrationContext
from flask_migrate import downgrade, upgrade

from tests.own_apps import own_app
from webapp import health
from webapp.doctor.services import schema_head
from webapp.extensions import db


def test_healthz_answers_while_serving(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json == {"status": "ok"}
    assert "Set-Cookie" not in response.headers


def test_healthz_asks_neither_the_database_nor_redis(app_config, tmp_path):
    """A supervisor restarting web processes would not bring the database back."""
    gone = {**app_config, "REDIS_URL": "redis://127.0.0.1:1/0",
            "DATABASE_URL": "postgresql://postgres@127.0.0.1:1/nothing"}
    with own_app(gone) as app:
        client = app.test_client()
        assert client.get("/healthz").status_code == 200
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json == {"database": "not answering", "redis": "not answering",
                             "migrations": "unknown while the database is not answering"}


def test_readyz_ready_without_a_session_in_english(client):
    response = client.get("/readyz", headers={"Accept-Language": "de"})
    assert response.status_code == 200
    assert response.json == {"database": "ok", "redis": "ok", "migrations": "ok"}
    assert "Set-Cookie" not in response.headers


def test_readyz_names_redis_when_down(app_config):
    with own_app({**app_config, "REDIS_URL": "redis://127.0.0.1:1/0"}) as app:
        response = app.test_client().get("/readyz")
    assert response.status_code == 503
    assert response.json == {"database": "ok", "redis": "not answering", "migrations": "ok"}


def test_readyz_waits_for_the_migrations(app, client, monkeypatch):
    """A schema behind the code is not ready (its revision read again every few seconds, not
    at every probe); once upgraded, it is."""
    head = schema_head(app)
    monkeypatch.setattr(health, "SCHEMA_RECHECK_S", 3600)  # however slow the downgrade below
    assert client.get("/readyz").status_code == 200
    downgrade(revision="-1")
    try:
        with db.engine.connect() as connection:
            previous = MigrationContext.configure(connection).get_current_revision()
        assert client.get("/readyz").status_code == 200  # the revision read a moment ago holds
        monkeypatch.setattr(health, "SCHEMA_RECHECK_S", 0)
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json == {"database": "ok", "redis": "ok",
                                 "migrations": f"database at {previous}, the code needs {head}"}
    finally:
        upgrade()
    assert client.get("/readyz").json == {"database": "ok", "redis": "ok", "migrations": "ok"}
