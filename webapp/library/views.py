"""The templates page and its acts.

- GET  /templates/                          the built-in and the owner's templates, each with
                                            its preview; the blocks page is beside it
- GET  /templates/<ref>/preview             a template as an email, for its iframe
- GET  /templates/<id>/edit, POST           rename, describe, change its design (colour,
                                            width, font, footer; validated as Settings ->
                                            Design); not the built-ins
- POST /templates/<id>/delete               not the built-ins
- GET  /templates/from-broadcast/<id>, POST "Save as template" from a broadcast, draft or sent
- POST /templates/broadcast/<id>/design     a draft takes Settings' design again

"New from template" is the broadcasts page's New draft form (its "Start from" choice).
"""

from __future__ import annotations

from flask import Response, current_app, flash, make_response, render_template, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from wtforms import SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice

from broadside.campaigns.broadcasts.service import get_broadcast, sender_of
from broadside.campaigns.content import design, previews, templates
from broadside.core.errors import DomainError
from broadside.core.i18n import _, _l
from broadside.mail.design import FONTS, MAX_WIDTH, MIN_WIDTH, current_design
from webapp.broadcasts.views import PREVIEW_CSP
from webapp.extensions import db
from webapp.forms import after_post, place_error
from webapp.library import bp

MAX_TYPED = 2_000  # longer than any valid value: the domain says what is too long


class EmptyForm(FlaskForm):
    """Only the CSRF token, for buttons that change state."""


class SaveAsForm(FlaskForm):
    name = StringField(_l("Template name"))
    description = StringField(_l("Description (optional)"))


class TemplateForm(FlaskForm):
    name = StringField(_l("Name"))
    description = StringField(_l("Description (optional)"))
    colour = StringField(_l("Colour"))
    width = StringField(_l("Width (pixels)"))
    font = SelectField(_l("Font"), validate_choice=False)
    footer_text = TextAreaField(_l("Footer text"))

    def design_values(self) -> dict[str, object]:
        return {key: (getattr(self, key).data or "")[:MAX_TYPED]
                for key in design.DESIGN_KEYS}


def _font_choices() -> list[SelectChoice]:
    return [SelectChoice("", _("As in Settings"))] + [SelectChoice(key, label)
                                                   for key, (label, _font) in FONTS.items()]


@bp.route("/")
def index():
    return render_template("library/index.html",
                           templates=templates.all_templates(db.session),
                           settings_design=current_design(db.session),
                           fonts=FONTS, action_form=EmptyForm())


@bp.route("/<ref>/preview")
def preview(ref: str) -> Response:
    """The template as an email for the sample reader, as a document of its own."""
    template = templates.find_template(db.session, ref)
    from_name, from_email, postal = sender_of(db.session, None, current_app.config["MAIL_FROM"])
    shown = previews.preview_template(db.session, template, from_name=from_name,
                                      from_email=from_email, postal_address=postal,
                                      sample_email=current_user.email)
    if shown.rendered is not None:
        response = make_response(shown.rendered.html)
    else:
        response = make_response(render_template("broadcasts/preview_problem.html",
                                                  problem=shown.problem))
    response.headers["Content-Security-Policy"] = PREVIEW_CSP
    response.headers["X-Frame-Options"] = "SAMEORIGIN"
    response.headers["Cache-Control"] = "no-store"
    return response


def _render_edit(template: templates.Template, form: TemplateForm, status: int = 200):
    form.font.choices = _font_choices()
    return render_template("library/edit.html", template=template, form=form,
                           settings_design=current_design(db.session), fonts=FONTS,
                           min_width=MIN_WIDTH, max_width=MAX_WIDTH,
                           action_form=EmptyForm()), status


@bp.route("/<int:message_template_id>/edit")
def edit(message_template_id: int):
    template = templates.find_template(db.session, message_template_id)  # never a built-in
    form = TemplateForm(formdata=None)
    form.name.data, form.description.data = template.name, template.description
    changes = design.design_changes(template.design_overrides)
    for key in design.DESIGN_KEYS:
        getattr(form, key).data = str(changes.get(key, ""))
    return _render_edit(template, form)


@bp.route("/<int:message_template_id>/edit", methods=["POST"])
def save(message_template_id: int):
    template = templates.find_template(db.session, message_template_id)
    form = TemplateForm()
    try:
        templates.update_template(db.session, message_template_id,
                                  name=(form.name.data or "")[:MAX_TYPED],
                                  description=(form.description.data or "")[:MAX_TYPED],
                                  design=form.design_values())
    except DomainError as exc:
        db.session.rollback()
        if exc.status_code == 404:
            raise
        place_error(form, exc)
        return _render_edit(template, form, 422)
    flash(_("Template saved. New broadcasts started from it take its design; drafts already "
            "started from it keep theirs."), "success")
    return after_post(url_for(".index"))


@bp.route("/<int:message_template_id>/delete", methods=["POST"])
def delete(message_template_id: int):
    name = templates.delete_template(db.session, message_template_id)
    flash(_("Template “%(name)s” deleted. Broadcasts started from it are unchanged.", name=name),
          "success")
    return after_post(url_for(".index"))


def _render_save_as(broadcast_id: int, form: SaveAsForm, status: int = 200):
    return render_template("library/save_as.html", form=form,
                           broadcast=get_broadcast(db.session, broadcast_id)), status


@bp.route("/from-broadcast/<int:broadcast_id>")
def save_as_form(broadcast_id: int):
    return _render_save_as(broadcast_id, SaveAsForm(formdata=None))


@bp.route("/from-broadcast/<int:broadcast_id>", methods=["POST"])
def save_as(broadcast_id: int):
    """Save as template: the broadcast's subject, preheader, body (its format and compose
    mode) and design changes, as they are saved."""
    form = SaveAsForm()
    try:
        row = templates.save_as_template(
            db.session, broadcast_id, name=(form.name.data or "")[:MAX_TYPED],
            description=(form.description.data or "")[:MAX_TYPED],
            created_by=current_user.id)
    except DomainError as exc:
        db.session.rollback()
        if exc.status_code == 404:
            raise
        place_error(form, exc)
        return _render_save_as(broadcast_id, form, 422)
    flash(_("Saved as the template “%(name)s”. Start a broadcast from it on the Broadcasts page.",
            name=row.name), "success")
    return after_post(url_for(".index"))


@bp.route("/broadcast/<int:broadcast_id>/design", methods=["POST"])
def reset_design(broadcast_id: int):
    templates.reset_design(db.session, broadcast_id)
    flash(_("This draft now takes the design in Settings."), "success")
    return after_post(url_for("broadcasts.edit", broadcast_id=broadcast_id))
