"""`GET /healthz`: 200 when the database and Redis answer, 503 naming what is down."""

from __future__ import annotations

from flask import Blueprint, jsonify
from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from webapp.extensions import db, get_redis
from webapp.security import public

bp = Blueprint("health", __name__)


@bp.route("/healthz")
@public("the load balancer's health check: up or not, nothing else")
def healthz():
    status = {"db": "ok", "redis": "ok"}
    try:
        db.session.execute(text("SELECT 1"))
    except SQLAlchemyError:
        db.session.rollback()
        status["db"] = "down"
    try:
        get_redis().ping()
    except RedisError:
        status["redis"] = "down"
    healthy = all(value == "ok" for value in status.values())
    return jsonify(status), 200 if healthy else 503
