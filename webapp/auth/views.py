"""First-run setup, sign in and sign out, and the way back in: "Forgot your password?" mails a
reset link (broadside.mail.password_reset) through the transactional stream.

A right password signs in at once only a person without two-factor sign-in, where the owner
does not require it; anyone else is given a pending sign-in (webapp/auth/pending.py) and sent
to the second step (webapp/auth/second_step.py), which signs in only after the code."""

from __future__ import annotations

import time
from urllib.parse import unquote, urlsplit

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_login import current_user
from flask_wtf import FlaskForm
from wtforms import EmailField, PasswordField
from wtforms.validators import DataRequired, EqualTo, Length

from broadside.core import accounts, sign_in_policy, two_factor
from broadside.core.errors import DomainError
from broadside.core.i18n import _, _l
from broadside.core.models import Owner
from broadside.delivery.transactional import queue_transactional
from broadside.mail.password_reset import ResetLinkRefused, ResetLinks
from webapp import throttle
from webapp.auth import pending
from webapp.extensions import db, get_jobs
from webapp.security import public, sign_in, sign_out
from webapp.steady_answers import SteadyAnswer

bp = Blueprint("auth", __name__)

# Sign-in throttles. A "client" is an IPv4 address or an IPv6 /64 (`throttle.client_key`).
# Every attempt is counted (atomically, before the password is checked) and a successful one
# is given back, so what the limits count is failures, and a burst gets no extra guesses.
# - per (account, client): the attempts one client may make at one address;
# - per client: the attempts one client may make whatever the addresses it types;
# - per account, from every client together: never a refusal (anybody who knows the owner's
#   address could then lock them out), only a short wait before each check once many attempts
#   have been made in the window, which slows a spread-out guesser down.
# All can be changed in the app's config (LOGIN_* keys below).
DEFAULT_FAILURES_PER_ACCOUNT_CLIENT = 5
DEFAULT_FAILURES_PER_CLIENT = 20
DEFAULT_WINDOW_SECONDS = 15 * 60
DEFAULT_ACCOUNT_SLOWDOWN_AFTER = 10
DEFAULT_ACCOUNT_DELAY_SECONDS = 0.5

TOO_MANY = _l("Too many failed sign-ins. Wait 15 minutes, then try again.")

# "Forgot your password?": every request is counted (each may mail a link), whatever the
# address, before anybody is looked up, so the limits say nothing about who has an account.
# - per (address, client) and per client, as for sign-in;
# - per address from every client together: the owner's inbox is not flooded by a spread-out
#   stranger (who can at most hold their email reset off for the window; the password still
#   signs in, and `owner reset-password` works on the server).
# Each can be changed in the app's config (PASSWORD_RESET_* keys below).
DEFAULT_RESETS_PER_ADDRESS_CLIENT = 3
DEFAULT_RESETS_PER_CLIENT = 10
DEFAULT_RESETS_PER_ADDRESS = 5
# The answer's time must not tell either: an owner's address costs one more row and one Redis
# job (10 to 20 ms), so every answer that says "on its way" waits until this long after the
# request began (PASSWORD_RESET_ANSWER_SECONDS), well beyond that difference (webapp.steady_answers).
DEFAULT_RESET_ANSWER_SECONDS = 0.25
TOO_MANY_RESETS = _l("Too many reset links were asked for. Wait 15 minutes, then try again.")
SENT_ANSWER = _l("If that address belongs to an account, a link is on its way.")


PASSWORD_LENGTH = Length(
    min=accounts.MIN_PASSWORD_LENGTH, max=accounts.MAX_PASSWORD_LENGTH,
    message=_l("The password must be %(least)s to %(most)s characters long.",
               least=accounts.MIN_PASSWORD_LENGTH, most=accounts.MAX_PASSWORD_LENGTH))


class SetupForm(FlaskForm):
    email = EmailField(_l("Email"), validators=[DataRequired(), Length(max=320)])
    password = PasswordField(_l("Password"), validators=[DataRequired(), PASSWORD_LENGTH])
    confirm = PasswordField(_l("Repeat password"), validators=[
        DataRequired(), EqualTo("password", _l("The passwords differ."))])


class LoginForm(FlaskForm):
    email = EmailField(_l("Email"), validators=[DataRequired(), Length(max=320)])
    password = PasswordField(
        _l("Password"), validators=[DataRequired(), Length(max=accounts.MAX_PASSWORD_LENGTH)])


class ForgotForm(FlaskForm):
    email = EmailField(_l("Email"), validators=[DataRequired(), Length(max=320)])


class NewPasswordForm(FlaskForm):
    password = PasswordField(_l("New password"), validators=[DataRequired(), PASSWORD_LENGTH])
    confirm = PasswordField(
        _l("Repeat the new password"),
        validators=[DataRequired(), EqualTo("password", _l("The passwords differ."))])


