"""Databases with nothing in them, for the tests that build a schema themselves (migrations
step by step, their lock, a restore): a private PostgreSQL database dropped afterwards, or a
SQLite file in the test's own folder."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tests.conftest import POSTGRES_URL


@contextmanager
def fresh_postgres(prefix: str = "broadside_fresh") -> Iterator[str]:
    """A new, empty PostgreSQL database (no schema at all), dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def empty_database(backend: str, tmp_path: Path, prefix: str = "broadside_fresh") -> Iterator[str]:
    """An empty database of `backend` ("sqlite" or "postgresql"): its URL."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / (prefix + '.db')}"
        return
    with fresh_postgres(prefix) as url:
        yield url
