"""Owner pages for lists: index with counts, create, edit, sign-up toggle, delete."""

from __future__ import annotations

from flask import Blueprint, current_app, flash, redirect, render_template, url_for
from flask_wtf import FlaskForm
from wtforms import BooleanField, SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import DataRequired, Length

from broadside.audience import lists
from broadside.core import roles
from broadside.core.errors import Conflict, DomainError, NotFound
from broadside.core.i18n import LOCALE_NAMES, _, _l
from webapp.extensions import db
from webapp.forms import after_post, place_error
from webapp.permissions import defaults

bp = Blueprint("lists", __name__, url_prefix="/lists")
defaults(bp, read=roles.VIEW, change=roles.MANAGE)


class ListForm(FlaskForm):
    name = StringField(_l("Name"), validators=[DataRequired(), Length(max=lists.MAX_NAME)])
    description = TextAreaField(_l("Description"),
                                validators=[Length(max=lists.MAX_DESCRIPTION)])
    signup_enabled = BooleanField(_l("Public sign-up form"))
    # Checked by the domain (lists.clean_language): a tag it does not know is said there.
    language = SelectField(_l("Language of its readers"), validate_choice=False,
                           description=_l("What its sign-up and unsubscribe pages and its "
                                          "confirmation email are in for readers who have not "
                                          "chosen a language."))


def language_choices(current: str | None) -> list[SelectChoice]:
    """Settings' default, the shipped languages, and the list's own when it is another."""
    choices = [SelectChoice("", _("Settings' default")),
               *(SelectChoice(tag, name) for tag, name in LOCALE_NAMES.items())]
    if current and current not in LOCALE_NAMES:
        choices.append(SelectChoice(current, current))
    return choices


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
            flash(_("“%(name)s” is ready. Its sign-up form is open; add the people you already "
                    "have by importing a CSV.", name=created.name) if created.signup_enabled else
                  _("“%(name)s” is ready. Add people by importing a CSV, or open a sign-up form "
                    "under Settings.", name=created.name), "success")
            return after_post(url_for("lists.show", list_id=created.id))
    return render_template("lists/index.html", summaries=lists.list_summaries(db.session),
                           form=form), 422


def _render_show(list_id: int, form: ListForm | None = None, status: int = 200):
    summary = lists.list_summary(db.session, list_id)
    if form is None:
        form = ListForm(obj=summary.list)
        form.language.data = summary.list.language or ""
    form.language.choices = language_choices(summary.list.language)
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
                                signup_enabled=form.signup_enabled.data,
                                language=form.language.data or None)
        except NotFound:
            raise
        except DomainError as exc:
            db.session.rollback()
            place_error(form, exc)
        else:
            flash(_("Saved."), "success")
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
    flash(_("“%(name)s” is deleted. The people on it are still in Subscribers.", name=name),
          "success")
    return redirect(url_for("lists.index"))
