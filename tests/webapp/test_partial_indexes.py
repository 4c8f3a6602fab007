"""0017_partial_indexes on real data, on SQLite and PostgreSQL: three indexes hold only the rows
their queries read, those queries still read them, the rows survive the upgrade and the
downgrade, and every index's condition in the database is the model's (autogenerate compares
an index's columns, not its WHERE: a partial index in the models and a whole one in the
database, or the reverse, passes `test_models_and_migrations_agree`)."""

from __future__ import annotations

import re
import uuid

import psycopg
import pytest
from sqlalchemy import Connection, text

from tests.conftest import POSTGRES_URL
from tests.helpers import SECRET_KEY
from webapp.extensions import db

# index -> the column its rows have, on each database (None: the whole table)
PARTIAL = {
    "postgresql": {"ix_subscribers_suppression": "suppression",
                   "ix_subscriptions_unsubscribed_at": "unsubscribed_at",
                   "ix_events_broadcast_id": "broadcast_id"},
    # SQLite keeps the whole suppression index: its planner reads `suppression IS NULL` over
    # an id range (the snapshot's chunks) from it alone.
    "sqlite": {"ix_subscribers_suppression": None,
               "ix_subscriptions_unsubscribed_at": "unsubscribed_at",
               "ix_events_broadcast_id": "broadcast_id"},
}


def _normal(condition: str | None) -> str | None:
    return None if condition is None else re.sub(r"[()\s\"]", "", condition).lower()


def conditions(connection: Connection) -> dict[str, str | None]:
    """Every index's WHERE as the database has it, by index name (None: a whole index)."""
    if connection.dialect.name == "postgresql":
        rows = connection.execute(text(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'")).all()
    else:
        rows = connection.execute(text(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")).all()
    found = {}
    for name, definition in rows:
        where = re.search(r"\bWHERE\b(.*)$", definition, re.IGNORECASE | re.DOTALL)
        found[name] = _normal(where.group(1)) if where else None
    return found


def test_every_index_has_the_models_condition(app, backend):
    with db.engine.connect() as connection:
        found = conditions(connection)
    expected = {}
    for table in db.metadata.tables.values():
        for index in table.indexes:
            where = index.dialect_options[backend]._non_defaults.get("where")
            expected[index.name] = _normal(None if where is None else str(where))
    assert {name: found[name] for name in expected} == expected
    for name, column in PARTIAL[backend].items():
        assert expected[name] == (None if column is None else f"{column}isnotnull")


@pytest.fixture
def fresh_url(backend, tmp_path):
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    name = f"broadside_partial_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def unmigrated_app(fresh_url, tmp_path, namespace):
    """An app on the fresh database, which the test migrates step by step."""
    from webapp import create_app

    app = create_app({"INSTANCE_PATH": str(tmp_path / "instance"), "SECRET_KEY": SECRET_KEY,
                      "DATABASE_URL": fresh_url, "BROADSIDE_NAMESPACE": namespace}, environ={})
    yield app
    with app.app_context():
        db.engine.dispose()


ROWS = [
    "INSERT INTO mailing_lists (name, description, signup_enabled, created_at) "
    "VALUES ('Weekly', '', false, '2026-01-01')",
    "INSERT INTO subscribers (email, name, attributes, created_at, soft_bounce_count, suppression) "
    "VALUES ('a@example.com', '', '{}', '2026-01-01', 0, NULL), "
    "('b@example.com', '', '{}', '2026-01-01', 0, 'bounced')",
    "INSERT INTO subscriptions (subscriber_id, list_id, status, created_at, unsubscribed_at) "
    "VALUES (1, 1, 'active', '2026-01-01', NULL), "
    "(2, 1, 'unsubscribed', '2026-01-01', '2026-01-05 10:00:00')",
    "INSERT INTO broadcasts (list_id, status, subject, preheader, body, created_at, "
    "updated_at, auto_resumes, settled_at_resume, total, pending_count, sending_count, "
    "sent_count, skipped_count, failed_count, unknown_count, send_rate) VALUES (1, 'sent', "
    "'Hi', '', '', '2026-01-01', '2026-01-01', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)",
    "INSERT INTO events (kind, broadcast_id, subscriber_id, list_id, detail, created_at) "
    "VALUES ('subscribed', NULL, 1, 1, '', '2026-01-01'), ('finished', 1, NULL, NULL, '', "
    "'2026-01-02'), ('unsubscribed', NULL, 2, 1, '', '2026-01-05 10:00:00')",
]
# What each partial index is for, asked as the code asks it (ranges, equalities, IS NOT NULL).
QUERIES = {
    "ix_subscribers_suppression": "SELECT suppression, count(*) FROM subscribers "
                                  "WHERE suppression IS NOT NULL GROUP BY suppression",
    "ix_subscriptions_unsubscribed_at": "SELECT count(*) FROM subscriptions WHERE unsubscribed_at "
                                        ">= '2026-01-05' AND unsubscribed_at < '2026-01-06'",
    "ix_events_broadcast_id": "SELECT id FROM events WHERE broadcast_id = 1 AND id > 0 ORDER BY id",
}


def _plan(connection: Connection, query: str) -> str:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SET enable_seqscan = off"))  # three rows: ask whether it can
        plan = "\n".join(row[0] for row in connection.execute(text("EXPLAIN " + query)))
        connection.execute(text("RESET enable_seqscan"))
        return plan
    return "\n".join(row[3] for row in connection.execute(text("EXPLAIN QUERY PLAN " + query)))


def _snapshot(connection: Connection) -> list:
    return [connection.execute(text(f"SELECT * FROM {table} ORDER BY id")).all()
            for table in ("subscribers", "subscriptions", "events")]


def test_0017_keeps_every_row_and_the_queries_keep_their_indexes(unmigrated_app, backend):
    from flask_migrate import downgrade, upgrade

    with unmigrated_app.app_context():
        upgrade(revision="0016")
        with db.engine.begin() as connection:
            for statement in ROWS:
                connection.execute(text(statement))
            before = _snapshot(connection)
            assert all(conditions(connection)[name] is None for name in PARTIAL[backend])
        upgrade(revision="0017")
        with db.engine.begin() as connection:
            assert _snapshot(connection) == before
            found = conditions(connection)
            for name, column in PARTIAL[backend].items():
                assert found[name] == (None if column is None else f"{column}isnotnull"), name
                assert name in _plan(connection, QUERIES[name]), name
            assert connection.execute(text(QUERIES["ix_subscriptions_unsubscribed_at"])).scalar() == 1
            # The cascade finds the broadcast's events through the partial index too.
            if backend == "sqlite":
                assert "ix_events_broadcast_id" in _plan(
                    connection, "DELETE FROM events WHERE broadcast_id = 1")
            connection.execute(text("DELETE FROM broadcasts WHERE id = 1"))
            assert connection.execute(text("SELECT count(*) FROM events")).scalar() == 2
        downgrade(revision="0016")
        with db.engine.begin() as connection:
            assert all(conditions(connection)[name] is None for name in PARTIAL[backend])
            assert [len(rows) for rows in _snapshot(connection)] == [2, 2, 2]
        upgrade()
        with db.engine.begin() as connection:
            assert {name: conditions(connection)[name] for name in PARTIAL[backend]} == {
                name: None if column is None else f"{column}isnotnull"
                for name, column in PARTIAL[backend].items()}