def _is_same_site_path(target: str) -> bool:
    """A path on this site: `/` then not a second `/` or a `\\` (browsers read a backslash as
    a slash, so `/\\evil.example` is another host), no control characters (browsers drop tabs
    and newlines, so `/<TAB>/evil.example` is `//evil.example`), and the same once
    percent-decoded (in case something between here and the browser decodes it)."""
    decoded = target
    for _round in range(3):
        if not decoded.startswith("/") or decoded.startswith("//") or "\\" in decoded:
            return False
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in decoded):
            return False
        parts = urlsplit(decoded)
        if parts.scheme or parts.netloc:
            return False
        decoded, before = unquote(decoded), decoded
        if decoded == before:
            return True
    return False  # encoded over and over: nobody's real link


def _safe_next(target: str | None) -> str:
    """Only same-site relative paths, so `next` cannot send the owner elsewhere."""
    if target and len(target) <= 2000 and _is_same_site_path(target):
        return target
    return url_for("dashboard.home")


def _setting(name: str, default: float) -> float:
    return float(current_app.config.get(name, default))


@bp.route("/setup", methods=["GET", "POST"])
@public("a fresh install's first owner: only while nobody exists, a form with a CSRF token")
def setup():
    if accounts.owner_exists(db.session):
        abort(404)
    form = SetupForm()
    if form.validate_on_submit():
        try:
            owner = accounts.create_first_owner(db.session, form.email.data, form.password.data)
        except accounts.AlreadySetUp:
            # Another browser finished the setup first: the answer any later visitor gets.
            db.session.rollback()
            abort(404)
        except DomainError as exc:
            db.session.rollback()
            form.email.errors.append(exc.message)
        else:
            sign_in(owner)
            flash(_("Welcome to Broadside. Create your first list to get started."), "success")
            return redirect(url_for("dashboard.home"))
    return render_template("auth/setup.html", form=form), 422 if form.errors else 200


@bp.route("/login", methods=["GET", "POST"])
@public("signing in: a form with a CSRF token, throttled per address and network")
def login():
    if not accounts.owner_exists(db.session):
        return redirect(url_for("auth.setup"))
    if current_user.is_authenticated:
        return redirect(url_for("dashboard.home"))
    form = LoginForm()
    status = 200
    if form.validate_on_submit():
        email = form.email.data.strip().lower()
        if attempt_allowed(email):
            owner = accounts.authenticate(db.session, email, form.password.data)
            if owner is not None:
                return _after_password(owner, _safe_next(request.args.get("next")))
            form.form_errors.append(_("That email and password do not match."))
            status = 401
        else:
            form.form_errors.append(str(TOO_MANY))
            status = 429
    elif form.errors:
        status = 422
    return render_template("auth/login.html", form=form), status


def _after_password(owner: Owner, next_url: str):
    """Signed in now; or, with two-factor on (or required), a pending sign-in sent to its
    second step. The throttle forgives this client only once the whole sign-in succeeds, so a
    right password does not buy a guesser of codes a fresh set of tries."""
    if two_factor.is_enabled(owner):
        pending.begin(owner, next_url, enrol=False)
        return redirect(url_for("auth.two_factor"))
    if sign_in_policy.requires_two_factor(db.session):
        two_factor.start_enrolment(db.session, owner.id)
        pending.begin(owner, next_url, enrol=True)
        return redirect(url_for("auth.enrol_two_factor"))
    forgive(owner.email)
    sign_in(owner)
    return redirect(next_url)


def _buckets(email: str) -> tuple[str, str, str]:
    client = throttle.client_key(request.remote_addr)
    return f"login:account-client:{email}:{client}", f"login:client:{client}", f"login:account:{email}"


def attempt_allowed(email: str) -> bool:
    """Count this attempt, then decide on the counts Redis returned (no read-then-write).

    Refused only when this client is over one of its own limits; the account-wide count never
    refuses, it only makes each check wait a little once many guesses are being made."""
    window = int(_setting("LOGIN_WINDOW_SECONDS", DEFAULT_WINDOW_SECONDS))
    pair, client, account = _buckets(email)
    pair_count, client_count, account_count = throttle.count_all([pair, client, account], window)
    if pair_count > _setting("LOGIN_FAILURES_PER_ACCOUNT_CLIENT", DEFAULT_FAILURES_PER_ACCOUNT_CLIENT):
        return False
    if client_count > _setting("LOGIN_FAILURES_PER_CLIENT", DEFAULT_FAILURES_PER_CLIENT):
        return False
    if account_count > _setting("LOGIN_ACCOUNT_SLOWDOWN_AFTER", DEFAULT_ACCOUNT_SLOWDOWN_AFTER):
        # Before the check, whatever its outcome: a wait only after a wrong password would let
        # a guesser drop the connection as soon as the answer is late.
        time.sleep(_setting("LOGIN_ACCOUNT_DELAY_SECONDS", DEFAULT_ACCOUNT_DELAY_SECONDS))
    return True


def forgive(email: str) -> None:
    """A successful sign-in (both steps): this client's failures at this address are forgotten, and the
    attempt itself is given back to the client's and the account's counts."""
    pair, client, account = _buckets(email)
    throttle.clear(pair)
    throttle.refund(client)
    throttle.refund(account)


