"""Send again to those who did not open: the confirmation page a sent broadcast's button
leads to, the press that makes the new draft, and Settings' wait before it is offered.

The domain is `broadside.campaigns.broadcasts.non_openers` (who, whether offered and why not,
the draft); these views parse, authorise, call it and render. The button itself, or the
reason in its place, is templates/analytics/_resend.html on the broadcast's page.
"""

from __future__ import annotations

from typing import Any

from flask import flash, g, redirect, render_template, url_for

from broadside.campaigns.broadcasts import non_openers
from broadside.campaigns.broadcasts import service as broadcasts
from broadside.core.errors import Conflict, ValidationError
from broadside.core.i18n import ngettext
from broadside.core.site_settings import get_settings
from webapp.analytics.views import bp
from webapp.extensions import db
from webapp.htmx import request
from webapp.permissions import allow
from webapp.settings.views import _render as _render_settings


def _page(broadcast_id: int, *, subject: str = "", error: str | None = None,
          status: int = 200) -> tuple[str, int]:
    broadcast = broadcasts.get_broadcast(db.session, broadcast_id)
    offer = non_openers.offer(db.session, broadcast)
    count = non_openers.count(db.session, broadcast_id) if offer.offered else None
    return render_template("analytics/resend.html", broadcast=broadcast, offer=offer,
                           count=count, subject=subject, error=error), status


@bp.route("/broadcasts/<int:broadcast_id>/non_openers")
@allow("write")
def resend_confirm(broadcast_id: int):
    return _page(broadcast_id)


@bp.route("/broadcasts/<int:broadcast_id>/non_openers", methods=["POST"])
@allow("write")
def resend(broadcast_id: int):
    subject = request.form.get("subject", "")
    try:
        draft = non_openers.make_draft(db.session, broadcast_id, subject)
    except ValidationError as exc:
        db.session.rollback()
        return _page(broadcast_id, subject=subject, error=exc.message, status=422)
    except Conflict:
        db.session.rollback()
        return _page(broadcast_id, status=409)  # the page says why (the offer's reason)
    audience = non_openers.count(db.session, broadcast_id)
    flash(ngettext("A new draft to the %(num)s person who did not open it. Check it, then send it.",
                   "A new draft to the %(num)s people who did not open it. Check it, then send it.",
                   audience), "success")
    return redirect(url_for("broadcasts.edit", broadcast_id=draft.id))


@bp.route("/settings/resend_wait", methods=["POST"])
@allow("manage")
def set_resend_wait():
    try:
        hours = non_openers.set_wait_hours(db.session, request.form.get("resend_after_hours"))
    except ValidationError as exc:
        db.session.rollback()
        g.resend_wait_error = exc.message
        return _render_settings(status=422)
    flash(ngettext("Saved. “Send again to those who did not open” is offered %(num)s hour after "
                   "a broadcast finished.",
                   "Saved. “Send again to those who did not open” is offered %(num)s hours after "
                   "a broadcast finished.", hours), "success")
    return redirect(url_for("settings.index") + "#resend-wait")


@bp.app_context_processor
def resend_helpers() -> dict[str, Any]:
    return {
        "resend_offer": lambda broadcast: non_openers.offer(db.session, broadcast),
        "resend_wait": lambda: get_settings(db.session).resend_after_hours,
        "resend_wait_error": lambda: g.get("resend_wait_error"),
        "resend_wait_limits": (1, non_openers.MAX_WAIT_HOURS),
    }
