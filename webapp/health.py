"""The probes of load balancers and supervisors, in English, without signing in or a session.

- `GET /healthz`, liveness: the process serves requests. It asks nothing else, so a database
  or Redis outage never makes a supervisor restart every web process (which would not help).
  Always 200 while serving.
- `GET /readyz`, readiness: the database and Redis answer and the database's schema is the
  code's (its Alembic revision is the newest migration's), so a load balancer sends traffic
  only to a process that can serve it: not before `db upgrade` has run, not to an old
  process beside a newer schema. 200 when all three are "ok", otherwise 503 with the words
  of each one that is not.

Cheap, for a probe every second or two: the database check is one statement on a pooled
connection (never the request's ORM session), Redis one PING, and the schema's revision is
read again only every `SCHEMA_RECHECK_S` seconds (the newest migration is read once per
process: webapp/doctor/services.py).
"""

from __future__ import annotations

import time

from alembic.migration import MigrationContext
from flask import Blueprint, Flask, current_app, jsonify
from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from webapp.doctor.services import schema_head
from webapp.extensions import db, get_redis
from webapp.security import public

bp = Blueprint("health", __name__)

OK = "ok"
SCHEMA_RECHECK_S = 5.0
_SCHEMA_KEY = "broadside_ready_schema"  # app.extensions: (checked at, database revision)


@bp.route("/healthz")
@public("a supervisor's liveness probe: the process answers; nothing else is asked or said")
def healthz():
    return jsonify(status=OK)


@bp.route("/readyz")
@public("a load balancer's readiness probe: which dependency is not ready, never any data")
def readyz():
    status = {"database": OK, "redis": OK, "migrations": OK}
    try:
        status["migrations"] = _schema_words(current_app._get_current_object())
    except SQLAlchemyError:
        status["database"] = "not answering"
        status["migrations"] = "unknown while the database is not answering"
    try:
        get_redis().ping()
    except RedisError:
        status["redis"] = "not answering"
    ready = all(value == OK for value in status.values())
    return jsonify(status), 200 if ready else 503


def _schema_words(app: Flask) -> str:
    """"ok", or what is wrong with the database's schema; asks the database every time (a
    revision read again only every few seconds, otherwise SELECT 1). Raises SQLAlchemyError
    when the database does not answer."""
    with db.engine.connect() as connection:
        checked = app.extensions.get(_SCHEMA_KEY)
        now = time.monotonic()
        if checked is not None and now - checked[0] < SCHEMA_RECHECK_S:
            connection.execute(text("SELECT 1"))
            current = checked[1]
        else:
            current = MigrationContext.configure(connection).get_current_revision()
            app.extensions[_SCHEMA_KEY] = (now, current)
    head = schema_head(app)
    if current == head:
        return OK
    if current is None:
        return f"no migrations applied; the code needs {head}"
    return f"database at {current}, the code needs {head}"
