"""Settings: sender identity and postal address, the pace in force, and API tokens."""

from __future__ import annotations

from collections import defaultdict

from flask import Blueprint, current_app, flash, redirect, render_template, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from wtforms import RadioField, SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import DataRequired, Length, Optional

from broadside.campaigns.automations import refreeze
from broadside.core import accounts, roles
from broadside.core.errors import DomainError, ValidationError
from broadside.core.i18n import _, _l, ngettext
from broadside.core.site_settings import (
    SettingsError,
    get_settings,
    time_zones,
    update_content_retention,
    update_history_retention,
    update_sending_defaults,
    update_settings,
)
from webapp.extensions import db
from webapp.forms import after_post, keep_for_one_read, place_error, read_once
from webapp.permissions import allow, can, defaults
from webapp.templating import num

bp = Blueprint("settings", __name__, url_prefix="/settings")
defaults(bp, read=roles.VIEW, change=roles.MANAGE)
# A role's name in the page's language, for every template ("Redakteur", "rédacteur").
bp.add_app_template_global(roles.role_label, "role_label")
bp.add_app_template_global(roles.role_word, "role_word")


def _time_zone_choices() -> dict[str, list[tuple[str, str]]]:
    """Time zones grouped by region for an <optgroup>ed select; UTC first."""
    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name in sorted(time_zones()):
        region = name.split("/", 1)[0] if "/" in name else "Other"
        groups[region].append((name, name.replace("_", " ")))
    return {_("Universal"): [("UTC", "UTC")], **{r: z for r, z in sorted(groups.items())}}


class SenderForm(FlaskForm):
    sender_name = StringField(_l("Sender name"), description=_l(
        "Shown as the sender in inboxes, for example “Acme Weekly”."))
    sender_email = StringField(_l("Sender address"), render_kw={"type": "email",
                                                             "autocomplete": "email"})
    postal_address = TextAreaField(_l("Postal address"), render_kw={"rows": 4},
                                   description=_l("Printed in the footer of every email: "
                                   "the law (CAN-SPAM) asks for a valid postal address."))
    time_zone = SelectField(_l("Time zone"), validate_choice=False,
                            description=_l("Times on the pages and scheduled sends use it."))


class TokenForm(FlaskForm):
    name = StringField(_l("Token name"), validators=[DataRequired(), Length(max=100)])
    access = RadioField(_l("Access"), choices=[
        SelectChoice("full", _l("Full: what your role may do")),
        SelectChoice("read", _l("Read-only: GET requests only"))],
                        default="full", validators=[Optional()])  # absent: a full token, as before


class DefaultsForm(FlaskForm):
    skip_hours = StringField(
        _l("Skip anyone who received a broadcast in the last … hours"),
        render_kw={"inputmode": "numeric", "pattern": "[0-9]*", "placeholder": _l("no limit")},
        description=_l("The frequency cap new broadcasts start with (each broadcast can change "
                       "it). Checked at each person's turn; empty: no cap."))


class RetentionForm(FlaskForm):
    keep = RadioField(_l("Keep the step-by-step history of sent broadcasts for"),
                      choices=[SelectChoice("forever", _l("Forever (the default)")),
                               SelectChoice("days", _l("A number of days"))],
                      default="forever", validators=[Optional()])
    retention_days = StringField(
        _l("Days"), render_kw={"inputmode": "numeric", "pattern": "[0-9]*", "placeholder": "90"},
        description=_l("After a broadcast has been finished or cancelled this long, each "
                       "recipient's claims, retries and replies are removed; their final state, "
                       "reason, code and times stay on the deliveries table."))


class ContentForm(FlaskForm):
    content_days = StringField(
        _l("Keep the content of transactional and test messages for … days"),
        render_kw={"inputmode": "numeric", "pattern": "[0-9]*", "placeholder": "30"},
        description=_l("Sign-up confirmations, test sends and the API's transactional mail. "
                       "Afterwards each keeps its address, outcome and times, the SHA-256 of its "
                       "subject and body, and the template revision it came from. From 1 to "
                       "3650 days."))


class EmptyForm(FlaskForm):
    """A form with only the CSRF token, for buttons that change state."""


def _sender_form(*, from_request: bool = False) -> SenderForm:
    if from_request:
        form = SenderForm()
    else:
        form = SenderForm(formdata=None, obj=get_settings(db.session))
    form.time_zone.choices = _time_zone_choices()
    return form


def _defaults_form() -> DefaultsForm:
    cap = get_settings(db.session).default_skip_if_received_within_hours
    return DefaultsForm(formdata=None, data={"skip_hours": str(cap) if cap else ""})


def _retention_form() -> RetentionForm:
    days = get_settings(db.session).history_retention_days
    return RetentionForm(formdata=None, data={"keep": "days" if days else "forever",
                                              "retention_days": str(days) if days else ""})


def _content_form() -> ContentForm:
    return ContentForm(formdata=None,
                       data={"content_days": str(get_settings(db.session).content_retention_days)})


