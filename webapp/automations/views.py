"""Automations pages (routes on `webapp.automations.bp`, all for the signed-in owner):

    GET  /automations/                          every automation: trigger, steps, state and
                                                per-step counts (each card's counts poll while
                                                its messages are in flight)
    GET  /automations/<id>/counts               htmx: one automation's counts (286, which
                                                stops the polling, once it is deleted)
    GET  /automations/<id>/messages             its failed, skipped or unknown messages
                                                (?status=, ?step=<step id>), newest first,
                                                by keyset (?before=, ?after=)
    GET/POST /automations/new, /<id>/edit       the editor (plain form; "Add a step" and
                                                "Remove step n" re-render without saving; Save
                                                validates through the domain: 422 keeps input;
                                                a save whose merge fields need a look comes
                                                back to the editor with the report)
    POST /automations/merge-check               htmx: the merge-field report of the form as
                                                typed (nothing saved), as the owner types
    POST /automations/<id>/enable, /disable     the lifecycle's moves (enable is also "Resume"),
                                                for who may send; a writer saves and deletes
                                                only a disabled automation (403 otherwise)
    GET/POST /automations/<id>/delete           a confirmation, then the delete
    GET  /automations/<id>/steps/<sid>/preview  the step's email for the preview iframe
    POST /automations/<id>/steps/<sid>/test     a test send (htmx: the status line, 200 even
                                                when refused, since htmx swaps no 4xx)
"""

from __future__ import annotations

from typing import Any

from flask import Response, current_app, flash, redirect, render_template, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from markupsafe import escape

from broadside.audience.lists import all_lists
from broadside.campaigns.automations import durations, message_page, refreeze
from broadside.campaigns.automations import service as automations
from broadside.campaigns.automations.merge_report import StepTexts, automation_report, steps_report
from broadside.campaigns.broadcasts import merge_person
from broadside.campaigns.feeds.status import feed_status
from broadside.campaigns.field_report import MergeReport
from broadside.core import roles
from broadside.core.errors import Conflict, DomainError, Forbidden, NotFound, ValidationError
from broadside.core.i18n import _, _l, ngettext
from broadside.core.models import Automation
from broadside.core.site_settings import get_settings
from broadside.delivery.identities.service import all_identities
from broadside.delivery.transactional import queued_test
from broadside.segments.service import all_segments
from webapp.automations import bp, form
from webapp.broadcasts import merge_fill
from webapp.broadcasts.views import PREVIEW_CSP
from webapp.extensions import db, get_jobs
from webapp.forms import after_post
from webapp.htmx import STOP_POLLING, make_response, request
from webapp.identities.form import send_from_choices
from webapp.params import int_arg
from webapp.permissions import allow, can, own_address_only

IN_FLIGHT = ("pending", "sending")


class ConfirmForm(FlaskForm):
    """Only the CSRF token: for the editor and the buttons that change state."""


def _default_from() -> str:
    return current_app.config["MAIL_FROM"]


def _card(automation: Automation) -> dict:
    """What one automation's card shows: its steps with counts, and whether to keep polling."""
    counts = automations.step_counts(db.session, automation.id)
    steps = [{"step": step, "when": durations.describe(step.delay_seconds),
              "counts": counts.get(step.id, {})}
             for step in automations.steps_of(db.session, automation.id)]
    busy = any(c.get(s, 0) for c in counts.values() for s in IN_FLIGHT)
    return {"automation": automation, "steps": steps, "busy": busy,
            "entered": automations.entered_count(db.session, automation.id),
            # A feed's: its items sent as broadcasts (nobody enters it; no step counts).
            "feed": feed_status(db.session, automation.id) if automation.trigger_type == "feed"
            else None}


def _names() -> tuple[dict[int, str], dict[int, str]]:
    return ({m.id: m.name for m in all_lists(db.session)},
            {s.id: s.name for s in all_segments(db.session)})


@bp.get("/")
def index():
    lists, segments = _names()
    cards = [_card(a) for a in automations.list_automations(db.session)]
    return render_template("automations/index.html", cards=cards, lists=lists, segments=segments,
                           action_form=ConfirmForm(), held=refreeze.held_reasons(db.session))


@bp.get("/<int:automation_id>/counts")
def counts(automation_id: int):
    try:
        automation = automations.get_automation(db.session, automation_id)
    except NotFound:
        if request.htmx:
            # Deleted meanwhile (another tab): htmx keeps polling through a 404, so answer
            # the status that stops it, with a line in place of the counts.
            return make_response('<p class="muted">This automation was deleted.</p>',
                                 STOP_POLLING)
        raise
    return render_template("automations/_counts.html", card=_card(automation))


