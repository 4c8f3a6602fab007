"""Reader analytics: the two public routes a tracked email calls, and the owner's switches.

Public (no login, no cookie set, GET only, nothing changed but a counter):
- `GET /t/o/<token>.gif`: the 1x1 image of a tracked email. Counts one open (or one
  suspected-bot open) and answers a transparent GIF that no cache keeps. A token that is not
  ours answers 404. One client loading the same image again within ten minutes is not counted
  again (broadside.campaigns.analytics.repeats; with Redis down the image is answered all the
  same and the hit counted).
- `GET /t/c/<token>`: a tracked link. The token is signed over the broadcast, the link's
  position and the exact address (broadside.campaigns.analytics.tokens), so it is never an open
  redirect: a changed token, or one naming a link the broadcast does not have, answers 404;
  a good one counts the click (when tracking is on) and answers 302 to exactly that address.
  With tracking turned off since, the reader still gets where the link pointed. The same link
  followed again by the same client within ten minutes is not counted again.
Neither reads a cookie or writes the reader's address or user agent anywhere
(broadside.campaigns.analytics.bots and .repeats read them and drop them; the access log keeps
of these paths only the method, "/t/o/[redacted]" or "/t/c/[redacted]", the status, the size and
the time: webapp/logs.py).

Owner (signed in, CSRF): the send page's choice for a draft, "stop tracking" on a sent
broadcast, Settings' default, and a list's own tracking (off, counts only or per person).
Their cards are partials under templates/analytics/, included by the pages they sit on; the
data they show comes from the template functions registered below.
"""

from __future__ import annotations

import base64
import time
from typing import Any

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    flash,
    g,
    redirect,
    url_for,
)

from broadside.campaigns.analytics import modes
from broadside.campaigns.analytics.bots import Bursts, suspected
from broadside.campaigns.analytics.counting import known_link, move_click_to_bots, record_click, record_open
from broadside.campaigns.analytics.repeats import Repeats
from broadside.campaigns.analytics.report import broadcast_report
from broadside.campaigns.analytics.rewrite import draft_links_with_fields
from broadside.campaigns.analytics.tokens import BadToken, TrackingTokens
from broadside.campaigns.broadcasts import service as broadcasts
from broadside.core import roles
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _
from webapp.analytics.chart import chart
from webapp.broadcasts.sending_views import _render_confirm
from webapp.extensions import db
from webapp.htmx import request
from webapp.lists.views import _render_show
from webapp.permissions import allow, defaults
from webapp.security import public
from webapp.settings.views import _render as _render_settings

bp = Blueprint("analytics", __name__)
defaults(bp, read=roles.VIEW, change=roles.MANAGE)

# A transparent 1x1 GIF (43 bytes).
PIXEL = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
NO_STORE = "no-store, no-cache, must-revalidate, private, max-age=0"
PER_PERSON_FORM = {"on": modes.LIST_PEOPLE, "off": modes.LIST_COUNTS}


def _tokens() -> TrackingTokens:
    return TrackingTokens(current_app.config["SECRET_KEY"])


def _client() -> dict[str, Any]:
    return {"user_agent": request.headers.get("User-Agent"), "address": request.remote_addr}


def _repeats() -> Repeats:
    return Repeats(current_app.extensions["broadside_redis"], current_app.config["BROADSIDE_NAMESPACE"],
                   current_app.config["SECRET_KEY"])


@bp.route("/t/o/<token>.gif")
@public("a tracked email's 1x1 image: the signed token names the copy; GET only, a counter, no cookie")
def pixel(token: str):
    try:
        claim = _tokens().read_open(token)
    except BadToken:
        abort(404)
    client = _client()
    if _repeats().first(**client, broadcast_id=claim.broadcast_id, slot=claim.slot,
                        delivery_id=claim.delivery_id):
        why = suspected(**client, slot=claim.slot, now=time.time())
        record_open(db.session, claim, bot=why is not None)
    response = Response(PIXEL, mimetype="image/gif")
    response.headers["Cache-Control"] = NO_STORE
    return response


@bp.route("/t/c/<token>")
@public("a tracked email's link: the signed token holds the exact address (never an open "
        "redirect); a counter")
