"""Broadcast pages: the list, new drafts, the editor with its live preview, duplicate.

The preview is the real email from broadside.mail.rendering, shown in a sandboxed iframe whose
document has its own, relaxed Content-Security-Policy (the email's CSS is inline by nature);
our own pages keep the strict one. The pane's routes are webapp/broadcasts/preview_views.py.
"""

from __future__ import annotations

from flask import (
    current_app,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_wtf import FlaskForm
from sqlalchemy import select
from wtforms import BooleanField, RadioField, SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice

from broadside.campaigns.broadcasts import compaction, drafts, evidence
from broadside.campaigns.broadcasts.progress import read_progress
from broadside.campaigns.content import templates as content_templates
from broadside.campaigns.content.versions import written_versions
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _, _l
from broadside.core.models import Revision
from broadside.core.site_settings import get_settings
from broadside.delivery.identities.service import all_identities
from webapp.attachments.views import save_draft_attachments
from webapp.broadcasts import bp
from webapp.broadcasts.preview_views import PREVIEW_CSP, pane_context, preview_for  # noqa: F401 - PREVIEW_CSP: other previews import it here
from webapp.compose import ab_tests
from webapp.compose.languages import posted_versions
from webapp.extensions import db
from webapp.forms import after_post
from webapp.htmx import make_response
from webapp.identities.form import send_from_choices
from webapp.params import int_arg
from webapp.permissions import allow
from webapp.readiness import sending_readiness


class NewDraftForm(FlaskForm):
    # "list:ID" or "segment:ID" (drafts.parse_audience)
    audience = SelectField(_l("Send to"), validate_choice=False)
    # "" blank, or a template's value (broadside.campaigns.content.templates: "builtin:letter")
    template = SelectField(_l("Start from"), validate_choice=False)


class ComposeForm(FlaskForm):
    audience = SelectField(_l("Send to"), validate_choice=False)
    # On the page only when there is more than the default identity ("" is the default).
    identity = SelectField(_l("Send from"), validate_choice=False)
    skip_hours = StringField(_l("Skip anyone who received a broadcast in the last … hours"))
    subject = StringField(_l("Subject"))
    preheader = StringField(_l("Preheader"))
    body = TextAreaField(_l("Body"))
    editor = StringField(_l("Write in"))  # the compose mode: templates/broadcasts/_body_field.html
    codes = BooleanField(_l("Mint a code per recipient"))  # drawn by templates/_codes_field.html
    codes_prefix = StringField(_l("Prefix"))
    # The plain-text part (templates/broadcasts/_text_field.html): made from the body, or the
    # owner's own words.
    text_mode = RadioField(_l("Plain-text part"), choices=[SelectChoice("auto", _l("Automatic")),
                                                           SelectChoice("own", _l("Write my own"))],
                           default="auto", validate_choice=False)
    text_body = TextAreaField(_l("The plain-text part"))

    def draft_values(self) -> dict:
        """The form as `drafts.update_draft` keywords (validation is the domain's)."""
        list_id, segment_id = drafts.parse_audience(self.audience.data)
        values = {"list_id": list_id, "segment_id": segment_id,
                  "skip_if_received_within_hours": (self.skip_hours.data or "").strip(),
                  "subject": self.subject.data or "", "preheader": self.preheader.data or "",
                  "body": self.body.data or "",
                  # Typed in any case: codes are capitals (the API takes them only so).
                  "codes_prefix": (self.codes_prefix.data or "").strip().upper()
                  if self.codes.data else None}
        if self.editor.raw_data:  # posted: the mode switch was on the page
            values["editor"] = self.editor.raw_data[0]
        if self.identity.raw_data:  # posted: the select was on the page
            values["identity_id"] = _identity_choice(self.identity.raw_data[0])
        if self.text_mode.raw_data:  # posted: the plain-text field was on the page
            values["text_body"] = (self.text_body.data or None
                                   if self.text_mode.raw_data[0] == "own" else None)
        versions = posted_versions(request.form)
        if versions is not None:  # posted: the versions were on the page
            values["versions"] = versions
        return values


def _identity_choice(value: str) -> int | str | None:
    """The "Send from" value as `identity_id`: "" is the default, digits an identity's id;
    anything else goes to the domain as it is, which refuses it with a message."""
    value = (value or "").strip()
    if not value:
        return None
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 10 else value


class EmptyForm(FlaskForm):
    """Only the CSRF token, for buttons that change state."""


def _with_lists(form):
    """The "send to" choice: lists, then segments (an optgroup each); and, on the editor, the
    "send from" choice: the default identity, then the others."""
    groups: dict[str, list[tuple[str, str]]] = {"": [("", _("Choose a list or a segment…"))]}
    names = {"Lists": _("Lists"), "Segments": _("Segments")}
    for group, value, label in drafts.audience_options(db.session):
        groups.setdefault(names.get(group, group), []).append((value, label))
    form.audience.choices = groups
    if isinstance(form, NewDraftForm):
        form.template.choices = _template_choices()
    if isinstance(form, ComposeForm):
        form.identity.choices = send_from_choices(all_identities(db.session, current_app.config))
    return form


def _template_choices() -> dict[str, list[tuple[str, str]]]:
    """"Start from": a blank page, the built-in templates, the owner's own."""
    groups: dict[str, list[tuple[str, str]]] = {"": [("", _("A blank page"))]}
    for template in content_templates.all_templates(db.session):
        group = _("Built-in templates") if template.built_in else _("Your templates")
        groups.setdefault(group, []).append((template.ref, template.name))
    return groups


@bp.route("/")
def index():
    form = NewDraftForm(formdata=None)
    form.template.data = request.args.get("template", "")  # "Start a broadcast from it"
    return _render_index(form)


def _render_index(new_form: NewDraftForm, status: int = 200):
    listing = drafts.list_broadcasts(db.session, page=int_arg("page", 1, minimum=1, maximum=1_000_000) or 1)
    return render_template("broadcasts/index.html", listing=listing,
                           new_form=_with_lists(new_form), action_form=EmptyForm()), status


@bp.route("/new", methods=["POST"])
@allow("write")
def new():
    form = _with_lists(NewDraftForm())
    try:
        list_id, segment_id = drafts.parse_audience(form.audience.data)
        template = (content_templates.find_template(db.session, form.template.data)
                    if form.template.data else None)
        broadcast = drafts.create_draft(db.session, list_id=list_id, segment_id=segment_id)
        if template is not None:  # "new from template": the draft filled from it
            content_templates.apply_template(db.session, broadcast.id, template.ref)
    except (ValidationError, NotFound) as exc:
        db.session.rollback()
        (form.template if isinstance(exc, NotFound) else form.audience).errors = [exc.message]
        return _render_index(form, 422)
    return after_post(url_for(".edit", broadcast_id=broadcast.id))


@bp.route("/<int:broadcast_id>")
def show(broadcast_id: int):
    view, picked = request.args.get("view"), request.args.get("as")
    preview, as_problem = preview_for(broadcast_id, picked=picked)
    if preview.broadcast.status == "draft":
        return redirect(url_for(".edit", broadcast_id=broadcast_id))

    identity_id = preview.broadcast.identity_id
    progress = read_progress(db.session, broadcast_id,
                             send_delay_ms=int(current_app.config.get("SEND_DELAY_MS") or 0))
    # Only while it could move: "the worker is not running" beats a bar that never moves.
    stopped = (sending_readiness(identity_id=identity_id).problem
               if progress.status in ("scheduled", "queued", "sending") else None)
    return render_template("broadcasts/show.html", preview=preview, broadcast=preview.broadcast,
                           list_name=drafts.audience_name(db.session, preview.broadcast),
                           action_form=EmptyForm(), p=progress, sending_problem=stopped,
                           retry_transient=evidence.offers_transient_retry(db.session, progress),
                           **pane_context(view, picked, as_problem),
                           page=evidence.delivery_page(db.session, broadcast_id, per_page=20),
                           compacted=compaction.last_compaction(db.session, broadcast_id),
                           versions=_versions_shown(preview.broadcast))


def _versions_shown(broadcast) -> list:
    """A sent broadcast's versions, the default first: as frozen at Send when they were, else
    as written."""
    revision = db.session.scalar(select(Revision).where(Revision.broadcast_id == broadcast.id))
    if revision is not None and revision.versions:
        return written_versions(revision)
    return [{"locale": get_settings(db.session).default_language, "subject": broadcast.subject,
             "preheader": broadcast.preheader}, *(broadcast.versions or [])]


@bp.route("/<int:broadcast_id>/edit")
def edit(broadcast_id: int):
    view, picked = request.args.get("view"), request.args.get("as")
    preview, as_problem = preview_for(broadcast_id, check_fields=True, picked=picked)
    if preview.broadcast.status == "scheduled":
        flash(_("This broadcast is scheduled. Cancel the schedule to edit it again."), "info")
        return redirect(url_for(".show", broadcast_id=broadcast_id))
    if preview.broadcast.status != "draft":
        flash(_("This broadcast has been sent, so it can no longer change. "
                "Duplicate it to write a new one."), "info")
        return redirect(url_for(".show", broadcast_id=broadcast_id))
    form = _with_lists(ComposeForm(formdata=None, obj=preview.broadcast))
    form.audience.data = drafts.audience_value(preview.broadcast)
    identity_id = preview.broadcast.identity_id
    form.identity.data = "" if identity_id is None else str(identity_id)
    cap = preview.broadcast.skip_if_received_within_hours
    form.skip_hours.data = str(cap) if cap else ""
    form.codes.data = preview.broadcast.codes_prefix is not None
    form.codes_prefix.data = preview.broadcast.codes_prefix or ""
    form.text_mode.data = "auto" if preview.broadcast.text_body is None else "own"
    return _render_edit(form, preview, pane=pane_context(view, picked, as_problem))


def _render_edit(form: ComposeForm, preview: drafts.DraftPreview, error: str | None = None,
                 status: int = 200, pane: dict | None = None, error_field: str | None = None):
    pane = pane or pane_context(request.form.get("preview_view"), request.form.get("preview_as"))
    # Refused: the versions as typed (kept for another try); else as saved.
    versions = (posted_versions(request.form) if error else None)
    # "Add a version" (a link: ?add_version=1), or a refused one typed there: its fields.
    return render_template("broadcasts/edit.html", form=form, preview=preview,
                           broadcast=preview.broadcast, error=error, action_form=EmptyForm(),
                           versions=preview.broadcast.versions or [] if versions is None
                           else versions, versions_error=error if error_field == "versions"
                           else None, default_locale=get_settings(db.session).default_language,
                           adding_version=bool(request.args.get("add_version")), error_field=error_field,
                           **pane), status


@bp.route("/<int:broadcast_id>/edit", methods=["POST"])
@allow("write")
def save(broadcast_id: int):
    """The Save button (and the whole editor without JavaScript)."""
    form = _with_lists(ComposeForm())
    try:
        save_draft_attachments(broadcast_id)
        ab_tests.stage_posted(db.session, broadcast_id, request.form)  # committed with the draft
        drafts.update_draft(db.session, broadcast_id, **form.draft_values())
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for(".show", broadcast_id=broadcast_id))
    except ValidationError as exc:
        db.session.rollback()
        preview, _problem = preview_for(broadcast_id, check_fields=True,
                                 picked=request.form.get("preview_as"))
        return _render_edit(form, preview, error=exc.message, status=422, error_field=exc.field)
    flash(_("Draft saved."), "success")
    return after_post(url_for(".edit", broadcast_id=broadcast_id))


