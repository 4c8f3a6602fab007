"""Settings -> Transactional templates: the owner's password resets, receipts and one-time codes,
sent one at a time through the API (`POST /api/transactional`; README, "Transactional API").

- GET  /settings/transactional              the live templates and the newest sends from them
- GET  /settings/transactional/new          a new template's form
- POST /settings/transactional/new          create it: 303 to its page; 422 with what was
                                            typed kept, the refusal under its field
- GET  /settings/transactional/<id>         edit, preview, test send, its newest sends
- POST /settings/transactional/<id>         save (a new revision only when what it sends
                                            changed: broadside.campaigns.transactional)
- POST /settings/transactional/<id>/preview        the preview pane for the sample `data`
                                                  typed (htmx; without JavaScript the
                                                  page with it); it writes nothing
- GET  /settings/transactional/<id>/preview/email  the email itself, for the pane's iframe
                                                  (`?data=`, short enough for an address)
- POST /settings/transactional/<id>/test    a test copy with the sample data; the status line
                                            polls like a broadcast's test send
- POST /settings/transactional/<id>/delete  mark it deleted (its sends stay listed)

The preview shows the template as saved: saving is what changes what the API sends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from flask import Response, current_app, flash, render_template, request, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from wtforms import BooleanField, RadioField, SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice

from broadside.campaigns.transactional import recent, samples, templates
from broadside.core.errors import DomainError
from broadside.core.i18n import _, _l
from broadside.core.models import TransactionalTemplate
from broadside.delivery import transactional
from broadside.delivery.identities.service import SendingIdentity, all_identities
from webapp.attachments.views import posted_ids
from webapp.broadcasts.views import PREVIEW_CSP
from webapp.extensions import db, get_jobs
from webapp.forms import after_post, place_error
from webapp.htmx import make_response
from webapp.identities.form import send_from_choices
from webapp.templating import num
from webapp.transactional import bp

# The iframe's address carries the sample data, and gunicorn refuses a request line over
# 4,094 bytes (webapp/gunicorn_worker.py): the data's share, once percent-encoded.
PREVIEW_DATA_BYTES = 2_000
# The form's names for the domain's fields (the API's JSON names).
ALIASES = {"identity_id": "identity", "text": "text_body"}
MAX_TYPED = 600_000  # longer than any valid value: the domain says what is too long


class TemplateForm(FlaskForm):
    name = StringField(_l("Name"), description=_l("Yours, and the API's: POST /api/transactional "
                                                   "names a template by it or by its id."))
    subject = StringField(_l("Subject"), description=_l("One line. Merge fields work here too."))
    body = TextAreaField(_l("Body"))
    editor = StringField(_l("Write in"))  # the compose mode: templates/transactional/_body_field.html
    # The plain-text part (templates/transactional/_text_field.html): made from the body, or
    # the owner's own words.
    text_mode = RadioField(_l("Plain-text part"),
                           choices=[SelectChoice("auto", _l("Automatic")),
                                    SelectChoice("own", _l("Write my own"))],
                           default="auto", validate_choice=False)
    text_body = TextAreaField(_l("The plain-text part"))
    identity = SelectField(_l("Send from"), validate_choice=False,
                           description=_l("The sending identity it goes out through, at its pace."))
    essential = BooleanField(_l("Essential"), description=_l(
        "It may reach someone who unsubscribed from your newsletters (a password reset, a "
        "receipt), but never a suppressed address (bounced, complained or blocked)."))

    def template_data(self) -> dict[str, Any]:
        """The form as `templates.parse_template` takes it (validation is the domain's)."""
        return {"name": (self.name.data or "")[:MAX_TYPED],
                "subject": (self.subject.data or "")[:MAX_TYPED],
                # Browsers post a textarea's line breaks as CRLF.
                "body": (self.body.data or "")[:MAX_TYPED].replace("\r\n", "\n"),
                "identity_id": _identity_choice(self.identity.data or ""),
                "essential": bool(self.essential.data),
                "attachments": self.posted_attachments(),
                "text": ((self.text_body.data or "")[:MAX_TYPED] or None
                         if self.text_mode.data == "own" else None)}

    attachment_ids: list[int] | None = None  # the attachments field's: as saved, or as posted

    def posted_attachments(self) -> list[int]:
        posted = posted_ids()
        if posted is not None:
            self.attachment_ids = posted
        return list(self.attachment_ids or [])


def _identity_choice(value: str) -> int | str | None:
    """"" is the default identity, digits an identity's id; anything else goes to the domain
    as it is, which refuses it under the select."""
    value = value.strip()
    if not value:
        return None
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 10 else value


def _identities() -> list[SendingIdentity]:
    return all_identities(db.session, current_app.config)


def _with_choices(form: TemplateForm, identities: list[SendingIdentity]) -> TemplateForm:
    form.identity.choices = send_from_choices(identities)
    return form


def _default_from() -> str:
    return current_app.config["MAIL_FROM"]


def identity_labels(identities: list[SendingIdentity]) -> dict[int | None, str]:
    return {identity.id: identity.label for identity in identities}


@bp.route("/")
def index():
    identities = _identities()
    return render_template("transactional/index.html",
                           rows=templates.list_templates(db.session),
                           labels=identity_labels(identities),
                           sends=recent.recent_sends(db.session))


@bp.route("/new")
def new():
    return _render_new(_with_choices(TemplateForm(formdata=None), _identities()))


def _render_new(form: TemplateForm, status: int = 200):
    return render_template("transactional/new.html", form=form), status


@bp.route("/new", methods=["POST"])
def create():
    form = _with_choices(TemplateForm(), _identities())
    try:
        template = templates.create_template(
            db.session, templates.parse_template(db.session, form.template_data(),
                                     editor=form.editor.data or None),
            default_from=_default_from())
    except DomainError as exc:
        db.session.rollback()
        place_error(form, exc, aliases=ALIASES)
        return _render_new(form, 422)
    flash(_("Template saved. Preview it with sample data and send yourself a test."), "success")
    return after_post(url_for(".show", template_id=template.id))


def _form_of(template: TransactionalTemplate, identities: list[SendingIdentity]) -> TemplateForm:
    form = _with_choices(TemplateForm(formdata=None, obj=template), identities)
    form.identity.data = "" if template.identity_id is None else str(template.identity_id)
    form.attachment_ids = list(template.attachment_ids or [])
    form.text_mode.data = "auto" if template.text_body is None else "own"
    return form


def render_page(template_id: int, *, form: TemplateForm | None = None,
                sample_text: str = "", status: int = 200):
    """The template's page: the form (as saved, or as typed after a refusal), its preview
    with the sample data, the test send and its newest sends."""
    template = templates.get_template(db.session, template_id)
    identities = _identities()
    return render_template(
        "transactional/show.html", template=template,
        form=form or _form_of(template, identities), labels=identity_labels(identities),
        revisions=recent.revisions_of(db.session, template_id),
        pane=preview_pane(template, sample_text),
        sends=recent.recent_sends(db.session, template_id=template_id),
    ), status


def preview_pane(template: TransactionalTemplate, sample_text: str) -> dict[str, Any]:
    """What the preview pane shows: the sample data as typed, and the email it gives or
    why there is none (the data's mistake, or a merge field that fails with it)."""
    pane: dict[str, Any] = {"template": template, "sample_text": sample_text,
                            "data_error": None, "preview": None}
    try:
        data = samples.parse_sample(sample_text)
    except DomainError as exc:
        pane["data_error"] = exc.message
        return pane
    if len(quote(sample_text)) > PREVIEW_DATA_BYTES:
        pane["data_error"] = _("The sample data is too long to preview: the preview carries it "
                               "in a web address, at most %(bytes)s bytes once encoded (a few "
                               "hundred characters of JSON). Shorten it; an API request's data "
                               "may be longer.", bytes=num(PREVIEW_DATA_BYTES))
        return pane
    pane["preview"] = samples.preview(db.session, template, data=data,
                                      sample_email=current_user.email,
                                      default_from=_default_from())
    return pane


@bp.route("/<int:template_id>")
def show(template_id: int):
    return render_page(template_id)


@bp.route("/<int:template_id>", methods=["POST"])
def save(template_id: int):
    templates.get_template(db.session, template_id)  # a deleted one's page is a 404
    form = _with_choices(TemplateForm(), _identities())
    try:
        templates.update_template(
            db.session, template_id, templates.parse_template(db.session, form.template_data(),
                                     editor=form.editor.data or None),
            default_from=_default_from())
    except DomainError as exc:
        db.session.rollback()
        if exc.status_code == 404:
            raise
        place_error(form, exc, aliases=ALIASES)
        return render_page(template_id, form=form, status=422)
    flash(_("Template saved. Messages sent from now on use it."), "success")
    return after_post(url_for(".show", template_id=template_id))


@bp.route("/<int:template_id>/delete", methods=["POST"])
def delete(template_id: int):
    templates.delete_template(db.session, template_id)
    flash(_("The template is deleted: the API can no longer send it. Its sends stay listed."),
          "success")
    return after_post(url_for(".index"))


def _sample(source: Mapping[str, str]) -> str:
    return (source.get("data") or "")[:samples.MAX_SAMPLE + 1]


@bp.route("/<int:template_id>/preview", methods=["POST"])
def preview(template_id: int):
    """A POST (the sample data may be longer than an address may carry, and a refusal must
    say so) that writes nothing."""
    template = templates.get_template(db.session, template_id)
    if not request.htmx:
        return render_page(template_id, sample_text=_sample(request.form))
    return render_template("transactional/_preview.html",
                           pane=preview_pane(template, _sample(request.form)))


@bp.route("/<int:template_id>/preview/email")
def preview_email(template_id: int) -> Response:
    """The email for the sample reader and data, as a document of its own for the iframe
    (with the email's own relaxed Content-Security-Policy, as a broadcast's preview)."""
    pane = preview_pane(templates.get_template(db.session, template_id), _sample(request.args))
    shown = pane["preview"]
    if shown is not None and shown.rendered is not None:
        response = make_response(shown.rendered.html)
    else:
        problem = pane["data_error"] or (shown.problem if shown else "")
        response = make_response(render_template("broadcasts/preview_problem.html",
                                                  problem=problem))
    response.headers["Content-Security-Policy"] = PREVIEW_CSP
    response.headers["X-Frame-Options"] = "SAMEORIGIN"
    response.headers["Cache-Control"] = "no-store"
    return response


class TestSendForm(FlaskForm):
    to_email = StringField(_l("Send a test to"))
    data = TextAreaField(_l("Sample data"))


@bp.route("/<int:template_id>/test", methods=["POST"])
def send_test(template_id: int):
    """One copy to any address, queued on the template's identity's stream as a test."""
    form = TestSendForm()
    address = (form.to_email.data or "").strip()[:400]
    error: DomainError | None = None
    test = None
    try:
        data = samples.parse_sample((form.data.data or "")[:samples.MAX_SAMPLE + 1])
        message_id = samples.send_test(db.session, template_id, address, data=data,
                                       default_from=_default_from(), jobs=get_jobs())
        test = transactional.queued_test(db.session, message_id)
    except DomainError as exc:
        db.session.rollback()
        if exc.status_code == 404:
            raise
        error = exc
    if request.htmx:
        return render_template("broadcasts/_test_status.html", status_id="test-status",
                               error=error.message if error else None, address=address,
                               test=test)
    if error:
        flash(_("Test not sent: %(reason)s", reason=error.message), "error")
    else:
        flash(_("Test queued for %(address)s: it arrives within a few seconds while the worker "
                "runs.", address=address.lower()), "success")
    return after_post(url_for(".show", template_id=template_id) + "#try")
