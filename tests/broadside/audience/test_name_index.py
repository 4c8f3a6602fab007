"""0018 drops the index on subscribers.name, on SQLite and PostgreSQL: before it, no query the
code builds over names read it (the subscriber search, a segment's name conditions), so the
drop loses no plan; the rows survive the upgrade and the downgrade, and the same searches
find the same people after it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, select, text
from sqlalchemy.orm import Session

from broadside.audience.subscribers.search import Filters, filter_clauses
from broadside.core.models import Subscriber
from broadside.segments import rules
from tests.webapp.test_partial_indexes import _plan, fresh_url, unmigrated_app  # noqa: F401  (fixtures)
from webapp.extensions import db

NAMES = ["Alice Martin", "alicia keys", "Bob Alison", "Carol", "", "ALI", "Dmitri", "Zoë Ali"]


def _people(connection: Connection) -> None:
    connection.execute(text(
        "INSERT INTO subscribers (email, name, attributes, created_at, soft_bounce_count) "
        "VALUES (:email, :name, '{}', '2026-01-01', 0)"),
        [{"email": f"p{i}@example.com", "name": name} for i, name in enumerate(NAMES)])


def _statements(session: Session) -> dict[str, object]:
    """The name queries as the code builds them: the subscriber table's search (contains,
    prefix) and each of a segment's text operators on the name."""
    ctx = rules.Context(dialect=session.get_bind().dialect.name, now=datetime(2026, 6, 1))
    found: dict[str, object] = {}
    for match in ("contains", "prefix"):
        found[f"search {match}"] = select(Subscriber.id).where(
            *filter_clauses(session, Filters(q="Ali", match=match))).order_by(Subscriber.id)
    for op in ("equals", "contains", "ends_with"):
        group = rules.parse({"all": [{"field": "name", "op": op, "value": "ali"}]})
        found[f"segment {op}"] = select(Subscriber.id).where(
            rules.compile_rules(group, ctx)).order_by(Subscriber.id)
    return found


def _sql(session: Session, statement) -> str:
    return str(statement.compile(dialect=session.get_bind().dialect,
                                 compile_kwargs={"literal_binds": True}))


def _answers(session: Session) -> dict[str, list[int]]:
    return {name: list(session.scalars(statement))
            for name, statement in _statements(session).items()}


def _has_name_index(connection: Connection) -> bool:
    if connection.dialect.name == "postgresql":
        query = "SELECT count(*) FROM pg_indexes WHERE indexname = 'ix_subscribers_name'"
    else:
        query = "SELECT count(*) FROM sqlite_master WHERE name = 'ix_subscribers_name'"
    return bool(connection.execute(text(query)).scalar())


def test_0018_drops_an_index_no_name_query_read(unmigrated_app, backend):  # noqa: F811
    from flask_migrate import downgrade, upgrade

    with unmigrated_app.app_context():
        upgrade(revision="0017")
        with db.engine.begin() as connection:
            _people(connection)
            assert _has_name_index(connection)
        session = db.session
        before = _answers(session)
        # Each asks for something: the searches find Alice, alicia, Alison, ALI and Zoë Ali.
        assert before["search contains"] == [1, 2, 3, 6, 8]
        assert before["search prefix"] == [1, 2, 6]
        assert before["segment equals"] == [6]
        # With the index there (and PostgreSQL told to avoid reading the table), no plan
        # of these uses it: it is a plain index on the name, and every one of them asks for
        # lower(name), ILIKE or a case-insensitive LIKE.
        connection = session.connection()
        for name, statement in _statements(session).items():
            assert "ix_subscribers_name" not in _plan(connection, _sql(session, statement)), name
        session.remove()

        upgrade(revision="0018")
        with db.engine.begin() as connection:
            assert not _has_name_index(connection)
            assert connection.execute(text(
                "SELECT name FROM subscribers ORDER BY id")).scalars().all() == NAMES
        assert _answers(db.session) == before
        db.session.remove()

        downgrade(revision="0017")
        with db.engine.begin() as connection:
            assert _has_name_index(connection)
            assert connection.execute(text("SELECT count(*) FROM subscribers")).scalar() == len(NAMES)
        upgrade()
        with db.engine.begin() as connection:
            assert not _has_name_index(connection)
