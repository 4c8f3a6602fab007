"""The SQLAlchemy handle every model and service uses, created unbound (the web app and the
worker bind it in `webapp.create_app`), and the connection settings SQLite needs.

Nothing here connects to anything at import time.
"""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING, Any, ClassVar, cast

from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import MetaData, Table, event
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


# For tables whose ids reach the outside world (in links, tokens, API answers): an id is never
# given to a second row, even after the newest row is deleted. PostgreSQL's sequences never go
# back; SQLite reuses the largest id + 1 unless the table is AUTOINCREMENT.
NEVER_REUSE_IDS = {"sqlite_autoincrement": True}

db = SQLAlchemy(model_class=Base)

# The base class of every model. `db.Model` is built at run time, so a type checker cannot see
# it; it is `Base` plus Flask-SQLAlchemy's model mixin, which is what it is declared as here.
if TYPE_CHECKING:
    from flask_sqlalchemy.model import Model as _FlaskModel

    class Model(Base, _FlaskModel):
        """`Base` with Flask-SQLAlchemy's `query` and `__fsa__`."""

        # Every model maps one table (SQLAlchemy declares the wider `FromClause`).
        __table__: ClassVar[Table]
else:
    Model = db.Model


def rowcount(result: Result[Any]) -> int:
    """The rows an UPDATE or DELETE run through `session.execute` matched. Such a statement
    returns a `CursorResult`, though `Session.execute` is declared as returning a `Result`."""
    return cast(CursorResult[Any], result).rowcount


@event.listens_for(Engine, "connect")
def _sqlite_pragmas(dbapi_connection, _record) -> None:
    # WAL and a busy timeout let the web process and the worker write at the same time.
    if isinstance(dbapi_connection, sqlite3.Connection):
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
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(table)
