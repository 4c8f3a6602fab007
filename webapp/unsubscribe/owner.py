"""The owner's side of leaving and bouncing (signed-in only, CSRF-protected).

- GET/POST /subscribers/<id>/suppression/lift   confirm, then lift a suppression by hand
- GET      /lists/<id>/departures               recent unsubscribes, bounces and complaints

Partials for other pages: `unsubscribe/_suppression_panel.html` (expects `subscriber`) and
`unsubscribe/_departures_panel.html` (expects `mailing_list`). They read through the
template helpers registered below, so the including view needs no change.
"""

from __future__ import annotations

from flask import Blueprint, current_app, flash, redirect, render_template, url_for
from flask_wtf import FlaskForm
from wtforms import TextAreaField
from wtforms.validators import Length

from broadside.audience.unsubscribe import departures, service
from broadside.audience.unsubscribe.suppression import MAX_NOTE_LENGTH
from broadside.core import roles
from broadside.core.errors import DomainError, NotFound
from broadside.core.i18n import _, _l
from broadside.core.models import Subscriber
from webapp.extensions import db
from webapp.params import int_arg
from webapp.permissions import defaults

bp = Blueprint("suppression", __name__)
defaults(bp, read=roles.VIEW, change=roles.MANAGE)


class LiftForm(FlaskForm):
    note = TextAreaField(_l("Why are you lifting it? (kept in the history)"),
                         validators=[Length(max=MAX_NOTE_LENGTH)])


@bp.app_context_processor
def departure_helpers() -> dict:
    return {
        "departures_for_subscriber":
            lambda subscriber_id, limit=20: departures.recent_for_subscriber(
                db.session, subscriber_id, limit),
        "departures_for_list":
            lambda list_id, limit=10: departures.recent_for_list(db.session, list_id, limit),
        "departure_list_names": lambda: departures.list_names(db.session),
    }


def _subscriber_page(subscriber_id: int) -> str:
    if "subscribers.show" in current_app.view_functions:
        return url_for("subscribers.show", subscriber_id=subscriber_id)
    return url_for("suppression.lift", subscriber_id=subscriber_id)


@bp.route("/subscribers/<int:subscriber_id>/suppression/lift", methods=["GET", "POST"])
def lift(subscriber_id: int):
    subscriber = db.session.get(Subscriber, subscriber_id)
    if subscriber is None:
        raise NotFound(_("There is no such subscriber."))
    form = LiftForm()
    status = 200
    if form.validate_on_submit():
        try:
            was = service.lift_suppression(db.session, subscriber_id, form.note.data or "")
        except DomainError as exc:
            db.session.rollback()
            form.note.errors.append(exc.message)
            status = exc.status_code
        else:
            flash(_("Suppression (%(kind)s) lifted: %(email)s can get mail again on the lists "
                    "they are subscribed to.", kind=was, email=subscriber.email), "success")
            return redirect(_subscriber_page(subscriber_id))
    elif form.errors:
        status = 422
    return render_template("unsubscribe/lift.html", subscriber=subscriber, form=form,
                           back=_subscriber_page(subscriber_id)), status


@bp.route("/lists/<int:list_id>/departures")
def list_departures(list_id: int):
    page = departures.list_departures(db.session, list_id, before_id=int_arg("before"))
    return render_template("unsubscribe/departures.html", page=page,
                           list_names=departures.list_names(db.session))
