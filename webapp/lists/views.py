"""Owner pages for lists: index with counts, create, edit, sign-up toggle, delete."""

from __future__ import annotations

from flask import Blueprint, current_app, flash, redirect, render_template, url_for
from flask_wtf import FlaskForm
from wtforms import BooleanField, StringField, TextAreaField
from wtforms.validators import DataRequired, Length

from broadside.audience import lists
from broadside.core import roles
from broadside.core.errors import Conflict, DomainError, NotFound
from webapp.extensions import db
from webapp.forms import after_post, place_error
from webapp.permissions import defaults

bp = Blueprint("lists", __name__, url_prefix="/lists")
defaults(bp, read=roles.VIEW, change=roles.MANAGE)


class ListForm(FlaskForm):
    name = StringField("Name", validators=[DataRequired(), Length(max=lists.MAX_NAME)])
    description = TextAreaField("Description", validators=[Length(max=lists.MAX_DESCRIPTION)])
    signup_enabled = BooleanField("Public sign-up form")


class ConfirmForm(FlaskForm):
    """Only the CSRF token: for buttons that change state."""


@bp.route("/")
def index():
    return render_template("lists/index.html", summaries=lists.list_summaries(db.session),
                           form=ListForm(formdata=None))


@bp.route("/", methods=["POST"])
def create():
    form = ListForm()
    if form.validate_on_submit():
        try:
            created = lists.create_list(db.session, form.name.data, form.description.data,
                                          form.signup_enabled.data)
        except DomainError as exc:
            db.session.rollback()
            place_error(form, exc)
        else:
            flash(f"“{created.name}” is ready. "
                  + ("Its sign-up form is open; add the people you already have by importing a CSV."
                     if created.signup_enabled else
                     "Add people by importing a CSV, or open a sign-up form under Settings."),
                  "success")
            return after_post(url_for("lists.show", list_id=created.id))
    return render_template("lists/index.html", summaries=lists.list_summaries(db.session),
                           form=form), 422


def _render_show(list_id: int, form: ListForm | None = None, status: int = 200):
    summary = lists.list_summary(db.session, list_id)
    if form is None:
        form = ListForm(obj=summary.list)
    imports = lists.recent_imports(db.session, list_id)
    return render_template(
        "lists/show.html", summary=summary, form=form, imports=imports,
        base_url=current_app.config["BASE_URL"],
    ), status


@bp.route("/<int:list_id>")
def show(list_id: int):
    return _render_show(list_id)


@bp.route("/<int:list_id>", methods=["POST"])
def update(list_id: int):
    form = ListForm()
    if form.validate_on_submit():
        try:
            lists.update_list(db.session, list_id, name=form.name.data,
                                description=form.description.data,
                                signup_enabled=form.signup_enabled.data)
        except NotFound:
            raise
        except DomainError as exc:
            db.session.rollback()
            place_error(form, exc)
        else:
            flash("Saved.", "success")
            return after_post(url_for("lists.show", list_id=list_id))
    return _render_show(list_id, form, 422)


@bp.route("/<int:list_id>/delete")
def confirm_delete(list_id: int):
    summary = lists.list_summary(db.session, list_id)
    busy = lists.busy_broadcasts(db.session, list_id)
    return render_template("lists/delete.html", summary=summary, busy=busy, form=ConfirmForm())


@bp.route("/<int:list_id>/delete", methods=["POST"])
def delete(list_id: int):
    form = ConfirmForm()
    if not form.validate_on_submit():
        return redirect(url_for("lists.confirm_delete", list_id=list_id))
    try:
        name = lists.delete_list(db.session, list_id)
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for("lists.confirm_delete", list_id=list_id))
    flash(f"“{name}” is deleted. The people on it are still in Subscribers.", "success")
    return redirect(url_for("lists.index"))
