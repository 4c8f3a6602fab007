"""0013_lean_deliveries on real data, on SQLite and PostgreSQL: rows, events and what the
dropped Message-IDs said survive the upgrade (derived again) and the downgrade (written back).
(That the worker writes the Message-ID broadside.mail.message_refs derives:
tests/jobs/test_message_refs.py.)"""

from __future__ import annotations

import uuid

import psycopg
import pytest
from sqlalchemy import text

from broadside.mail.message_refs import delivery_message_id
from tests.conftest import POSTGRES_URL
from tests.helpers import SECRET_KEY
from webapp.extensions import db


@pytest.fixture
def fresh_url(backend, tmp_path):
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    name = f"broadside_lean_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_0013_keeps_every_row_and_event_and_what_the_message_ids_said(fresh_url, tmp_path,
                                                                       namespace):
    from flask_migrate import downgrade, upgrade

    from webapp import create_app

    app = create_app({"INSTANCE_PATH": str(tmp_path / "instance"), "SECRET_KEY": SECRET_KEY,
                      "DATABASE_URL": fresh_url, "BROADSIDE_NAMESPACE": namespace}, environ={})
    statements = [
        "INSERT INTO mailing_lists (name, description, signup_enabled, created_at) "
        "VALUES ('Weekly', '', false, '2026-01-01')",
        "INSERT INTO subscribers (email, name, attributes, created_at, soft_bounce_count) "
        "VALUES ('a@example.com', '', '{}', '2026-01-01', 0), "
        "('b@example.com', '', '{}', '2026-01-01', 0)",
        "INSERT INTO broadcasts (list_id, status, subject, preheader, body, created_at, "
        "updated_at, auto_resumes, settled_at_resume, total, pending_count, sending_count, "
        "sent_count, skipped_count, failed_count, unknown_count, send_rate) VALUES (1, 'sent', "
        "'Hi', '', '', '2026-01-01', '2026-01-01', 0, 0, 2, 0, 0, 1, 0, 1, 0, 0)",
        "INSERT INTO revisions (broadcast_id, subject, preheader, body_markdown, html_template, "
        "text_template, from_name, from_email, postal_address, created_at) VALUES (1, 'Hi', '', "
        "'', '', '', 'News', 'news@mail.example.org', '', '2026-01-01')",
        "INSERT INTO deliveries (broadcast_id, subscriber_id, status, attempts, message_id, "
        "reason, smtp_code, claimed_at, sent_at) VALUES "
        "(1, 1, 'sent', 1, '<broadside.d1.b1@mail.example.org>', '250 OK', 250, "
        "'2026-01-02 10:00:00', '2026-01-02 10:00:01'), "
        "(1, 2, 'failed', 1, '<broadside.d2.b1@mail.example.org>', '550 no', 550, "
        "'2026-01-02 10:00:00', NULL)",
        "INSERT INTO events (kind, broadcast_id, delivery_id, subscriber_id, detail, created_at) "
        "VALUES ('claimed', 1, 1, 1, '', '2026-01-02 10:00:00'), "
        "('sent', 1, 1, 1, '250 OK', '2026-01-02 10:00:01'), "
        "('claimed', 1, 2, 2, '', '2026-01-02 10:00:00'), "
        "('failed', 1, 2, 2, '550 no', '2026-01-02 10:00:01')",
    ]
    with app.app_context():
        upgrade(revision="0011")
        with db.engine.begin() as connection:
            for statement in statements:
                connection.execute(text(statement))
            before = connection.execute(text(
                "SELECT id, message_id FROM deliveries ORDER BY id")).all()
        upgrade()
        with db.engine.begin() as connection:
            rows = connection.execute(text(
                "SELECT d.id, d.broadcast_id, d.status, d.reason, d.smtp_code, r.from_email "
                "FROM deliveries d JOIN revisions r ON r.broadcast_id = d.broadcast_id "
                "ORDER BY d.id")).all()
            assert [(r.status, r.reason, r.smtp_code) for r in rows] == [
                ("sent", "250 OK", 250), ("failed", "550 no", 550)]
            # What the dropped column said is derived again, exactly.
            assert [(r.id, delivery_message_id(r.id, r.broadcast_id, r.from_email))
                    for r in rows] == [tuple(b) for b in before]
            assert connection.execute(text("SELECT count(*) FROM events")).scalar() == 4
            columns = {c["name"] for c in db.inspect(connection).get_columns("deliveries")}
            assert "message_id" not in columns
            assert connection.execute(text(
                "SELECT history_retention_days FROM site_settings")).all() == []
        downgrade(revision="0011")
        with db.engine.begin() as connection:
            assert connection.execute(text(
                "SELECT id, message_id FROM deliveries ORDER BY id")).all() == before
            assert connection.execute(text("SELECT count(*) FROM events")).scalar() == 4
        upgrade()
        db.engine.dispose()
