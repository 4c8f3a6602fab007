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


def test_sqlite_rebuild_keeps_every_row_and_stops_reusing_ids(tmp_path, namespace):
    """0002 rebuilds subscribers, lists and broadcasts as AUTOINCREMENT: their rows, ids and
    every row that points at them survive, and a deleted newest id is never handed out again."""
    from flask_migrate import downgrade, upgrade

    from tests.helpers import SECRET_KEY
    from webapp import create_app

    database = tmp_path / "old.db"
    app = create_app({"INSTANCE_PATH": str(tmp_path / "instance"), "SECRET_KEY": SECRET_KEY,
                      "DATABASE_URL": f"sqlite:///{database}", "BROADSIDE_NAMESPACE": namespace},
                     environ={})
    with app.app_context():
        upgrade(revision="0001")
        with db.engine.begin() as connection:
            connection.execute(text("INSERT INTO mailing_lists (id, name, description, signup_enabled, "
                                    "created_at) VALUES (1, 'Weekly', '', 0, '2026-01-01')"))
            for sid in (1, 2, 3):
                connection.execute(text(
                    "INSERT INTO subscribers (id, email, name, attributes, created_at, soft_bounce_count) "
                    f"VALUES ({sid}, 'p{sid}@example.com', '', '{{}}', '2026-01-01', 0)"))
                connection.execute(text(
                    "INSERT INTO subscriptions (subscriber_id, list_id, status, created_at) "
                    f"VALUES ({sid}, 1, 'active', '2026-01-01')"))
                connection.execute(text("INSERT INTO events (kind, subscriber_id, list_id, detail, "
                                        f"created_at) VALUES ('subscribed', {sid}, 1, '', '2026-01-01')"))
        upgrade()
        with db.engine.begin() as connection:
            count = lambda table: connection.execute(text(f"SELECT count(*) FROM {table}")).scalar()  # noqa: E731
            assert (count("subscribers"), count("subscriptions"), count("events")) == (3, 3, 3)
            assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
            connection.execute(text("DELETE FROM subscribers WHERE id = 3"))
            connection.execute(text("INSERT INTO subscribers (email, name, attributes, created_at, "
                                    "soft_bounce_count) VALUES ('new@example.com', '', '{}', "
                                    "'2026-02-01', 0)"))
            new_id = connection.execute(text(
                "SELECT id FROM subscribers WHERE email = 'new@example.com'")).scalar()
            assert new_id == 4  # not 3: the erased person's id stays theirs
        downgrade(revision="0001")
        upgrade()
        db.engine.dispose()
