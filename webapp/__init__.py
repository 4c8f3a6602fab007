"""Broadside's web app: `create_app()` builds it from the environment (see broadside.core.config)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dotenv import dotenv_values
from flask import Blueprint, Flask
from flask.logging import default_handler
from redis import Redis

from broadside.core import models  # noqa: F401 - registers the tables with the metadata
from broadside.core.config import load_config
from broadside.core.i18n import _l
from broadside.core.logs import configure_logging
from broadside.delivery.queues import Jobs
from webapp.analytics import resend as analytics_resend  # noqa: F401 - its routes attach to the blueprint
from webapp.analytics.views import bp as analytics_bp
from webapp.api import attachments as api_attachments  # noqa: F401 - its routes attach to the API blueprint
from webapp.api import (  # noqa: F401 - their routes attach to the API blueprint
    audience,
    audit,
    automations,
    broadcast_drafts,
    broadcasts,
    codes,
    identities,
    non_openers,
    segments,
    subscribers,
)
from webapp.api import bp as api_bp
from webapp.api import media as api_media  # noqa: F401 - its routes attach to the API blueprint
from webapp.api import message_templates as api_message_templates  # noqa: F401 - routes attach to the API blueprint
from webapp.api import transactional as api_transactional  # noqa: F401 - routes attach to the API blueprint
from webapp.api import users as api_users  # noqa: F401 - its routes attach to the API blueprint
from webapp.api import webhooks as api_webhooks  # noqa: F401 - its routes attach to the API blueprint
from webapp.apidocs import bp as apidocs_bp
from webapp.apidocs import views as apidocs_views  # noqa: F401 - its routes attach to the blueprint
from webapp.archive.views import bp as archive_bp
from webapp.attachments import bp as attachments_bp
from webapp.attachments import views as attachments_views  # noqa: F401 - its routes attach to the blueprint
from webapp.audit.views import bp as audit_bp
from webapp.auth import second_step  # noqa: F401 - the sign-in's second step adds its routes
from webapp.auth.views import bp as auth_bp
from webapp.automations import bp as automations_bp
from webapp.automations import views as automations_views  # noqa: F401 - its routes attach to the blueprint
from webapp.broadcasts import bp as broadcasts_bp
from webapp.broadcasts import local_time_views, preview_views, sending_views, views  # noqa: F401 - they add their routes to the blueprint
from webapp.cli import register_cli
from webapp.compose.views import bp as compose_bp
from webapp.dashboard.views import bp as dashboard_bp
from webapp.deliverability.views import bp as deliverability_bp
from webapp.errors import register_error_handlers
from webapp.extensions import csrf, db, login_manager, migrate
from webapp.favicon import bp as favicon_bp
from webapp.feedback.views import bp as feedback_bp
from webapp.health import bp as health_bp
from webapp.hosts import install_host_check
from webapp.htmx import htmx
from webapp.i18n import install_i18n
from webapp.identities import bp as identities_bp
from webapp.identities import dns_views  # noqa: F401 - its routes attach to the blueprint
from webapp.identities import views as identities_views  # noqa: F401 - and the list's, edit's
from webapp.library import block_views as library_block_views  # noqa: F401 - its routes attach to the blueprint
from webapp.library import bp as library_bp
from webapp.library import views as library_views  # noqa: F401 - and the templates page's
from webapp.lists.views import bp as lists_bp
from webapp.media import bp as media_bp
from webapp.media import files as media_files  # noqa: F401 - its routes attach to the blueprint
from webapp.media import views as media_views  # noqa: F401 - and the library's pages
from webapp.metrics.views import bp as metrics_bp
from webapp.params import DatabaseIdConverter
from webapp.people import bp as people_bp
from webapp.people import invitation as people_invitation  # noqa: F401 - its route attaches to the blueprint
from webapp.people import views as people_views  # noqa: F401 - and the People page's
from webapp.proxies import install_proxy_headers
from webapp.security import install_security
from webapp.security_pages import bp as security_bp
from webapp.security_pages import policy as security_policy  # noqa: F401 - its route attaches
from webapp.security_pages import views as security_views  # noqa: F401 - and the page's
from webapp.segments import bp as segments_bp
from webapp.segments import views as segments_views  # noqa: F401 - its routes attach to the blueprint
from webapp.settings import design  # noqa: F401 - Settings -> Design adds its routes to the blueprint
from webapp.settings import webhooks as settings_webhooks  # noqa: F401 - and Settings -> Webhooks
from webapp.settings.brand import bp as brand_bp
from webapp.settings.views import bp as settings_bp
from webapp.signup.views import bp as signup_bp
from webapp.subscribers import bp as subscribers_bp
from webapp.subscribers import (  # noqa: F401 - their routes attach to the blueprint
    bulk_views,
    transfer_views,
)
from webapp.subscribers import views as subscribers_views  # noqa: F401 - and the table's
from webapp.system.views import bp as system_bp
from webapp.templating import register_templating
from webapp.text_input import install_text_rule
from webapp.transactional import bp as transactional_bp
from webapp.transactional import views as transactional_views  # noqa: F401 - its routes attach to the blueprint
from webapp.unsubscribe import personal_data  # noqa: F401 - its routes attach to the blueprint
from webapp.unsubscribe import views as unsubscribe_views  # noqa: F401 - and the links' pages
from webapp.unsubscribe.claims import bp as unsubscribe_bp
from webapp.unsubscribe.owner import bp as suppression_bp

REPO_ROOT = Path(__file__).resolve().parent.parent
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
    install_host_check(app)  # inside the proxies' rewrite: it judges the host a proxy vouches for
    # Behind reverse proxies (TRUSTED_PROXIES, TRUSTED_PROXY_COUNT): the client's address, so
    # per-client limits, the audit trail and sessions' networks count clients, not the proxy.
    install_proxy_headers(app)

    # Ids in URLs are database integers: anything beyond their range is simply not found
    # (without this bound, a huge id made SQLite and PostgreSQL raise, answering 500).
    app.url_map.converters["int"] = DatabaseIdConverter

    htmx.init_app(app)  # request.htmx, before anything reads a request
    db.init_app(app)
    migrate.init_app(
        app, db, directory=str(REPO_ROOT / "migrations"), render_as_batch=True, compare_type=True
    )
    csrf.init_app(app)
    login_manager.init_app(app)
    redis = Redis.from_url(app.config["REDIS_URL"], socket_timeout=5, socket_connect_timeout=2)
    app.extensions["broadside_redis"] = redis
    app.extensions["broadside_jobs"] = Jobs(redis, app.config["BROADSIDE_NAMESPACE"])

    configure_logging(app.config)
    app.logger.removeHandler(default_handler)
    install_i18n(app)  # first: every later hook, and any page it answers with, speaks the request's language
    install_security(app)
    install_text_rule(app)  # no NUL or lone surrogate in any form, query or path: a 422
    _register_blueprints(app)
    register_templating(app)

    register_error_handlers(app)
    register_cli(app)
    return app


# Every blueprint, with its entry in the top navigation (endpoint, label) when it has one.
BLUEPRINTS: tuple[tuple[Blueprint, tuple[str, Any] | None], ...] = (  # labels: _l, shown per request
    (auth_bp, None),
    (dashboard_bp, None),
    (health_bp, None),
    (favicon_bp, None),
    (settings_bp, None),
    (security_bp, None),
    (brand_bp, None),
    (identities_bp, None),
    (transactional_bp, None),
    (attachments_bp, None),
    (people_bp, None),
    (api_bp, None),
    (unsubscribe_bp, None),
    (suppression_bp, None),
    (feedback_bp, None),
    (analytics_bp, None),
    (lists_bp, ("lists.index", _l("Lists"))),
    (subscribers_bp, ("subscribers.index", _l("Subscribers"))),
    (segments_bp, ("segments.index", _l("Segments"))),
    (automations_bp, ("automations.index", _l("Automations"))),
    (signup_bp, None),
    (broadcasts_bp, ("broadcasts.index", _l("Broadcasts"))),
    (library_bp, None),
    (media_bp, ("media.index", _l("Media"))),
    (compose_bp, None),
    (deliverability_bp, ("deliverability.index", _l("Deliverability"))),
    (system_bp, ("system.index", _l("System"))),
    (metrics_bp, None),
    (apidocs_bp, None),
    (archive_bp, None),
    (audit_bp, None),  # last: its hooks run after the security check and the API's token
)


def _register_blueprints(app: Flask) -> None:
    nav = [entry for blueprint, entry in BLUEPRINTS if entry]
    for blueprint, _entry in BLUEPRINTS:
        app.register_blueprint(blueprint)

    @app.context_processor
    def navigation() -> dict[str, Any]:
        return {"nav_links": nav, "url_map_endpoints": set(app.view_functions)}
