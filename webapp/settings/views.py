"""Settings: sender identity and postal address, the pace in force, and API tokens."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from wtforms import StringField
from wtforms.validators import DataRequired, Length

from webapp import accounts
from webapp.errors import DomainError
from webapp.extensions import db

bp = Blueprint("settings", __name__, url_prefix="/settings")


class TokenForm(FlaskForm):
    name = StringField("Token name", validators=[DataRequired(), Length(max=100)])


class EmptyForm(FlaskForm):
    """A form with only the CSRF token, for buttons that change state."""


@bp.route("/")
def index():
    return render_template(
        "settings/index.html",
        tokens=accounts.list_tokens(db.session),
        token_form=TokenForm(),
        action_form=EmptyForm(),
        new_token=None,
    )


@bp.route("/tokens", methods=["POST"])
def create_token():
    form = TokenForm()
    new_token = None
    if form.validate_on_submit():
        try:
            _, new_token = accounts.create_token(db.session, current_user.id, form.name.data)
        except DomainError as exc:
            form.name.errors.append(exc.message)
    status = 201 if new_token else 422
    return render_template(
        "settings/index.html",
        tokens=accounts.list_tokens(db.session),
        token_form=TokenForm(formdata=None) if new_token else form,
        action_form=EmptyForm(),
        new_token=new_token,
    ), status


@bp.route("/tokens/<int:token_id>/revoke", methods=["POST"])
def revoke_token(token_id: int):
    if EmptyForm().validate_on_submit():
        accounts.revoke_token(db.session, token_id)
        flash("The token is revoked; requests that use it are now refused.", "success")
    return redirect(url_for("settings.index"))