@bp.get("/<int:automation_id>/messages")
def messages(automation_id: int):
    """The messages a failed, skipped or unknown count stands for, with why, newest first."""
    automation = automations.get_automation(db.session, automation_id)
    steps = automations.steps_of(db.session, automation_id)
    step_id = int_arg("step")
    try:
        page = message_page.message_page(
            db.session, automation_id, status=request.args.get("status", "failed"),
            step_id=step_id if any(s.id == step_id for s in steps) else None,
            after=int_arg("after"), before=int_arg("before"))
        error, status = None, 200
    except ValidationError as exc:
        page = message_page.message_page(db.session, automation_id, status="failed")
        error, status = exc.message, 422
    return render_template("automations/messages.html", automation=automation, steps=steps,
                           page=page, error=error, listed=message_page.LISTED), status


# ------------------------------------------------------------------ the editor


def _typed_report(fields: form.EditorFields) -> MergeReport:
    """The merge-field report of the steps as typed, over the trigger as chosen."""
    list_id, segment_id = form.trigger_ids(fields)
    return steps_report(db.session, [StepTexts(s.subject, s.preheader, form.typed_body(s), s.codes,
                                               s.text_body)
                                     for s in fields.steps],
                        list_id=list_id, segment_id=segment_id)


def _render_editor(fields: form.EditorFields, automation: Automation | None, *,
                   error: str | None = None, note: str | None = None, status: int = 200,
                   name_taken: bool = False, error_field: str | None = None):
    lists, segments = _names()
    senders = send_from_choices(all_identities(db.session, current_app.config))
    error_step = None if name_taken else form.step_named(error, error_field)
    if error_step is not None and error_step <= len(fields.steps) and "delay" in (error or ""):
        # A refused delay is told under its number and unit, not above the step.
        fields.steps[error_step - 1].delay_error, error_step = error, None
    page = render_template("automations/edit.html", fields=fields, automation=automation,
                           lists=lists, segments=segments, senders=senders, error=error, note=note,
                           error_step=error_step, merge=_typed_report(fields),
                           max_steps=automations.MAX_STEPS, csrf_form=ConfirmForm(),
                           versions_error_step=error_step if (error_field or "").endswith(
                               ".versions") else None,
                           default_locale=get_settings(db.session).default_language,
                           error_field=error_field, feed=automation and feed_status(
                               db.session, automation.id))
    return page, status


def _submitted(automation: Automation | None):
    if not ConfirmForm().validate_on_submit():
        return _render_editor(form.read_form(request.form), automation,
                              error=_("The form expired; press Save again."), status=400)
    fields = form.read_form(request.form)
    action = request.form.get("action", "save")
    if action != "save":
        note = form.apply_button(fields, action)
        return _render_editor(fields, automation, note=note)
    refused = form.delay_refusal(fields)
    if refused:
        return _render_editor(fields, automation, error=refused, status=422)
    try:
        if fields.trigger_type == "segment" and not fields.segment_id:
            raise ValidationError(_("Choose the segment whose people enter this automation."))
        if fields.trigger_type == "joined_list" and not fields.list_id:
            raise ValidationError(_("Choose the list whose new subscribers enter this automation."))
        data = form.parsed(fields)
        if automation is None:
            saved = automations.create_automation(db.session, data, default_from=_default_from())
            flash(_("The automation “%(name)s” is saved. It is disabled until you enable it.",
                    name=saved.name), "success")
        else:
            saved = automations.update_automation(db.session, automation.id, data,
                                                  default_from=_default_from(),
                                                  only_if_off=not can(roles.SEND))
            flash(_("The automation “%(name)s” is saved.", name=saved.name), "success")
    except Forbidden as exc:  # a writer's save of one that is on: their input kept, nothing saved
        return _render_editor(fields, automation, error=exc.message, status=exc.status_code)
    except (ValidationError, Conflict) as exc:
        return _render_editor(fields, automation, error=exc.message, status=422,
                              name_taken=isinstance(exc, Conflict), error_field=exc.field)
    if automation_report(db.session, saved.id).warning_count:
        # Its merge fields need a look: back to the editor, where the report is.
        flash(_("Check its merge fields below: some will print nothing for some people."), "info")
        return after_post(url_for("automations.edit", automation_id=saved.id) + "#merge-report")
    return after_post(url_for("automations.index") + f"#automation-{saved.id}")


@bp.post("/merge-check")
@allow("write")
def merge_check():
    """htmx, as the owner types: what the steps' merge fields do to the trigger's people,
    nothing saved (the editor's report, swapped into #merge-report)."""
    if not ConfirmForm().validate_on_submit():
        words = escape(_("Reload the page to check the merge fields."))
        return make_response(f'<p class="muted">{words}</p>', 200)
    return render_template("broadcasts/_merge_check.html",
                           merge=_typed_report(form.read_form(request.form)))


@bp.route("/new", methods=["GET", "POST"])
@allow(read="view", change="write")
def new():
    if request.method == "POST":
        return _submitted(None)
    fields = form.EditorFields()
    lists, _segments = _names()
    if len(lists) == 1:
        fields.list_id = str(next(iter(lists)))
    return _render_editor(fields, None)


