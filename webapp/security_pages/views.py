"""Settings -> Security: one's own two-factor sign-in (enrol with a QR code, recovery codes
shown once, turn it off), password, and sessions (each browser signed in as you, ended one at
a time or all but this one). Every change to the second factor or the password ends the
person's other sessions (the domain does it in the change's transaction); a new password
ends this one too, so this browser is signed in afresh."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from markupsafe import Markup

from broadside.core import accounts, browser_words, owner_sessions, sign_in_policy, two_factor
from broadside.core.errors import DomainError
from broadside.core.i18n import LOCALE_NAMES, LOCALES, _, negotiate
from webapp.audit.words import N_
from webapp.audit_trail import note
from webapp.extensions import db
from webapp.forms import after_post, keep_for_one_read, place_error, read_once
from webapp.i18n import use_locale
from webapp.security import browser_token, sign_in
from webapp.security_pages import bp
from webapp.security_pages.forms import (
    ActionForm,
    ConfirmForm,
    LanguageForm,
    PasswordForm,
    PolicyForm,
    TurnOffForm,
)


def _others_ended() -> str:
    return _("Your other sessions are ended: sign in again there.")


def render_index(status: int = 200, **forms):
    """The page, with any form given in place of a fresh one (its errors shown)."""
    person = current_user
    required, idle_hours = sign_in_policy.current(db.session)
    if "policy_form" not in forms:
        forms["policy_form"] = PolicyForm(formdata=None, require_two_factor=required,
                                          idle_hours=str(idle_hours))
    sessions = [(line, browser_words.describe(line.user_agent))
                for line in owner_sessions.sessions_of(db.session, person.id, browser_token())]
    context = {
        "enabled": two_factor.is_enabled(person),
        "codes_left": two_factor.recovery_codes_left(db.session, person.id),
        "required": required,
        "sessions": sessions,
        "action_form": ActionForm(),
        "password_form": forms.get("password_form") or PasswordForm(formdata=None),
        "off_form": forms.get("off_form") or TurnOffForm(formdata=None),
        "policy_form": forms["policy_form"],
        "language_form": forms.get("language_form") or language_form(formdata=None),
    }
    return render_template("security/index.html", **context), status


@bp.route("/")
def index():
    return render_index()


def language_form(**kwargs) -> LanguageForm:
    """The Language section's form: the browser's, then each shipped language in its own
    name (a German reader finds "Deutsch" whatever the page speaks)."""
    form = LanguageForm(**kwargs)
    form.locale.choices = [("", _("Your browser's language"))] + [
        (locale, LOCALE_NAMES[locale]) for locale in LOCALES]
    if kwargs.get("formdata", True) is None:
        form.locale.data = current_user.locale or ""
    return form


@bp.route("/language", methods=["POST"])
def set_language():
    """One's own language for these pages (None: the browser's); the next page speaks it."""
    form = language_form()
    if not form.validate_on_submit():
        return render_index(422, language_form=form)
    try:
        person = accounts.set_own_locale(db.session, current_user.id, form.locale.data)
    except DomainError as exc:
        db.session.rollback()
        place_error(form, exc)
        return render_index(422, language_form=form)
    note(summary=N_("Language changed"), locale=person.locale or "browser")
    use_locale(person.locale or negotiate(request.headers.get("Accept-Language")))
    flash(_("Your language is saved."), "success")
    return after_post(url_for("security.index") + "#language")


@bp.route("/two-factor/start", methods=["POST"])
def start_two_factor():
    if ActionForm().validate_on_submit():
        try:
            two_factor.start_enrolment(db.session, current_user.id)
        except DomainError as exc:
            flash(exc.message, "info")
            return after_post(url_for("security.index"))
    return after_post(url_for("security.enrol"))


@bp.route("/two-factor/enrol", methods=["GET", "POST"])
def enrol():
    secret = two_factor.pending_secret(db.session, current_user.id)
    if secret is None:
        return redirect(url_for("security.index"))
    form = ConfirmForm()
    status = 200
    if form.validate_on_submit():
        try:
            codes = two_factor.confirm_enrolment(db.session, current_user.id, form.code.data,
                                                 keep_token=browser_token())
        except DomainError as exc:
            db.session.rollback()
            place_error(form, exc)
            status = 422
        else:
            note(summary=N_("Two-factor sign-in turned on"))
            keep_for_one_read("recovery_codes", "\n".join(codes))
            flash(" ".join((_("Two-factor sign-in is on."), _others_ended())), "success")
            return after_post(url_for("security.recovery_codes"))
    elif form.errors:
        status = 422
    shown = two_factor.enrolment(secret, current_user.email)
    return render_template("security/enrol.html", form=form, enrolment=shown,
                           qr=Markup(shown.qr_svg), email=current_user.email), status


@bp.route("/two-factor/recovery-codes")
def recovery_codes():
    """The recovery codes just made, shown once (a reload shows them no more)."""
    codes = read_once("recovery_codes")
    next_url = read_once("recovery_next") or url_for("security.index")
    if codes is None:
        return redirect(url_for("security.index"))
    return render_template("security/recovery_codes.html", codes=codes.split("\n"),
                           next_url=next_url)


@bp.route("/two-factor/recovery-codes/new", methods=["POST"])
def new_recovery_codes():
    if ActionForm().validate_on_submit():
        try:
            codes = two_factor.new_recovery_codes(db.session, current_user.id,
                                                  keep_token=browser_token())
        except DomainError as exc:
            flash(exc.message, "error")
            return after_post(url_for("security.index"))
        note(summary=N_("New recovery codes made (the old set void)"))
        keep_for_one_read("recovery_codes", "\n".join(codes))
        flash(" ".join((_("A new set of recovery codes; the old set no longer works."),
                        _others_ended())), "success")
        return after_post(url_for("security.recovery_codes"))
    return after_post(url_for("security.index"))


@bp.route("/two-factor/off", methods=["POST"])
def turn_off():
    form = TurnOffForm()
    if not form.validate_on_submit():
        return render_index(422, off_form=form)
    try:
        two_factor.turn_off(db.session, current_user.id, code=form.code.data,
                            password=form.password.data, keep_token=browser_token())
    except DomainError as exc:
        db.session.rollback()
        place_error(form, exc)
        return render_index(422, off_form=form)
    note(summary=N_("Two-factor sign-in turned off"))
    flash(" ".join((_("Two-factor sign-in is off."), _others_ended())), "success")
    return after_post(url_for("security.index"))


@bp.route("/password", methods=["POST"])
def change_password():
    form = PasswordForm()
    if not form.validate_on_submit():
        return render_index(422, password_form=form)
    try:
        person = accounts.change_password(db.session, current_user.id,
                                          form.current_password.data, form.password.data)
    except DomainError as exc:
        db.session.rollback()
        place_error(form, exc)
        return render_index(422, password_form=form)
    note(summary=N_("Password changed"))
    sign_in(person)  # the change ended every session, this one too: a fresh one here
    flash(_("Your new password is set. Every other browser signed in as you is signed out."),
          "success")
    return after_post(url_for("security.index"))


@bp.route("/sessions/<key>/end", methods=["POST"])
def end_session(key: str):
    if ActionForm().validate_on_submit():
        if owner_sessions.close_by_key(db.session, current_user.id, key):
            note(summary=N_("A session ended"), session=key)
            flash(_("That session is ended: the browser is signed out."), "success")
        else:
            flash(_("That session had already ended."), "info")
    return after_post(url_for("security.index") + "#sessions")


@bp.route("/sessions/end-others", methods=["POST"])
def end_other_sessions():
    if ActionForm().validate_on_submit():
        owner_sessions.close_others(db.session, current_user.id, browser_token())
        db.session.commit()
        note(summary=N_("Every other session ended"))
        flash(_("Every other session is ended; this browser stays signed in."), "success")
    return after_post(url_for("security.index") + "#sessions")
