"""The invitation's page, `/invitation/<token>`: public (the emailed link is the credential;
only its SHA-256 is stored), where the invitee gives their name and password and is signed in.

Opening the link changes nothing (mail scanners open links); submitting the form uses it up
(broadside.core.invitations.accept: one guarded UPDATE, so of two submissions one wins). A
used, withdrawn or expired link gets a page saying so (410), an unknown one 404.

Attempts are throttled per client like sign-in (`throttle.client_key`: an IPv4 address or an
IPv6 /64): each request is counted before the link is looked up, and given back when the link
names a real invitation, so what the limit counts is guesses.
"""

from __future__ import annotations

from flask import current_app, flash, redirect, render_template, request, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from wtforms import PasswordField, StringField
from wtforms.validators import DataRequired, EqualTo, Length

from broadside.core import accounts, invitations, roles
from broadside.core.errors import DomainError
from broadside.core.i18n import _, _l
from broadside.core.invitations import InvitationRefused
from webapp import throttle
from webapp.extensions import db
from webapp.forms import place_error
from webapp.people import bp
from webapp.permissions import public
from webapp.security import sign_in, sign_out

DEFAULT_ATTEMPTS_PER_CLIENT = 20
DEFAULT_WINDOW_SECONDS = 15 * 60
TOO_MANY = _l("Too many attempts with invitation links. Wait 15 minutes, then try again.")

PASSWORD_LENGTH = Length(
    min=accounts.MIN_PASSWORD_LENGTH, max=accounts.MAX_PASSWORD_LENGTH,
    message=_l("The password must be %(least)s to %(most)s characters long.",
               least=accounts.MIN_PASSWORD_LENGTH, most=accounts.MAX_PASSWORD_LENGTH))


class AcceptForm(FlaskForm):
    name = StringField(_l("Your name"), validators=[DataRequired(_l("Please give your name.")),
                                                Length(max=invitations.MAX_NAME)],
                       render_kw={"autocomplete": "name"})
    password = PasswordField(_l("Password"), validators=[DataRequired(_l("Choose a password.")),
                                                     PASSWORD_LENGTH],
                             render_kw={"autocomplete": "new-password"})
    confirm = PasswordField(_l("Repeat the password"),
                            validators=[DataRequired(_l("Repeat the password.")),
                                        EqualTo("password", _l("The passwords differ."))],
                            render_kw={"autocomplete": "new-password"})


def _bucket() -> str:
    return f"invitation:client:{throttle.client_key(request.remote_addr)}"


def _allowed() -> bool:
    config = current_app.config
    window = int(config.get("INVITATION_WINDOW_SECONDS", DEFAULT_WINDOW_SECONDS))
    limit = int(config.get("INVITATION_ATTEMPTS_PER_CLIENT", DEFAULT_ATTEMPTS_PER_CLIENT))
    return throttle.increment(_bucket(), window) <= limit


def _refused(refused: InvitationRefused):
    return render_template("people/refused.html", refused=refused), refused.status_code


@bp.route("/invitation/<token>", methods=["GET", "POST"])
@public("an invitation's own link, for someone who has no account yet: the link is the "
        "credential (only its SHA-256 is stored), single use, 72 hours, throttled per client")
def accept(token: str):
    if not _allowed():
        return render_template("error.html", status=429, message=str(TOO_MANY)), 429
    try:
        invitation = invitations.usable(db.session, token)
    except InvitationRefused as refused:
        if refused.reason != "unknown":
            throttle.refund(_bucket())  # a real link, only past its use
        return _refused(refused)
    throttle.refund(_bucket())
    form = AcceptForm()
    status = 200
    if form.validate_on_submit():
        try:
            person = invitations.accept(db.session, token, name=form.name.data,
                                        password=form.password.data)
        except InvitationRefused as refused:  # another use won, a moment earlier
            return _refused(refused)
        except DomainError as exc:
            db.session.rollback()
            place_error(form, exc)
            status = exc.status_code
        else:
            if current_user.is_authenticated:
                sign_out()  # this browser was someone else's: it is the new person's now
            sign_in(person)
            flash(_("Welcome to Broadside, %(name)s. You are signed in as %(role)s.",
                    name=person.name, role=roles.role_word(person.role)), "success")
            return redirect(url_for("dashboard.home"))
    elif form.errors:
        status = 422
    return render_template("people/accept.html", form=form, invitation=invitation,
                           role_word=roles.role_word(invitation.role),
                           role_description=roles.role_description(invitation.role)), status
