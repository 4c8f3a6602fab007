"""The declarative base every model maps onto, the engine settings both processes share
(`make_engine`) and the connection settings SQLite needs.

No Flask here: the web app binds these models to Flask-SQLAlchemy (`webapp.extensions.db`), and
the worker to a plain scoped session (`jobs.database`), so the sending process never loads the
web stack (Flask, Werkzeug, Click and Flask-SQLAlchemy: about 5 MB of its memory). Nothing
here connects to anything at import time.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

from sqlalchemy import MetaData, Table, create_engine, event, make_url, pool
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import CursorResult, Engine, Result
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    # Named constraints, so later migrations can alter them on SQLite (batch mode).
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(column_0_label)s",
            "uq": "uq_%(table_name)s_%(column_0_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )

    if TYPE_CHECKING:
        # Every model maps one table (SQLAlchemy declares the wider `FromClause`).
        __table__: ClassVar[Table]


# For tables whose ids reach the outside world (in links, tokens, API answers): an id is never
# given to a second row, even after the newest row is deleted. PostgreSQL's sequences never go
# back; SQLite reuses the largest id + 1 unless the table is AUTOINCREMENT.
NEVER_REUSE_IDS = {"sqlite_autoincrement": True}

# Every model subclasses this (it maps one table, named by its `__tablename__`).
Model = Base


def engine_options(config: Mapping[str, Any], instance_path: str) -> dict[str, Any]:
    """`create_engine`'s arguments for the configured database, as Flask-SQLAlchemy makes them
    for the web app (so the worker opens the same database the same way): a relative SQLite
    path is under the instance folder, an in-memory database is one shared connection, and
    SQLALCHEMY_ENGINE_OPTIONS / SQLALCHEMY_ECHO apply."""
    options: dict[str, Any] = dict(config.get("SQLALCHEMY_ENGINE_OPTIONS") or {})
    options["echo"] = bool(config.get("SQLALCHEMY_ECHO", False))
    url = make_url(config["SQLALCHEMY_DATABASE_URI"])
    if url.drivername in {"sqlite", "sqlite+pysqlite"}:
        if url.database in (None, "", ":memory:"):
            options["poolclass"] = pool.StaticPool
            options.setdefault("connect_args", {})["check_same_thread"] = False
        else:
            uri = bool(url.query.get("uri"))
            path = url.database[5:] if uri else url.database
            if not os.path.isabs(path):
                os.makedirs(instance_path, exist_ok=True)
                path = os.path.join(instance_path, path)
                url = url.set(database=f"file:{path}" if uri else path)
    options["url"] = url
    return options


def make_engine(config: Mapping[str, Any], instance_path: str) -> Engine:
    """The engine for the configured database (see `engine_options`)."""
    options = engine_options(config, instance_path)
    return create_engine(options.pop("url"), **options)


def rowcount(result: Result[Any]) -> int:
    """The rows an UPDATE or DELETE run through `session.execute` matched. Such a statement
    returns a `CursorResult`, though `Session.execute` is declared as returning a `Result`."""
    return cast(CursorResult[Any], result).rowcount


@event.listens_for(Engine, "connect")
def _sqlite_pragmas(dbapi_connection, _record) -> None:
    # WAL and a busy timeout let the web process and the worker write at the same time.
    # sqlite3 is loaded by SQLAlchemy's SQLite dialect before its first connection; a process
    # on PostgreSQL never loads it (libsqlite3 and its module are ~1 MB of the worker).
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is not None and isinstance(dbapi_connection, sqlite3.Connection):
        cursor = dbapi_connection.cursor()
        _owner_only(cursor.execute("PRAGMA database_list").fetchone()[2])
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=15000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


def _owner_only(path: str) -> None:
    """The database holds every subscriber's address: readable and writable by its owner only
    (before WAL is switched on, since SQLite gives the -wal and -shm files the database's mode)."""
    if not path:
        return  # an in-memory database
    try:
        if os.stat(path).st_mode & 0o077:
            os.chmod(path, 0o600)
    except OSError:
        pass  # not ours to change (another user's file, a read-only mount): leave it as it is


def dialect_insert(session: Any, table: Any) -> Any:
    """An INSERT that knows ON CONFLICT, on SQLite and PostgreSQL (the one helper the
    subscribers, sign-up, automations and analytics writers share)."""
    if session.get_bind().dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)