def click(token: str):
    try:
        claim = _tokens().read_click(token)
    except BadToken:
        abort(404)
    if not claim.url.lower().startswith(("https://", "http://")):
        abort(404)  # we never sign another scheme; refuse one all the same
    client = _client()
    if not _repeats().first(**client, broadcast_id=claim.broadcast_id, slot=claim.slot,
                            delivery_id=claim.delivery_id, position=claim.position):
        if not known_link(db.session, claim):
            abort(404)
        return _redirect(claim.url)  # counted already: a double click is not a prefetch either
    why = suspected(**client, slot=claim.slot, now=time.time())
    burst, first = Bursts(current_app.extensions["broadside_redis"],
                          current_app.config["BROADSIDE_NAMESPACE"],
                          current_app.config["SECRET_KEY"]).click(
        **client, broadcast_id=claim.broadcast_id, slot=claim.slot,
        delivery_id=claim.delivery_id, position=claim.position, human=why is None)
    try:
        record_click(db.session, claim, bot=why is not None or burst)
    except NotFound:
        abort(404)
    if first is not None:
        move_click_to_bots(db.session, claim.broadcast_id, first)
    return _redirect(claim.url)


def _redirect(url: str) -> Response:
    response = redirect(url, 302)
    response.headers["Cache-Control"] = NO_STORE
    return response


# ---------------------------------------------------------------- the owner's switches

@bp.route("/broadcasts/<int:broadcast_id>/tracking", methods=["POST"])
@allow("write")
def choose(broadcast_id: int):
    try:
        broadcast = modes.choose(db.session, broadcast_id, request.form.get("tracking"))
    except ValidationError as exc:
        db.session.rollback()
        if broadcasts.get_broadcast(db.session, broadcast_id).status != "draft":
            # Only a draft has the send page this choice is made on: any other would redirect
            # away (losing the reason), and that redirect failed to build here (a 500).
            abort(422, description=exc.message)
        g.analytics_error = exc.message
        return _render_confirm(broadcast_id, status=422)
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for("broadcasts.show", broadcast_id=broadcast_id))
    flash(_("Tracking for this broadcast: %(mode)s.",
            mode=str(modes.SHORT[broadcast.tracking or modes.OFF])), "success")
    return redirect(url_for("broadcasts.confirm_send", broadcast_id=broadcast_id) + "#tracking")


@bp.route("/broadcasts/<int:broadcast_id>/tracking/stop", methods=["POST"])
@allow("send")
def stop(broadcast_id: int):
    modes.stop(db.session, broadcast_id)
    flash(_("Tracking is off: copies not yet sent go out without it, and nothing more is counted."),
          "success")
    return redirect(url_for("broadcasts.show", broadcast_id=broadcast_id) + "#analytics")


@bp.route("/settings/tracking", methods=["POST"])
@allow("manage")
def set_default():
    try:
        mode = modes.set_default(db.session, request.form.get("tracking"))
    except ValidationError as exc:
        db.session.rollback()
        g.analytics_error = exc.message
        return _render_settings(status=422)
    flash(_("Saved. New broadcasts start with tracking: %(mode)s.", mode=str(modes.SHORT[mode])),
          "success")
    return redirect(url_for("settings.index") + "#tracking")


@bp.route("/lists/<int:list_id>/tracking", methods=["POST"])
@allow("manage")
def set_list(list_id: int):
    # `tracking`: off, counts or people; `per_person` on/off: the form before "off" existed.
    wanted = request.form.get("tracking") or PER_PERSON_FORM.get(request.form.get("per_person", ""))
    try:
        mailing_list = modes.set_list_tracking(db.session, list_id, wanted)
    except ValidationError as exc:
        db.session.rollback()
        g.analytics_error = exc.message
        return _render_show(list_id, status=422)
    chosen = modes.list_tracking(mailing_list)
    flash(_("Per-person tracking is on for this list: its sign-up and preferences pages say so.")
          if chosen == modes.LIST_PEOPLE else
          _("Tracking is off for this list: its readers' copies carry no tracking image and "
            "no rewritten link.") if chosen == modes.LIST_OFF else
          _("Per-person tracking is off for this list: broadcasts to it count in aggregate at most."),
          "success")
    return redirect(url_for("lists.show", list_id=list_id) + "#tracking")


# ---------------------------------------------------------------- what the partials read

@bp.app_context_processor
def analytics_helpers() -> dict[str, Any]:
    def report(broadcast_id: int):
        result = broadcast_report(db.session, broadcast_id)
        return result, (chart(result) if result is not None and result.sent else None)

    return {
        "analytics_report": report,
        "tracking_modes": modes,
        "tracking_default": lambda: modes.default_mode(db.session),
        "tracking_of": lambda broadcast: modes.effective(db.session, broadcast),
        "lists_tracking_people": lambda ids: modes.lists_tracking_people(db.session, list(ids)),
        "tracking_untracked": draft_links_with_fields,
        "analytics_error": lambda: g.get("analytics_error"),
    }