@bp.route("/logout", methods=["POST"])
@public("signing out ends this browser's own session; a POST with a CSRF token")
def logout():
    sign_out()
    flash(_("You are signed out."), "info")
    return redirect(url_for("auth.login"))


# ---------------------------------------------------------------- the way back in

def _reset_links() -> ResetLinks:
    return ResetLinks(current_app.config["SECRET_KEY"], current_app.config["BASE_URL"])


def _reset_allowed(email: str) -> bool:
    window = int(_setting("LOGIN_WINDOW_SECONDS", DEFAULT_WINDOW_SECONDS))
    client = throttle.client_key(request.remote_addr)
    pair, per_client, per_address = throttle.count_all(
        [f"reset:address-client:{email}:{client}", f"reset:client:{client}", f"reset:address:{email}"],
        window)
    return (pair <= _setting("PASSWORD_RESETS_PER_ADDRESS_CLIENT", DEFAULT_RESETS_PER_ADDRESS_CLIENT)
            and per_client <= _setting("PASSWORD_RESETS_PER_CLIENT", DEFAULT_RESETS_PER_CLIENT)
            and per_address <= _setting("PASSWORD_RESETS_PER_ADDRESS", DEFAULT_RESETS_PER_ADDRESS))


@bp.route("/password/forgot", methods=["GET", "POST"])
@public("asking for a reset link: the same answer for every address, throttled like sign-in")
def forgot_password():
    """Ask for a reset link. The answer is the same whether or not the address has an account
    (and so is the throttle's): only the owner's inbox learns which."""
    if not accounts.owner_exists(db.session):
        return redirect(url_for("auth.setup"))  # a fresh install: nobody to reset yet
    answer = SteadyAnswer(_setting("PASSWORD_RESET_ANSWER_SECONDS", DEFAULT_RESET_ANSWER_SECONDS))
    form = ForgotForm()
    status = 200
    if form.validate_on_submit():
        email = form.email.data.strip().lower()
        if _reset_allowed(email):
            owner = accounts.owner_by_email(db.session, email)
            if owner is not None:
                message = _reset_links().email(owner)
                queue_transactional(db.session, get_jobs(), kind="password_reset",
                                    to_email=owner.email, subject=message.subject,
                                    html=message.html, text=message.text)
            session["password_reset_asked_for"] = email
            answer.wait()
            return redirect(url_for("auth.reset_sent"))
        form.form_errors.append(str(TOO_MANY_RESETS))
        status = 429
    elif form.errors:
        status = 422
    return render_template("auth/forgot.html", form=form), status


@bp.route("/password/forgot/sent")
@public("the reset request's answer page: words only, nobody's data")
def reset_sent():
    return render_template("auth/reset_sent.html", answer=str(SENT_ANSWER),
                           email=session.get("password_reset_asked_for"))


@bp.route("/password/reset/<token>", methods=["GET", "POST"])
@public("the signed single-use reset link is the credential (one hour, bound to the password)")
def reset_password(token: str):
    """Choose a new password by the emailed link. Opening the link changes nothing (mail
    scanners open links); setting the password uses it up and signs every other session out,
    and this browser is signed in afresh."""
    links = _reset_links()
    try:
        owner = links.owner_of(db.session, token)
    except ResetLinkRefused as refused:
        return _refused(refused)
    form = NewPasswordForm()
    if form.validate_on_submit():
        try:
            owner = accounts.set_password(db.session, owner.id, form.password.data,
                                          if_epoch=owner.session_epoch, if_hash=owner.password_hash)
        except accounts.PasswordChangedSince:
            return _refused(ResetLinkRefused("used"))  # the same link, submitted twice at once
        except DomainError as exc:
            form.password.errors.append(exc.message)
        else:
            sign_in(owner)
            flash(_("Your new password is set. Every other browser signed in to this account is "
                    "signed out."), "success")
            return redirect(url_for("dashboard.home"))
    return render_template("auth/reset_password.html", form=form, email=owner.email), \
        422 if form.errors else 200


# ResetLinkRefused's words (broadside.mail.password_reset.REFUSALS), in the page's language.
REFUSED_WORDS = {
    "expired": (_l("This link has expired"),
                _l("A reset link works for one hour after it is sent. Ask for a new one; it "
                   "arrives in a minute or two.")),
    "broken": (_l("This link is not complete"),
               _l("It may have been cut short or changed on its way from the email. Open it "
                  "again from the email, or ask for a new one.")),
    "used": (_l("This link was already used"),
             _l("It has already been used, or the password was changed after it was sent. If "
                "you still need a new password, ask for a new link.")),
}


def _refused(refused: ResetLinkRefused):
    status = 400 if refused.reason == "broken" else 410
    heading, message = REFUSED_WORDS.get(refused.reason, (refused.heading, refused.message))
    shown = {"heading": str(heading), "message": str(message)}
    return render_template("auth/reset_refused.html", refused=shown), status
