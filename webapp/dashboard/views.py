"""The dashboard home: recent broadcasts, lists, and whether sending can happen at all."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from flask import Blueprint, g, make_response, render_template, request

from broadside.site_settings import get_settings
from webapp.dashboard.home import home_overview, recent_broadcasts
from webapp.dashboard.status import sending_status
from webapp.extensions import db

bp = Blueprint("dashboard", __name__)
ACTIVE = ("queued", "sending")


@bp.route("/")
def home():
    return render_template("dashboard/home.html", home=home_overview(db.session),
                           status=sending_status())


@bp.route("/dashboard/recent")
def recent():
    """HTMX: the recent broadcasts card, polled while one of them is sending."""
    rows = recent_broadcasts(db.session)
    active = any(b.status in ACTIVE for b, _ in rows)
    response = make_response(render_template("dashboard/_recent.html", recent=rows,
                                             any_active=active))
    if request.headers.get("HX-Request") == "true" and not active:
        response.status_code = 286  # htmx: nothing is moving; stop asking
    return response


@bp.context_processor
def _helpers() -> dict:
    def local_time(moment: datetime | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
        """A stored (naive UTC) time in the owner's time zone, from Settings."""
        if moment is None:
            return ""
        if "owner_tz" not in g:
            g.owner_tz = get_settings(db.session).time_zone or "UTC"
        return moment.replace(tzinfo=UTC).astimezone(ZoneInfo(g.owner_tz)).strftime(fmt)

    return {"local_time": local_time, "num": lambda value: f"{value or 0:,}"}
