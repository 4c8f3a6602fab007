from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from webapp.extensions import db


def test_models_and_migrations_agree(app):
    """Autogenerate against the migrated database finds nothing to add."""
    with db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        diff = compare_metadata(context, db.metadata)
    assert diff == []


def test_migrations_create_every_table(app):
    tables = set(inspect(db.engine).get_table_names())
    assert set(db.metadata.tables) <= tables
    assert "alembic_version" in tables


def test_sqlite_runs_in_wal_mode_with_busy_timeout(app, backend):
    if backend != "sqlite":
        return  # PostgreSQL has no such pragmas; its concurrency is native
    with db.engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA busy_timeout")).scalar() >= 5000
        assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
