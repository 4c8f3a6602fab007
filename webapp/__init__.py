"""Broadside's web app: `create_app()` builds it from the environment (see webapp.config)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dotenv import dotenv_values
from flask import Flask
from redis import Redis
from werkzeug.routing import IntegerConverter

from webapp.config import load_config
from webapp.extensions import csrf, db, login_manager, migrate

REPO_ROOT = Path(__file__).resolve().parent.parent
MAX_DATABASE_ID = 2**31 - 1


class DatabaseIdConverter(IntegerConverter):
    def __init__(self, map, *args, **kwargs) -> None:  # noqa: A002 - werkzeug's signature
        kwargs.setdefault("max", MAX_DATABASE_ID)
        super().__init__(map, *args, **kwargs)


def create_app(config: Mapping[str, Any] | None = None, *, environ: Mapping[str, str] | None = None) -> Flask:
    """Build the app: defaults, then the environment (and `.env`), then `config`.

    Tests pass `environ={}` so nothing from the developer's shell or `.env` leaks in.
    """
    overrides = dict(config or {})
    instance_path = overrides.pop("INSTANCE_PATH", None) or os.environ.get("BROADSIDE_INSTANCE_PATH")
    app = Flask(
        __name__,
        instance_path=str(instance_path or REPO_ROOT / "instance"),
        template_folder=str(REPO_ROOT / "templates"),
        static_folder=str(REPO_ROOT / "static"),
    )
    if environ is None:
        environ = {**dotenv_values(REPO_ROOT / ".env"), **os.environ}
    app.config.update(load_config(Path(app.instance_path), environ, overrides))
    if app.config["TRUSTED_PROXY_COUNT"]:
        # Behind a reverse proxy: take the client address from X-Forwarded-For, so per-IP
        # limits (login, sign-up, unsubscribe) count clients, not the proxy.
        from werkzeug.middleware.proxy_fix import ProxyFix

        count = app.config["TRUSTED_PROXY_COUNT"]
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=count, x_proto=count, x_host=count)  # type: ignore[method-assign]

    # Ids in URLs are database integers: anything beyond their range is simply not found
    # (without this bound, a huge id made SQLite and PostgreSQL raise, answering 500).
    app.url_map.converters["int"] = DatabaseIdConverter

    db.init_app(app)
    migrate.init_app(
        app, db, directory=str(REPO_ROOT / "migrations"), render_as_batch=True, compare_type=True
    )
    csrf.init_app(app)
    login_manager.init_app(app)
    app.extensions["broadside_redis"] = Redis.from_url(
        app.config["REDIS_URL"], socket_timeout=5, socket_connect_timeout=2
    )

    from webapp import models  # noqa: F401 - registers the tables with the metadata
    from webapp.logs import configure_logging
    from webapp.security import install_security

    configure_logging(app)
    install_security(app)
    _register_blueprints(app)

    from webapp.cli import register_cli
    from webapp.errors import register_error_handlers

    register_error_handlers(app)
    register_cli(app)
    return app


def _register_blueprints(app: Flask) -> None:
    from webapp.api import bp as api_bp
    from webapp.auth.views import bp as auth_bp
    from webapp.dashboard.views import bp as dashboard_bp
    from webapp.health import bp as health_bp
    from webapp.settings.views import bp as settings_bp

    for blueprint in (auth_bp, dashboard_bp, health_bp, settings_bp, api_bp):
        app.register_blueprint(blueprint)
    app.extensions["broadside_nav"] = []
    _register_feature_blueprints(app)

    @app.context_processor
    def navigation() -> dict[str, Any]:
        return {
            "nav_links": app.extensions["broadside_nav"],
            "url_map_endpoints": set(app.view_functions),
        }


def _register_feature_blueprints(app: Flask) -> None:
    """Feature blueprints, each with its entry in the top navigation (endpoint, label)."""
    features: list[tuple[Any, tuple[str, str] | None]] = []
    from webapp.unsubscribe.owner import bp as suppression_bp
    from webapp.unsubscribe.views import bp as unsubscribe_bp
    from webapp.webhooks.views import bp as webhooks_bp

    features.append((unsubscribe_bp, None))
    features.append((suppression_bp, None))
    features.append((webhooks_bp, None))
    from webapp.lists.views import bp as lists_bp
    from webapp.signup.views import bp as signup_bp
    from webapp.subscribers.views import bp as subscribers_bp

    features.append((lists_bp, ("lists.index", "Lists")))
    features.append((subscribers_bp, ("subscribers.index", "Subscribers")))
    features.append((signup_bp, None))
    from webapp.broadcasts.views import bp as broadcasts_bp

    features.append((broadcasts_bp, ("broadcasts.index", "Broadcasts")))
    from webapp.metrics import bp as metrics_bp
    from webapp.system.views import bp as system_bp

    features.append((system_bp, ("system.index", "System")))
    features.append((metrics_bp, None))
    for blueprint, nav in features:
        app.register_blueprint(blueprint)
        if nav:
            app.extensions["broadside_nav"].append(nav)