@bp.route("/<int:broadcast_id>/autosave", methods=["POST"])
@allow("write")
def autosave(broadcast_id: int):
    """HTMX: save as the owner types, answer with the refreshed preview pane."""
    form = ComposeForm()
    picked = request.form.get("preview_as")
    try:
        save_draft_attachments(broadcast_id)
        ab_tests.stage_posted(db.session, broadcast_id, request.form, typing=True)
        drafts.update_draft(db.session, broadcast_id, **form.draft_values())
        preview, as_problem = preview_for(broadcast_id, check_fields=True, picked=picked)
    except (ValidationError, Conflict) as exc:
        db.session.rollback()
        # Keep the last good preview on screen; show the problem next to the Save button.
        return make_response(
            render_template("broadcasts/_save_status.html", error=exc.message),
            exc.status_code, retarget="#save-status", reswap="outerHTML")
    return render_template("broadcasts/_preview.html", preview=preview,
                           broadcast=preview.broadcast, saved=True,
                           **pane_context(request.form.get("preview_view"), picked, as_problem))


@bp.route("/<int:broadcast_id>/duplicate", methods=["POST"])
@allow("write")
def duplicate(broadcast_id: int):
    copy = drafts.duplicate(db.session, broadcast_id)
    flash(_("This is a new draft copied from the original; nothing has been sent."), "success")
    return redirect(url_for(".edit", broadcast_id=copy.id))
