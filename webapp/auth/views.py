"""First-run setup, sign in and sign out."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_login import current_user, login_user, logout_user
from flask_wtf import FlaskForm
from wtforms import EmailField, PasswordField
from wtforms.validators import DataRequired, EqualTo, Length

from broadside import accounts
from broadside.errors import DomainError
from webapp import throttle
from webapp.extensions import db
from webapp.security import public

bp = Blueprint("auth", __name__)

# Failed sign-ins allowed per window before the form refuses, per address and per client IP.
FAILURES_PER_ACCOUNT = 5
FAILURES_PER_IP = 20
FAILURE_WINDOW_SECONDS = 15 * 60


class SetupForm(FlaskForm):
    email = EmailField("Email", validators=[DataRequired(), Length(max=320)])
    password = PasswordField(
        "Password", validators=[DataRequired(), Length(min=accounts.MIN_PASSWORD_LENGTH, max=200)]
    )
    confirm = PasswordField(
        "Repeat password", validators=[DataRequired(), EqualTo("password", "The passwords differ.")]
    )


class LoginForm(FlaskForm):
    email = EmailField("Email", validators=[DataRequired(), Length(max=320)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=200)])


def _safe_next(target: str | None) -> str:
    """Only same-site relative paths, so `next` cannot send the owner elsewhere."""
    if target and target.startswith("/") and not target.startswith("//"):
        parts = urlsplit(target)
        if not parts.scheme and not parts.netloc:
            return target
    return url_for("dashboard.home")


@bp.route("/setup", methods=["GET", "POST"])
@public
def setup():
    if accounts.owner_exists(db.session):
        abort(404)
    form = SetupForm()
    if form.validate_on_submit():
        try:
            owner = accounts.create_owner(db.session, form.email.data, form.password.data)
        except DomainError as exc:
            db.session.rollback()
            form.email.errors.append(exc.message)
        else:
            login_user(owner)
            flash("Welcome to Broadside. Create your first list to get started.", "success")
            return redirect(url_for("dashboard.home"))
    return render_template("auth/setup.html", form=form), 422 if form.errors else 200


@bp.route("/login", methods=["GET", "POST"])
@public
def login():
    if not accounts.owner_exists(db.session):
        return redirect(url_for("auth.setup"))
    if current_user.is_authenticated:
        return redirect(url_for("dashboard.home"))
    form = LoginForm()
    status = 200
    if form.validate_on_submit():
        email = form.email.data.strip().lower()
        ip = request.remote_addr or "unknown"
        account_bucket, ip_bucket = f"login:account:{email}", f"login:ip:{ip}"
        if throttle.is_limited(account_bucket, FAILURES_PER_ACCOUNT) or throttle.is_limited(
            ip_bucket, FAILURES_PER_IP
        ):
            form.form_errors.append(
                "Too many failed sign-ins. Wait 15 minutes, then try again."
            )
            status = 429
        else:
            owner = accounts.authenticate(db.session, email, form.password.data)
            if owner is not None:
                throttle.clear(account_bucket)
                login_user(owner)
                return redirect(_safe_next(request.args.get("next")))
            throttle.hit(account_bucket, FAILURES_PER_ACCOUNT, FAILURE_WINDOW_SECONDS)
            throttle.hit(ip_bucket, FAILURES_PER_IP, FAILURE_WINDOW_SECONDS)
            form.form_errors.append("That email and password do not match.")
            status = 401
    elif form.errors:
        status = 422
    return render_template("auth/login.html", form=form), status


@bp.route("/logout", methods=["POST"])
@public
def logout():
    logout_user()
    flash("You are signed out.", "info")
    return redirect(url_for("auth.login"))
