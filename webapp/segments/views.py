"""Segments pages (routes on `webapp.segments.bp`, all for the signed-in owner):

    GET  /segments/                     the segments: name, the rules in a sentence, and the
                                        count, which each row loads for itself (hx-trigger=
                                        "load") so a slow count never holds the page
    GET  /segments/<id>/people          who a segment reaches: the count (to htmx), or a page
                                        with the count and the newest ten people
    GET  /segments/new, /<id>/edit      the rule builder: one form (`builder` names its fields)
                                        beside a live preview
    POST /segments/new, /<id>/edit      the form's buttons. Save validates through the domain
                                        and writes in one commit or not at all (422, the posted
                                        rules kept); every other button (add, remove, load JSON,
                                        update preview) re-renders the page and saves nothing:
                                        the whole builder works without JavaScript
    POST /segments/builder              htmx: the same buttons, answered with the builder only
    POST /segments/builder/row/<path>   htmx: one condition, after its field or operator changed
    POST /segments/builder/json         static/segments.js: the rules the posted builder holds,
                                        as the "Edit as JSON" box shows them ({"rules_json"})
    POST /segments/preview              htmx: the live preview, the count and a sample or why
                                        the rules are not ready; it never saves
    POST /segments/<id>/duplicate       a copy, then its builder
    GET/POST /segments/<id>/delete      a confirmation, then the delete (refused with the
                                        domain's reason while a broadcast is about to use it)

After the builder or a condition is swapped in, the response asks the preview to refresh
(`HX-Trigger-After-Settle`), so the count always follows what is on the screen.
"""

from __future__ import annotations

import json
from typing import Any

from flask import abort, flash, redirect, render_template, url_for
from flask_wtf import FlaskForm
from wtforms import StringField

from broadside.core.errors import Conflict, DomainError, NotFound
from broadside.core.i18n import _
from broadside.core.models import Segment
from broadside.segments import lookups as segment_lookups
from broadside.segments import service
from broadside.segments.engagement import FIELD_OPERATOR_LABELS
from broadside.segments.engagement import OPERATORS as ENGAGEMENT
from broadside.segments.rules import FIELD_LABELS, MAX_DEPTH, OPERATOR_LABELS
from webapp.extensions import db
from webapp.forms import after_post
from webapp.htmx import make_response, request, vary_on_htmx
from webapp.permissions import allow
from webapp.segments import bp, builder, describe, lookups, submission

# Sent with every swapped builder or condition: refresh the preview once the swap settled.
REFRESH_PREVIEW = json.dumps({"segment-changed": {"target": "#preview-result"}})

class SegmentForm(FlaskForm):
    """The name and the CSRF token; the builder's fields are read by `submission.read_form`."""

    name = StringField("Name")


class ConfirmForm(FlaskForm):
    """Only the CSRF token: for buttons that change state."""


@bp.route("/")
def index():
    segments = service.all_segments(db.session)
    return render_template("segments/index.html", segments=segments,
                           summaries=describe.summaries(db.session, segments),
                           action_form=ConfirmForm())


@bp.route("/<int:segment_id>/people")
def people(segment_id: int):
    segment = service.get_segment(db.session, segment_id)
    count = service.count_matching(db.session, segment)
    if request.htmx and not request.htmx.boosted:
        page = render_template("segments/_count.html", segment=segment, count=count)
    else:
        page = render_template("segments/people.html", segment=segment, count=count,
                               people=service.sample(db.session, segment),
                               summary=describe.summaries(db.session, [segment])[segment.id])
    return vary_on_htmx(make_response(page))


# ------------------------------------------------------------------ the builder


def _builder_context(view: submission.Shown, error: str | None = None, *,
                     attribute_names: bool = True) -> dict[str, Any]:
    return {"view": view, "tree": view.tree, "error": error,
            "error_path": builder.error_path(error), "focus": view.focus,
            "choices": lookups.choices(db.session, view.tree, attribute_names=attribute_names),
            "fields": FIELD_LABELS, "op_labels": OPERATOR_LABELS, "max_depth": MAX_DEPTH,
            "engagement_fields": ENGAGEMENT, "field_op_labels": FIELD_OPERATOR_LABELS}


def _editor(segment: Segment | None, form: SegmentForm, view: submission.Shown, *,
            error: str | None = None, preview: dict[str, Any] | None = None, status: int = 200):
    used_by = segment_lookups.broadcasts_using(db.session, segment.id) if segment else []
    return render_template("segments/edit.html", segment=segment, form=form, preview=preview,
                           used_by=used_by, **_builder_context(view, error)), status


@bp.route("/new")
def new():
    return _editor(None, SegmentForm(formdata=None), submission.shown(builder.starting_tree()))


