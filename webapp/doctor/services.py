"""The database (reachable, its schema current) and Redis (answering), each on a short timeout."""

from __future__ import annotations

import time
from pathlib import Path

from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from flask import Flask
from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import create_engine
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import SQLAlchemyError

from broadside.core.redis_health import how_to_start, shown_url
from webapp.doctor.check import CHECK_TIMEOUT_S, Check


def schema_head(app: Flask) -> str | None:
    """The code's newest migration, read once per process: the migrations folder cannot change
    under a running app, and reading it (Alembic loads every revision file) cost the System
    page most of its time."""
    cached = app.extensions.get("broadside_schema_head")
    if cached is not None:
        return cached[0]
    migrate = app.extensions["migrate"]
    config = migrate.migrate.get_config(migrate.directory)
    head = ScriptDirectory.from_config(config).get_current_head()
    app.extensions["broadside_schema_head"] = (head,)
    return head


def _check_engine(app: Flask, url: URL) -> Engine:
    """The checks' own engine: a short connect timeout without touching the app's pool. One
    per app, keeping one connection: the System page and its checks poll this, and a new
    PostgreSQL connection per view cost more than the rest of the page."""
    engine = app.extensions.get("doctor_engine")
    if engine is not None and engine.url != url:
        engine.dispose()
        engine = None
    if engine is None:
        connect_args = {"timeout": CHECK_TIMEOUT_S} if url.get_backend_name() == "sqlite" else {
            "connect_timeout": int(CHECK_TIMEOUT_S)}
        engine = create_engine(url, pool_size=1, max_overflow=1, pool_pre_ping=False,
                               connect_args=connect_args)
        app.extensions["doctor_engine"] = engine
    return engine


def check_database(app: Flask) -> Check:
    url = make_url(app.config["SQLALCHEMY_DATABASE_URI"])
    backend = url.get_backend_name()
    if backend == "sqlite" and url.database and url.database != ":memory:":
        if not Path(url.database).exists():
            return Check("database", False, f"the SQLite file {url.database} does not exist",
                         "run `flask --app webapp db upgrade` (the Procfile's web process does it)")
    engine = _check_engine(app, url)
    try:
        with engine.connect() as connection:
            current = MigrationContext.configure(connection).get_current_revision()
    except SQLAlchemyError as exc:
        engine.dispose()  # the next check connects afresh
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:200]
        return Check("database", False, f"{backend} unreachable: {reason}",
                     "check DATABASE_URL and that the database server is running")
    head = schema_head(app)
    if current == head:
        return Check("database", True, f"{backend} reachable, schema current ({head})")
    if current is None:
        return Check("database", False, f"{backend} reachable but empty (no migrations applied)",
                     "run `flask --app webapp db upgrade`")
    migrate = app.extensions["migrate"]
    script = ScriptDirectory.from_config(migrate.migrate.get_config(migrate.directory))
    try:
        script.get_revision(current)
    except CommandError:
        return Check("database", False, f"schema at {current}, which this code does not know",
                     "the database is newer than this code: deploy the matching version")
    return Check("database", False, f"schema at {current}, code needs {head}",
                 "run `flask --app webapp db upgrade`")


def check_redis(redis: Redis, url: str) -> Check:
    try:
        started = time.monotonic()
        redis.ping()
        elapsed_ms = (time.monotonic() - started) * 1000
    except RedisError as exc:
        # The same words as the worker's log and the dashboard (broadside.core.redis_health).
        return Check("Redis", False, f"not answering at {shown_url(url)} ({exc})",
                     f"{how_to_start(url)}; it holds the queue and the worker's lease, so nothing "
                     "is sent without it")
    return Check("Redis", True, f"reachable ({elapsed_ms:.1f} ms)")
