"""Sending at each reader's own hour, on the owner's pages: the send page's card (choose "send
at 09:00 in each reader's time zone" for a draft, and read what it will do: how many readers in
which zone get it when, in the owner's time), and the progress bar's line of what still waits
for which hour.

Its route attaches to the broadcasts blueprint (`webapp.create_app` imports this module); the
card is templates/broadcasts/_local_time_card.html (included by send_confirm.html), the line
templates/broadcasts/_local_waiting.html (included by _progress.html). The data both show comes
from the template functions registered below: the domain's `local_plan.zone_plan` and
`local_waiting.waiting_hours` (the latter kept in Redis for half a minute, so the fragment's
poll does not count a million rows every 1.5 s).
"""

from __future__ import annotations

from typing import Any

from flask import flash, g, redirect, url_for

from broadside.campaigns.broadcasts import local_plan
from broadside.campaigns.broadcasts.local_time import OWNER
from broadside.campaigns.broadcasts.local_waiting import WaitingHour, waiting_hours
from broadside.core.errors import Conflict, ValidationError
from broadside.core.i18n import _, ngettext
from broadside.core.timeutil import utcnow
from webapp.broadcasts import bp
from webapp.broadcasts.sending_views import _render_confirm
from webapp.extensions import db, get_redis, namespaced
from webapp.htmx import request
from webapp.permissions import allow
from webapp.templating import owner_zone

SHOWN_ZONES = 2  # zone names written for one hour; the rest as "and N more"


@bp.route("/<int:broadcast_id>/local_time", methods=["POST"])
@allow("write")
def choose_local_time(broadcast_id: int):
    """The send page's card: "local" with an HH:MM, or "now" (everyone at once)."""
    local = request.form.get("when") == "local"
    value = (request.form.get("send_at_local") or "")[:16] if local else None
    try:
        if local and not (value or "").strip():
            raise ValidationError(_("Give the time of day, as HH:MM."), field="send_at_local")
        broadcast = local_plan.choose(db.session, broadcast_id, value)
    except ValidationError as exc:
        db.session.rollback()
        g.local_time_error = exc.message
        return _render_confirm(broadcast_id, status=422)
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for(".show", broadcast_id=broadcast_id))
    flash(_("Each reader gets it at %(at)s in their time zone.", at=broadcast.send_at_local)
          if broadcast.send_at_local else _("Everyone gets it at once."), "success")
    return redirect(url_for(".confirm_send", broadcast_id=broadcast_id) + "#local-time")


def waiting_zones(hour: WaitingHour) -> str:
    """Whose hour it is, in a few words: "Asia/Tokyo", "Europe/Berlin, Europe/Paris and 3
    more", with "and readers without one" when the owner's zone shares the moment."""
    named = hour.named
    if not named:
        return _("your time zone (readers without one)")
    words = ", ".join(named[:SHOWN_ZONES])
    if len(named) > SHOWN_ZONES:
        words = ngettext("%(zones)s and %(num)s more", "%(zones)s and %(num)s more",
                         len(named) - SHOWN_ZONES, zones=words)
    if OWNER in hour.zones:
        words = _("%(zones)s, and readers without a time zone", zones=words)
    return words


def _waiting(broadcast_id: int) -> tuple[str | None, list[WaitingHour]]:
    try:
        redis: Any = get_redis()
    except KeyError:  # an app built without Redis: counted at each ask
        redis = None
    return waiting_hours(db.session, redis, namespaced(f"local-waiting:{broadcast_id}"),
                         broadcast_id, utcnow())


@bp.app_context_processor
def local_time_helpers() -> dict[str, Any]:
    return {
        "local_plan_of": lambda broadcast: local_plan.zone_plan(db.session, broadcast,
                                                                owner_zone(), utcnow()),
        "local_time_error": lambda: g.get("local_time_error"),
        "local_time_ab_conflict": local_plan.CONFLICT_WITH_AB_TEST,
        "local_waiting": _waiting,
        "waiting_zones": waiting_zones,
        "owner_zone_name": lambda: owner_zone().key,
    }