def _render(*, sender_form: SenderForm | None = None, token_form: TokenForm | None = None,
            new_token: str | None = None, defaults_form: DefaultsForm | None = None,
            retention_form: RetentionForm | None = None, content_form: ContentForm | None = None,
            status: int = 200):
    config = current_app.config
    delay = config["SEND_DELAY_MS"]
    return render_template(
        "settings/index.html",
        # Everyone sees their own tokens; those who manage see everyone's (and may revoke any).
        tokens=accounts.list_tokens(db.session,
                                    of=None if can(roles.MANAGE) else current_user.id),
        token_form=token_form or TokenForm(formdata=None),
        action_form=EmptyForm(),
        new_token=new_token,
        sender_form=sender_form or _sender_form(),
        defaults_form=defaults_form or _defaults_form(),
        retention_form=retention_form or _retention_form(),
        content_form=content_form or _content_form(),
        content_days=get_settings(db.session).content_retention_days,
        mail_from=config["MAIL_FROM"],
        send_delay_ms=delay,
        # The delay bounds the rate; the SMTP conversation itself makes it a little slower.
        pace_per_second=num(float(f"{1000 / delay:.3g}")) if delay else "",
        pace_per_hour=num(3_600_000 // delay) if delay else "",
        hourly_limit=config["SEND_HOURLY_LIMIT"],
        automations_reached=refreeze.reaching(db.session, refreeze.SETTINGS),
    ), status


NEW_TOKEN = "new_api_token"


@bp.route("/")
def index():
    return _render(new_token=read_once(NEW_TOKEN))


@bp.route("/defaults", methods=["POST"])
def update_defaults():
    form = DefaultsForm()
    if not form.validate_on_submit():
        return _render(defaults_form=form, status=400)
    try:
        update_sending_defaults(db.session, skip_if_received_within_hours=form.skip_hours.data)
    except SettingsError as exc:
        db.session.rollback()
        form.skip_hours.errors = [exc.message]
        return _render(defaults_form=form, status=422)
    flash(_("Saved. New broadcasts start with this frequency cap."), "success")
    return after_post(url_for("settings.index") + "#defaults")


@bp.route("/history", methods=["POST"])
def update_history():
    form = RetentionForm()
    if not form.validate_on_submit():
        return _render(retention_form=form, status=400)
    days = "forever" if form.keep.data != "days" else (form.retention_days.data or "").strip()
    try:
        update_history_retention(db.session, days=days or "missing")
    except SettingsError as exc:
        db.session.rollback()
        form.retention_days.errors = [exc.message]
        return _render(retention_form=form, status=422)
    flash(_("Saved. Sent broadcasts keep their step-by-step history forever.") if days == "forever"
          else _("Saved. Broadcasts finished more than %(days)s days ago lose their step-by-step "
                 "history within the next few minutes; each recipient's final state stays.",
                 days=days), "success")
    return after_post(url_for("settings.index") + "#history")


@bp.route("/content", methods=["POST"])
def update_content():
    form = ContentForm()
    if not form.validate_on_submit():
        return _render(content_form=form, status=400)
    try:
        settings = update_content_retention(db.session, days=form.content_days.data or "")
    except SettingsError as exc:
        db.session.rollback()
        form.content_days.errors = [exc.message]
        return _render(content_form=form, status=422)
    days = settings.content_retention_days
    flash(ngettext("Saved. Transactional and test messages keep their content for %(num)s "
                   "day; older ones lose it within the next few minutes.",
                   "Saved. Transactional and test messages keep their content for %(num)s "
                   "days; older ones lose it within the next few minutes.", days), "success")
    return after_post(url_for("settings.index") + "#content")


@bp.route("/sender", methods=["POST"])
def update_sender():
    form = _sender_form(from_request=True)
    try:
        # The automations that use the sender or the postal address follow them, in the
        # same commit.
        _saved, refrozen = refreeze.save_and_refreeze(db.session, lambda: update_settings(
            db.session, sender_name=form.sender_name.data or "",
            sender_email=form.sender_email.data or "",
            postal_address=form.postal_address.data or "",
            time_zone=form.time_zone.data or "", commit=False),
            refreeze.SETTINGS, default_from=current_app.config["MAIL_FROM"])
    except SettingsError as exc:
        getattr(form, exc.field).errors = [exc.message]
        return _render(sender_form=form, status=422)
    except ValidationError as exc:  # an automation's step would no longer build: nothing saved
        flash(exc.message, "error")
        return _render(sender_form=form, status=422)
    flash(" ".join(filter(None, (
        _("Settings saved. New drafts and previews use them now; broadcasts already sent keep "
          "what they were sent with."), refrozen.words()))), "success")
    return after_post(url_for("settings.index") + "#sender")


@bp.route("/tokens", methods=["POST"])
@allow(roles.SELF)  # everyone makes their own; it carries at most their role
def create_token():
    form = TokenForm()
    new_token = None
    if form.validate_on_submit():
        try:
            _made, new_token = accounts.create_token(db.session, current_user.id, form.name.data,
                                                 read_only=form.access.data == "read")
        except DomainError as exc:
            place_error(form, exc)
    if new_token:
        # Shown once, on the page this redirect leads to (a reload shows it no more).
        keep_for_one_read(NEW_TOKEN, new_token)
        return after_post(url_for("settings.index") + "#tokens")
    return _render(token_form=form, status=422)


@bp.route("/tokens/<int:token_id>/revoke", methods=["POST"])
@allow(roles.SELF)  # one's own; another's needs `manage`, checked by the domain
def revoke_token(token_id: int):
    if EmptyForm().validate_on_submit():
        token = accounts.revoke_token(db.session, token_id, by=current_user.id,
                                      any_token=can(roles.MANAGE))
        flash(_("The token “%(name)s” is revoked; requests that use it are now refused.",
                name=token.name), "success")
    return redirect(url_for("settings.index") + "#tokens")
