"""Deliverability (blueprint `deliverability`, in the main navigation): each sending identity's
hard-bounce and complaint rates over its last 1,000 sends and over 30 days, drawn per day
against the warning and limit lines, with its state (fine, warning, paused by the reputation
guard with a link to resume it on its page), and the lines themselves:

    GET  /deliverability/          the page
    POST /deliverability/lines     the four lines (percent; each warning below its limit):
                                   a refusal is 422 with the message under its field
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, flash, render_template, url_for
from flask_wtf import FlaskForm
from wtforms import StringField

from broadside.core import roles
from broadside.core.i18n import _, _l
from broadside.core.site_settings import SettingsError, get_settings, update_reputation_lines
from broadside.delivery.identities import service as identities
from broadside.feedback.reputation.figures import WINDOW
from broadside.feedback.reputation.lines import MIN_SENDS, pct
from broadside.feedback.reputation.report import identity_report
from webapp.deliverability.chart import rate_chart
from webapp.extensions import db
from webapp.forms import after_post
from webapp.permissions import defaults
from webapp.templating import owner_zone

bp = Blueprint("deliverability", __name__, url_prefix="/deliverability")
defaults(bp, read=roles.VIEW, change=roles.MANAGE)


def _percent_field(label: Any, help_text: Any) -> StringField:
    return StringField(label, description=help_text,
                       render_kw={"inputmode": "decimal", "autocomplete": "off"})


class LinesForm(FlaskForm):
    complaint_warning_pct = _percent_field(_l("Complaints: warning at (%)"),
                                           _l("Gmail's: 0.1 %."))
    complaint_limit_pct = _percent_field(_l("Complaints: limit, pauses at (%)"),
                                         _l("Gmail's: 0.3 %."))
    bounce_warning_pct = _percent_field(_l("Hard bounces: warning at (%)"),
                                        _l("Gmail's guidance: 2 %."))
    bounce_limit_pct = _percent_field(_l("Hard bounces: limit, pauses at (%)"),
                                      _l("Gmail's guidance: 5 %."))


def _lines_form() -> LinesForm:
    settings = get_settings(db.session)
    return LinesForm(formdata=None, data={
        name: f"{getattr(settings, name):g}" for name in
        ("complaint_warning_pct", "complaint_limit_pct", "bounce_warning_pct", "bounce_limit_pct")})


def _render(form: LinesForm | None = None, status: int = 200):
    zone = owner_zone()
    reports = []
    for identity in identities.all_identities(db.session, current_app.config):
        report = identity_report(db.session, identity, zone)
        reports.append((report,
                        rate_chart(report.days, "bounce", report.lines.bounce_warning,
                                   report.lines.bounce_limit),
                        rate_chart(report.days, "complaint", report.lines.complaint_warning,
                                   report.lines.complaint_limit)))
    db.session.commit()
    return render_template("deliverability/index.html", reports=reports,
                           form=form or _lines_form(), pct=pct, min_sends=MIN_SENDS,
                           window=WINDOW), status


@bp.route("/")
def index():
    return _render()


@bp.route("/lines", methods=["POST"])
def update_lines():
    form = LinesForm()
    if not form.validate_on_submit():
        return _render(form, 400)
    try:
        update_reputation_lines(db.session, {name: field.data for name, field in
                                             form._fields.items() if name != "csrf_token"})
    except SettingsError as exc:
        db.session.rollback()
        form[exc.field].errors = [exc.message]
        return _render(form, 422)
    flash(_("Saved. The reputation guard judges every identity against these lines from now on."),
          "success")
    return after_post(url_for("deliverability.index") + "#lines")