@bp.route("/<int:segment_id>/edit")
def edit(segment_id: int):
    segment = service.get_segment(db.session, segment_id)
    # Stored rules passed `rules.parse`, which accepts less than `from_rules` does.
    return _editor(segment, SegmentForm(formdata=None, obj=segment),
                   submission.shown(builder.from_rules(segment.rules)))


@bp.route("/new", methods=["POST"])
@allow("write")
def create():
    return _submit(None)


@bp.route("/<int:segment_id>/edit", methods=["POST"])
@allow("write")
def update(segment_id: int):
    return _submit(service.get_segment(db.session, segment_id))


def _submit(segment: Segment | None):
    form = SegmentForm()
    if not form.validate_on_submit():
        abort(400)
    posted = submission.read_form(request.form)
    action = request.form.get("action") or "save"
    if action == "preview":
        return _editor(segment, form, submission.shown(posted.shown_tree(), posted),
                       preview=_preview(posted))
    if action != "save":
        return _editor(segment, form, submission.press(posted, action))
    view = submission.shown(posted.shown_tree(), posted)
    if posted.problem:
        return _editor(segment, form, view, error=posted.problem, status=422)
    try:
        if segment is None:
            saved = service.create_segment(db.session, form.name.data, posted.rules)
        else:
            saved = service.update_segment(db.session, segment.id, form.name.data, posted.rules)
    except NotFound:
        raise  # deleted meanwhile: the 404 page
    except DomainError as exc:
        db.session.rollback()
        if exc.field == "name":
            form.name.errors = [exc.message]
        return _editor(segment, form, view, error=exc.message, status=422)
    flash(_("The segment “%(name)s” is saved.", name=saved.name), "success")
    return after_post(url_for(".index"))


def _fragment(template: str, **context: Any):
    return make_response(render_template(template, **context),
                         trigger_after_settle=REFRESH_PREVIEW)


@bp.route("/builder", methods=["POST"])
@allow("write")
def builder_fragment():
    view = submission.press(submission.read_form(request.form), request.form.get("action") or "")
    return _fragment("segments/_builder.html", **_builder_context(view))


@bp.route("/builder/row/<path>", methods=["POST"])
@allow("write")
def row(path: str):
    posted = submission.read_form(request.form)
    condition = builder.row_at(posted.tree, path)
    if condition is None:
        abort(404)
    if not condition.value_fits:  # the field changed: "@example" is no date and no list
        condition.value = ""
    # One condition: the datalist of attribute names it uses is already on the page.
    context = _builder_context(submission.shown(posted.tree), attribute_names=False)
    return _fragment("segments/_row.html", row=condition, path=path, **context)


@bp.route("/builder/json", methods=["POST"])
@allow("write")
def builder_json():
    try:
        return {"rules_json": submission.builder_json(request.form)}
    except builder.BuilderError as exc:
        return {"problem": exc.message}, 422


# ------------------------------------------------------------------ the preview


def _preview(posted: submission.Posted) -> dict[str, Any]:
    """The count and the newest people, or why the rules cannot be counted yet."""
    if posted.problem:
        return {"problem": posted.problem}
    try:
        group = service.validate(db.session, posted.rules)
        return {"count": service.count_matching(db.session, group),
                "people": service.sample(db.session, group)}
    except DomainError as exc:
        return {"problem": exc.message}


@bp.route("/preview", methods=["POST"])
@allow("write")
def preview():
    return render_template("segments/_preview.html", **_preview(submission.read_form(request.form)))


# ------------------------------------------------------------------ duplicate and delete


@bp.route("/<int:segment_id>/duplicate", methods=["POST"])
@allow("write")
def duplicate(segment_id: int):
    if not ConfirmForm().validate_on_submit():
        abort(400)
    try:
        copy = service.duplicate_segment(db.session, segment_id)
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for(".index"))
    flash(_("This is a copy, “%(name)s”: change its rules and save.", name=copy.name), "success")
    return redirect(url_for(".edit", segment_id=copy.id))


@bp.route("/<int:segment_id>/delete")
def confirm_delete(segment_id: int):
    segment = service.get_segment(db.session, segment_id)
    used_by = segment_lookups.broadcasts_using(db.session, segment_id)
    busy = [b for b in used_by if b.status in service.IN_USE]
    drafts = [b for b in used_by if b.status == "draft"]
    return render_template("segments/delete.html", segment=segment, busy=busy, drafts=drafts,
                           summary=describe.summaries(db.session, [segment])[segment.id],
                           form=ConfirmForm())


@bp.route("/<int:segment_id>/delete", methods=["POST"])
@allow("write")
def delete(segment_id: int):
    if not ConfirmForm().validate_on_submit():
        abort(400)
    try:
        name = service.delete_segment(db.session, segment_id)
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for(".index"))
    flash(_("The segment “%(name)s” is deleted.", name=name), "success")
    return redirect(url_for(".index"))
