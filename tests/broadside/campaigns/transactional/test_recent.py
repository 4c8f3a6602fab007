"""The newest sends from templates are read on an index, not by walking every message back:
a template sent rarely among many other transactional messages (sign-up confirmations) is
found through the index on `template_revision_id` (PostgreSQL, whose planner chooses)."""

from __future__ import annotations

import pytest
from sqlalchemy import event, text

from broadside.campaigns.transactional.recent import recent_sends
from broadside.campaigns.transactional.templates import create_template, parse_template
from webapp.extensions import db

FROM = "Broadside <news@example.com>"


@pytest.fixture(params=["postgresql"])
def backend(request):
    return request.param


def _plans(app, call) -> list[str]:
    """EXPLAIN of each statement `call` runs on transactional_messages."""
    seen: list[tuple[str, object]] = []

    def keep(conn, cursor, statement, parameters, context, executemany):
        if "FROM transactional_messages" in statement:
            seen.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", keep)
    try:
        call()
    finally:
        event.remove(db.engine, "before_cursor_execute", keep)
    assert seen
    with db.engine.connect() as connection:
        return ["\n".join(row[0] for row in connection.exec_driver_sql("EXPLAIN " + statement,
                                                                       parameters))
                for statement, parameters in seen]


def test_a_template_sent_rarely_among_many_messages_is_found_through_the_index(app):
    rare = create_template(db.session, parse_template(db.session, {
        "name": "Rare", "subject": "s", "body": "b"}), default_from=FROM)
    unsent = create_template(db.session, parse_template(db.session, {
        "name": "Unsent", "subject": "s", "body": "b"}), default_from=FROM)
    revision = db.session.execute(text(
        "SELECT id FROM transactional_template_revisions WHERE template_id = :t"),
        {"t": rare.id}).scalar_one()
    db.session.execute(text(
        "INSERT INTO transactional_messages (kind, to_email, subject, html, text, status, "
        "attempts, created_at, template_revision_id) SELECT CASE WHEN g <= 5 THEN 'template' "
        "ELSE 'confirmation' END, 'p' || g || '@example.com', 's', '', '', 'sent', 1, now(), "
        "CASE WHEN g <= 5 THEN :r END FROM generate_series(1, 50000) g"), {"r": revision})
    db.session.commit()
    with db.engine.connect() as connection:
        connection.exec_driver_sql("ANALYZE transactional_messages")
        connection.commit()
    assert [s.to_email for s in recent_sends(db.session, template_id=rare.id)] == [
        f"p{g}@example.com" for g in range(5, 0, -1)]
    assert recent_sends(db.session, template_id=unsent.id) == []
    for call in (lambda: recent_sends(db.session, template_id=rare.id),
                 lambda: recent_sends(db.session)):
        for plan in _plans(app, call):
            assert "ix_transactional_messages_template_revision_id" in plan, plan
