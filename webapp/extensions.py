"""Extensions, created unbound here and bound to an app in `create_app`.

Nothing here connects to anything at import time.
"""

from __future__ import annotations

from flask import current_app
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect
from redis import Redis

from broadside.core.db import Base
from broadside.delivery.queues import Jobs

__all__ = ["csrf", "db", "get_jobs", "get_redis", "login_manager", "migrate", "namespaced"]


# The web app's session and engine over the models (bound in `create_app`); the worker opens
# the same database without Flask (jobs.database).
db = SQLAlchemy(model_class=Base)
migrate = Migrate()
login_manager = LoginManager()
csrf = CSRFProtect()


def get_redis() -> Redis:
    """The app's Redis client (the connection pool opens lazily, on first command)."""
    return current_app.extensions["broadside_redis"]


def namespaced(key: str) -> str:
    """A Redis key inside this installation's namespace (tests use a private one)."""
    return f"{current_app.config['BROADSIDE_NAMESPACE']}:{key}"


def get_jobs() -> Jobs:
    """Where this app enqueues the worker's jobs (built in `create_app`)."""
    return current_app.extensions["broadside_jobs"]
