"""The System page (owner only): is the sender running, how fast, what failed, the outbox."""

from __future__ import annotations

import time

from babel.numbers import format_decimal
from flask import (
    Blueprint,
    Response,
    current_app,
    flash,
    redirect,
    render_template,
    url_for,
)
from flask_wtf import FlaskForm
from markupsafe import escape

from broadside.core import roles
from broadside.core.errors import DomainError, NotFound
from broadside.core.i18n import _, current_locale, ngettext
from broadside.delivery.eml_folder import outbox_folder, read_outbox_message
from broadside.delivery.hourly_reset import reset_hourly_cap
from webapp.broadcasts.views import PREVIEW_CSP
from webapp.extensions import db, get_redis
from webapp.htmx import make_response, request
from webapp.permissions import defaults
from webapp.system import overview
from webapp.templating import num

bp = Blueprint("system", __name__, url_prefix="/system")
defaults(bp, read=roles.VIEW, change=roles.MANAGE)


class EmptyForm(FlaskForm):
    """Only the CSRF token, for buttons that change state."""


def _tenths(value: float) -> str:
    """0.4, 12.0 (English), 0,4 (German): one decimal, as the page's language writes it."""
    return format_decimal(round(value, 1), "#,##0.0", locale=current_locale())


@bp.context_processor
def _helpers() -> dict:
    def seconds(value: float | None) -> str:
        if value is None:
            return "–"
        if value < 90:
            return _("%(count)s s", count=_tenths(value))
        if value < 5400:
            return _("%(count)s min", count=num(round(value / 60)))
        return _("%(count)s h", count=_tenths(value / 3600))

    smtp_configured = bool(current_app.config["SMTP_URL"])

    def check_button_label(checks: list) -> str:
        return overview.check_button_label(checks, smtp_configured)

    poll = float(current_app.config.get("BOUNCE_MAILBOX_POLL_SECONDS", 60))
    mailbox_poll = _("every minute") if poll == 60 else _("every %(time)s", time=seconds(poll))
    return {"seconds": seconds, "check_button_label": check_button_label, "mailbox_poll": mailbox_poll}


@bp.route("/")
def index():
    return render_template("system/index.html", view=overview.system_overview(current_app, db.session),
                           action_form=EmptyForm())


@bp.route("/live")
def live():
    """HTMX: the worker, queues, pace and cap, polled every few seconds."""
    status = overview.live_status(db.session, get_redis(), current_app.config)
    return render_template("system/_live.html", live=status, action_form=EmptyForm())


@bp.route("/checks")
def checks():
    """HTMX: the doctor's checks (the SMTP line from the last stored check), polled."""
    return render_template("system/_checks.html", checks=overview.page_checks(current_app))


@bp.route("/smtp-check", methods=["POST"])
def smtp_check():
    checks = overview.check_smtp_now(current_app)
    if request.htmx:
        return render_template("system/_checks.html", checks=checks, checked_now=True)
    smtp = next(c for c in checks if c.name in ("SMTP", "outbox"))
    flash(_("%(name)s check: %(summary)s", name=smtp.name, summary=smtp.summary),
          "success" if smtp.ok else "error")
    return redirect(url_for(".index") + "#checks")


@bp.route("/hourly-reset", methods=["POST"])
def hourly_reset():
    """The default identity's hourly count (SEND_HOURLY_LIMIT)."""
    return _reset(None)


@bp.route("/hourly-reset/<int:identity_id>", methods=["POST"])
def hourly_reset_identity(identity_id: int):
    """Another identity's hourly count (its own cap, its own window)."""
    return _reset(identity_id)


def _reset(identity_id: int | None):
    try:
        forgotten = reset_hourly_cap(db.session, get_redis(), current_app.config, identity_id)
    except NotFound:
        raise
    except DomainError as exc:
        flash(exc.message, "error")
        return redirect(url_for(".index") + "#sending")
    flash(ngettext("The hourly count was reset (%(num)s send forgotten); sending may continue at once.",
                   "The hourly count was reset (%(num)s sends forgotten); sending may continue at once.",
                   forgotten), "success")
    return redirect(url_for(".index") + "#sending")


def _outbox_message(name: str):
    if current_app.config["SMTP_URL"]:
        raise NotFound(_("There is no outbox: messages go to the SMTP server in SMTP_URL."))
    return read_outbox_message(outbox_folder(current_app.instance_path), name)


@bp.route("/outbox/<name>")
def outbox_message(name: str):
    return render_template("system/outbox_message.html", message=_outbox_message(name))


@bp.route("/outbox/<name>/html")
def outbox_html(name: str) -> Response:
    """The HTML part as a document of its own, for the sandboxed iframe (its own relaxed CSP,
    as the broadcast preview: the email's CSS is inline by nature)."""
    message = _outbox_message(name)
    no_html = escape(_("This message has no HTML part."))
    response = make_response(message.html or f"<p>{no_html}</p>")
    response.headers["Content-Security-Policy"] = PREVIEW_CSP
    response.headers["X-Frame-Options"] = "SAMEORIGIN"
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.app_template_global()
def system_now() -> float:
    return time.time()
