"""The lean worker (`python -m jobs`): no web stack in the process, the schema check without
Alembic, the same configuration as the web app, and both commands sending for real."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

from jobs.app import create_worker_app, migration_heads, schema_state
from tests.helpers import FLASK_WORKER, LEAN_WORKER, WorkerProcess, make_list, start_broadcast, statuses
from webapp import REPO_ROOT
from webapp.extensions import db

WEB_ONLY = {"webapp", "alembic", "flask_migrate", "flask_wtf", "wtforms", "flask_login", "botocore",
            "markdown_it", "inscriptis", "css_inline", "nh3", "mako",
            "flask", "flask_sqlalchemy", "werkzeug", "click", "blinker"}


def test_the_worker_imports_no_web_stack():
    probe = ("import sys, jobs.worker, jobs.tasks, jobs.__main__; "
             "print(','.join(sorted({m.split('.')[0] for m in sys.modules})))")
    loaded = set(subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True,
                                text=True, check=True).stdout.strip().split(","))
    assert "jobs" in loaded and "rq" in loaded
    assert not loaded & WEB_ONLY, f"the worker loaded {sorted(loaded & WEB_ONLY)}"


def test_migration_heads_match_alembic_and_the_schema_check_reads_them(app, tmp_path):
    script = ScriptDirectory(str(REPO_ROOT / "migrations"))
    assert migration_heads() == set(script.get_heads())
    with app.app_context(), db.engine.connect() as connection:
        assert schema_state(connection)[0]  # the test database is migrated
    empty = create_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    with empty.connect() as connection:
        ready, current, head = schema_state(connection)
    empty.dispose()
    assert not ready and current == "no schema" and head == script.get_current_head()


def test_a_merge_revision_has_one_head(tmp_path: Path):
    for name, body in {"a": "revision = 'a'\ndown_revision = None\n",
                       "b": "revision: str = 'b'\ndown_revision = 'a'\n",
                       "c": "revision = 'c'\ndown_revision = 'a'\n",
                       "m": "revision = 'm'\ndown_revision = ('b', 'c')\n"}.items():
        (tmp_path / f"{name}.py").write_text(body)
    assert migration_heads(tmp_path) == {"m"}


def test_the_worker_app_reads_the_configuration_as_the_web_app_does(app, app_config):
    worker_app = create_worker_app(app_config, environ={})
    for name in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "BROADSIDE_NAMESPACE", "SMTP_URL",
                 "SEND_DELAY_MS", "MAIL_FROM", "BASE_URL", "LOG_FORMAT"):
        assert worker_app.config[name] == app.config[name], name
    assert worker_app.instance_path == app.instance_path
    assert worker_app.engine.url == db.engine.url  # the same database, opened the same way
    assert worker_app.engine.pool.__class__ is db.engine.pool.__class__
    worker_app.redis.close()
    worker_app.engine.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("command", [LEAN_WORKER, FLASK_WORKER], ids=["python -m jobs", "flask worker"])
def test_both_commands_send_a_broadcast(app, app_config, smtp_server, command):
    app_config.setdefault("SMTP_URL", smtp_server.url)
    weekly = make_list(db.session, 12)
    broadcast = start_broadcast(app, weekly)
    db.session.commit()
    worker = WorkerProcess(app_config, args=("--burst",), command=command).start()
    try:
        assert worker.proc is not None and worker.proc.wait(120) == 0, worker.output[-2000:]
    finally:
        worker.stop()
    assert statuses(broadcast.id) == {"sent": 12}
    assert sorted(smtp_server.recipients()) == [f"reader{i:05d}@example.com" for i in range(12)]


def test_the_worker_opens_sqlite_where_flask_sqlalchemy_does(tmp_path: Path):
    """A relative SQLite path is under the instance folder and an in-memory database is one
    shared connection, in the worker's engine as in the web app's (Flask-SQLAlchemy)."""
    from flask import Flask
    from flask_sqlalchemy import SQLAlchemy
    from sqlalchemy import pool

    from broadside.core.db import engine_options

    for uri in ("sqlite:///relative.db", "sqlite://", "sqlite:///file:rel.db?uri=true",
                f"sqlite:///{tmp_path / 'absolute.db'}"):
        flask_app = Flask("probe", instance_path=str(tmp_path / "instance"))
        flask_app.config["SQLALCHEMY_DATABASE_URI"] = uri
        flask_db = SQLAlchemy()
        flask_db.init_app(flask_app)
        with flask_app.app_context():
            theirs = flask_db.engine
        ours = engine_options({"SQLALCHEMY_DATABASE_URI": uri}, str(tmp_path / "instance"))
        assert ours["url"] == theirs.url, uri
        assert (ours.get("poolclass") is pool.StaticPool) == isinstance(theirs.pool, pool.StaticPool), uri
        theirs.dispose()
