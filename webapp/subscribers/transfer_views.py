"""CSV in and out: the import form, its progress and summary, and the streamed exports."""

from __future__ import annotations

import re

from flask import (
    Response,
    current_app,
    render_template,
    request,
    stream_with_context,
    url_for,
)
from flask_wtf import FlaskForm
from flask_wtf.file import FileField, FileRequired
from werkzeug.exceptions import RequestEntityTooLarge
from wtforms import BooleanField, RadioField, SelectField
from wtforms.fields.choices import SelectChoice

from broadside.audience.lists import all_lists, get_list
from broadside.audience.transfer import export, importer
from broadside.audience.transfer import report as import_report
from broadside.core.errors import DomainError
from broadside.core.i18n import _, _l
from broadside.segments.service import get_segment
from webapp.address_warnings import identities_without_smtputf8
from webapp.extensions import db, get_jobs
from webapp.forms import after_post, place_error
from webapp.htmx import STOP_POLLING
from webapp.params import int_arg
from webapp.permissions import allow
from webapp.subscribers import bp
from webapp.subscribers.filters import current_filters

# Files up to this size are imported during the upload request; bigger ones go to the worker.
DEFAULT_INLINE_IMPORT_BYTES = 1024 * 1024
CONSENT_MISSING = _l("Choose how these people agreed to receive mail: nothing is imported "
                     "until you say.")


class ImportForm(FlaskForm):
    list_id = SelectField(_l("Into list"), coerce=int)
    file = FileField(_l("CSV file"), validators=[FileRequired(_l("Choose a CSV file to upload."))])
    # No default: whether these people get a confirmation email is the owner's to say.
    consent = RadioField(_l("How did these people agree to receive mail?"), choices=[
        SelectChoice("opted_in", _l("They already opted in")),
        SelectChoice("confirm", _l("Ask them to confirm")),
    ], invalid_choice_message=CONSENT_MISSING, render_kw={"required": True})
    # Off by default: importing an existing audience must never mail it.
    welcome = BooleanField(_l("Send the welcome series to the people this import adds"),
                           default=False)


def _import_form(formdata: bool = True) -> ImportForm:
    # After a 413 the request body cannot be read again: build the form without it.
    form = ImportForm() if formdata else ImportForm(formdata=None)
    form.list_id.choices = [(item.id, item.name) for item in all_lists(db.session)]
    if request.method == "GET" and (list_id := int_arg("list")) is not None:
        form.list_id.data = list_id
    # Choosing another list tells, before any upload, who its welcome series would reach.
    form.list_id.render_kw = {"hx-get": url_for("subscribers.import_welcome_hint"),
                              "hx-target": "#welcome-hint", "hx-swap": "outerHTML"}
    return form


def _chosen_list(form: ImportForm) -> int | None:
    if form.list_id.data in {choice[0] for choice in form.list_id.choices or []}:
        return form.list_id.data
    return form.list_id.choices[0][0] if form.list_id.choices else None


def _render_import(form: ImportForm, status: int = 200):
    return render_template(
        "subscribers/import.html", form=form,
        max_bytes=current_app.config["MAX_IMPORT_BYTES"],
        welcome_series=import_report.welcome_series(db.session, _chosen_list(form)),
    ), status


@bp.route("/import/welcome-hint")
def import_welcome_hint():
    """htmx: the welcome checkbox's line about the list chosen (`list_id`)."""
    list_id = int_arg("list_id")
    return render_template("subscribers/_welcome_hint.html",
                           welcome_series=import_report.welcome_series(db.session, list_id))


@bp.route("/import", methods=["GET", "POST"])
def import_csv():
    form = _import_form()
    if form.validate_on_submit():
        upload = form.file.data
        try:
            record = importer.start_import(
                db.session, form.list_id.data, upload.filename or "", upload.stream,
                instance_path=current_app.instance_path,
                max_bytes=current_app.config["MAX_IMPORT_BYTES"],
                inline_max_bytes=current_app.config.get(
                    "IMPORT_INLINE_MAX_BYTES", DEFAULT_INLINE_IMPORT_BYTES),
                enqueue=get_jobs().enqueue_import, consent=form.consent.data,
                welcome=bool(form.welcome.data),
            )
        except DomainError as exc:
            db.session.rollback()
            # Every refusal but the list's and the consent's is about the file.
            place_error(form, exc if exc.field else DomainError(exc.message, field="file"))
        else:
            return after_post(url_for("subscribers.import_status", import_id=record.id))
    return _render_import(form, 422 if form.errors else 200)


@bp.errorhandler(RequestEntityTooLarge)
def upload_too_large(_exc):
    form = _import_form(formdata=False)
    limit = current_app.config["MAX_IMPORT_BYTES"]
    form.file.errors = [_("The file is larger than the import limit of %(mb)s MB.",
                          mb=f"{limit / 1048576:.0f}")]
    return _render_import(form, 413)


@bp.route("/imports/<int:import_id>")
def import_status(import_id: int):
    state = import_report.progress(db.session, import_id, current_app.instance_path)
    return render_template(
        "subscribers/import_status.html", state=state,
        rejections=import_report.first_rows(db.session, import_id, "rejected"),
        warnings=import_report.first_rows(db.session, import_id, "warning"),
        columns=import_report.columns_of(state.record), kept_limit=import_report.MAX_KEPT_ROWS,
        **_outcome(state),
    )


def _outcome(state: import_report.Progress) -> dict:
    """What the result says beyond the counts: the blank lines skipped, and the welcome
    series a `welcome` import's people would enter on confirming."""
    record = state.record
    smtputf8 = import_report.smtputf8_rows(db.session, record.id) if record.warnings else 0
    return {"smtputf8_rows": smtputf8,
            "smtputf8_unreachable": identities_without_smtputf8() if smtputf8 else [],
            "empty_lines": import_report.empty_lines(db.session, record.id)
            if record.empty_rows else [],
            "welcome_series": import_report.welcome_series(db.session, record.list_id)
            if record.welcome else []}


@bp.route("/imports/<int:import_id>/progress")
def import_progress(import_id: int):
    state = import_report.progress(db.session, import_id, current_app.instance_path)
    html = render_template("subscribers/_import_progress.html", state=state, **_outcome(state))
    # The import is over: tell htmx to stop polling.
    return html, STOP_POLLING if state.finished else 200


def _csv_response(chunks, filename: str) -> Response:
    response = Response(stream_with_context(chunks), mimetype="text/csv")
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.route("/imports/<int:import_id>/rejections.csv")
@allow("manage")
def import_rejections(import_id: int):
    record = import_report.get_import(db.session, import_id)
    return _csv_response(import_report.rejections_csv(db.session, record),
                         f"import-{import_id}-rejected-rows.csv")


@bp.route("/export.csv")
@allow("manage")
def export_csv():
    filters = current_filters()
    name = "subscribers"
    if filters.list_id:
        slug = re.sub(r"[^a-z0-9]+", "-", get_list(db.session, filters.list_id).name.lower())
        name = f"{name}-{slug.strip('-') or filters.list_id}"
    if filters.segment_id:
        segment = get_segment(db.session, filters.segment_id)  # 404 for a segment that is gone
        slug = re.sub(r"[^a-z0-9]+", "-", segment.name.lower())
        name = f"{name}-{slug.strip('-') or filters.segment_id}"
    return _csv_response(export.export_subscribers(db.session, filters), f"{name}.csv")