@bp.route("/<int:automation_id>/edit", methods=["GET", "POST"])
@allow(read="view", change="write")
def edit(automation_id: int):
    automation = automations.get_automation(db.session, automation_id)
    if request.method == "POST":
        return _submitted(automation)
    steps = automations.steps_of(db.session, automation_id)
    fields = form.from_saved(automations.as_input(db.session, automation), [s.id for s in steps],
                             [s.editor for s in steps])
    return _render_editor(fields, automation)


# ------------------------------------------------------------------ state


def _move(automation_id: int, action, said: Any, *, report: bool = False):
    if not ConfirmForm().validate_on_submit():
        flash(_("The form expired; try again."), "error")
        return redirect(url_for("automations.index"))
    try:
        automation = action(db.session, automation_id)
        flash(str(said) % {"name": automation.name}, "success")
    except (ValidationError, Conflict) as exc:
        flash(exc.message, "error")
        return redirect(url_for("automations.index") + f"#automation-{automation_id}")
    if report:
        merge = automation_report(db.session, automation_id)
        for warning in merge.warnings:
            flash(_("Check its merge fields: %(warning)s", warning=warning), "info")
        if merge.more:
            flash(ngettext("… and %(num)s more merge field to check in its editor.",
                           "… and %(num)s more merge fields to check in its editor.", merge.more),
                  "info")
    return redirect(url_for("automations.index") + f"#automation-{automation_id}")


@bp.post("/<int:automation_id>/enable")
@allow("send")
def enable(automation_id: int):
    return _move(automation_id, automations.enable,
                 _l("“%(name)s” is enabled: people who join now enter it, and its due messages "
                    "go out."),
                 report=True)


@bp.post("/<int:automation_id>/disable")
@allow("send")
def disable(automation_id: int):
    return _move(automation_id, automations.disable,
                 _l("“%(name)s” is disabled: nobody new enters it, and its due messages wait "
                    "until you enable it again."))


@bp.route("/<int:automation_id>/delete", methods=["GET", "POST"])
@allow(read="view", change="write")
def delete(automation_id: int):
    automation = automations.get_automation(db.session, automation_id)
    confirm = ConfirmForm()
    if request.method == "POST" and confirm.validate_on_submit():
        automations.delete(db.session, automation_id, only_if_off=not can(roles.SEND))
        flash(_("The automation “%(name)s” is deleted; its waiting messages were skipped.",
                name=automation.name), "success")
        return redirect(url_for("automations.index"))
    card = _card(automation)
    waiting = sum(c.get("pending", 0) for c in (s["counts"] for s in card["steps"]))
    return render_template("automations/delete.html", automation=automation, waiting=waiting,
                           form=confirm)


# ------------------------------------------------------------------ preview and test


@bp.get("/<int:automation_id>/steps/<int:step_id>/preview")
def preview(automation_id: int, step_id: int) -> Response:
    """The step's email for the sample recipient, as a document of its own for the iframe."""
    try:
        _, rendered = automations.preview_step(db.session, automation_id, step_id,
                                               sample_email=current_user.email)
        response = make_response(rendered.html)
    except NotFound:
        raise
    except DomainError as exc:
        response = make_response(render_template("broadcasts/preview_problem.html",
                                                  problem=exc.message))
    response.headers["Content-Security-Policy"] = PREVIEW_CSP
    response.headers["X-Frame-Options"] = "SAMEORIGIN"
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.post("/<int:automation_id>/steps/<int:step_id>/test")
@allow("write")
def send_test(automation_id: int, step_id: int):
    address = (request.form.get("to_email") or "")[:320]
    typed = (request.form.get("fill_from") or "")[:320]
    error: DomainError | None = None
    test = person = None
    automation = automations.get_automation(db.session, automation_id)
    if not ConfirmForm().validate_on_submit():
        error = DomainError("the form expired; reload the page.")
    else:
        try:
            own_address_only(address, field="to_email")  # a writer: only to their own address
            person = merge_person.chosen(db.session, typed, list_id=automation.list_id,
                                         segment_id=automation.segment_id)
            message_id = automations.send_step_test(db.session, automation_id, step_id, address,
                                                    default_from=_default_from(), jobs=get_jobs(),
                                                    person=person)
            test = queued_test(db.session, message_id)  # the line follows it until settled
        except ValidationError as exc:
            error, person = exc, None
    if request.htmx:
        # 200 even when refused: htmx swaps no 4xx answer, so a 422 left the line empty.
        return make_response(merge_fill.answer(
            error=error, address=address, test=test, status_id=f"test-status-{step_id}",
            fill_id=f"fill-{step_id}", fill_typed=typed, person=person,
            list_id=automation.list_id, segment_id=automation.segment_id), 200)
    flash(_("Test not sent: %(error)s", error=error.message) if error else
          _("Test queued for %(address)s. %(filled)s", address=address.lower(),
            filled=person.words if person else ""),
          "error" if error else "success")
    return redirect(url_for("automations.edit", automation_id=automation_id) + f"#step-{step_id}")
