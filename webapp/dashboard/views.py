"""The dashboard home: recent broadcasts, lists, and whether sending can happen at all."""

from __future__ import annotations

from flask import Blueprint, render_template

from broadside.campaigns.automations import messages as automations
from broadside.campaigns.broadcasts.queries import recent_broadcasts
from broadside.core import roles
from broadside.webhooks import endpoints as webhook_endpoints
from webapp.dashboard.home import home_overview
from webapp.extensions import db
from webapp.htmx import STOP_POLLING, make_response, request
from webapp.permissions import defaults
from webapp.readiness import sending_readiness
from webapp.templating import owner_zone

bp = Blueprint("dashboard", __name__)
defaults(bp, read=roles.VIEW, change=roles.MANAGE)
ACTIVE = ("queued", "sending")


@bp.route("/")
def home():
    return render_template("dashboard/home.html", home=home_overview(db.session, owner_zone()),
                           status=sending_readiness(),
                           due_soon=automations.due_soon(db.session, hours=24),
                           disabled_webhooks=webhook_endpoints.disabled_notices(db.session))


@bp.route("/dashboard/recent")
def recent():
    """HTMX: the recent broadcasts card, polled while one of them is sending."""
    rows = recent_broadcasts(db.session)
    active = any(row.broadcast.status in ACTIVE for row in rows)
    # Nothing is moving: tell htmx to stop asking.
    status = STOP_POLLING if request.htmx and not active else 200
    return make_response(render_template("dashboard/_recent.html", recent=rows,
                                         any_active=active), status)
