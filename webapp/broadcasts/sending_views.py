"""Broadcast pages, part two: send (test, confirm, schedule), watch (progress), steer
(pause, resume, cancel), and the evidence (deliveries, timelines, send again).

Its routes attach to the broadcasts blueprint; `webapp.create_app` imports this module.
Every button works as a plain form without JavaScript; htmx upgrades some of them to swap a
fragment in place.
"""

from __future__ import annotations

import functools

from flask import (
    Response,
    current_app,
    flash,
    redirect,
    render_template,
    url_for,
)
from flask_wtf import FlaskForm
from wtforms import BooleanField, StringField

from broadside.campaigns.broadcasts import audience, drafts, evidence, launch, merge_person, service
from broadside.campaigns.broadcasts.progress import Progress, read_progress
from broadside.core.errors import Conflict, DomainError, ValidationError
from broadside.core.i18n import _, _l, ngettext
from broadside.delivery import transactional
from webapp.broadcasts import bp, merge_fill
from webapp.extensions import db, get_jobs
from webapp.htmx import STOP_POLLING, make_response, request, vary_on_htmx
from webapp.params import int_arg
from webapp.permissions import allow, own_address_only
from webapp.readiness import sending_readiness


class TestSendForm(FlaskForm):
    to_email = StringField(_l("Send a test to"), render_kw={"type": "email", "autocomplete": "email"})


class SendForm(FlaskForm):
    queue_anyway = BooleanField(_l("Queue it anyway: it starts as soon as sending works again"))


class ScheduleForm(FlaskForm):
    send_at = StringField(_l("Date and time"), render_kw={"type": "datetime-local"})


# The event the progress fragment's answer fires when a delivery moved since the page last
# looked (`Progress.version`); the deliveries table listens for it and re-reads its visible
# page. So the table never asks more often than the bar, and not at all while nothing moves.
DELIVERIES_CHANGED = "deliveries-changed"


def _progress(broadcast_id: int) -> Progress:
    return read_progress(db.session, broadcast_id,
                         send_delay_ms=int(current_app.config.get("SEND_DELAY_MS") or 0))


def _no_store(response: Response) -> Response:
    response.headers["Cache-Control"] = "no-store"
    return response


def _nothing_new() -> Response:
    """204: htmx swaps nothing, and a poll carries on."""
    return _no_store(make_response("", 204))


# ---------------------------------------------------------------- send a test

bp.app_context_processor(merge_fill.template_helpers)


@bp.route("/<int:broadcast_id>/test", methods=["POST"])
@allow("write")
def send_test(broadcast_id: int):
    """One copy to any address (a writer: their own), through the transactional queue (ahead
    of broadcasts), its merge fields filled in with the details of the subscriber picked
    (`fill_from`)."""
    form = TestSendForm()
    address = (form.to_email.data or "").strip()
    typed = (request.form.get("fill_from") or "")[:320]
    error: DomainError | None = None
    test = person = None
    broadcast = service.get_broadcast(db.session, broadcast_id)
    try:
        own_address_only(address, field="to_email")  # a writer: only to their own address
        person = merge_person.chosen(db.session, typed, list_id=broadcast.list_id,
                                     segment_id=broadcast.segment_id)
        message_id = service.send_test(db.session, broadcast_id, address, person=person,
                                       default_from=current_app.config["MAIL_FROM"], jobs=get_jobs(),
                                       variant=request.form.get("variant") or None)
        test = transactional.queued_test(db.session, message_id)
    except ValidationError as exc:
        db.session.rollback()
        error, person = exc, None
    if request.htmx:
        return merge_fill.answer(
            error=error, address=address, test=test, status_id="test-status", fill_id="fill_from",
            fill_typed=typed, person=person, list_id=broadcast.list_id, segment_id=broadcast.segment_id)
    if error:
        flash(_("Test not sent: %(error)s", error=error.message), "error")
    else:
        assert person is not None
        flash(_("Test queued for %(address)s: it arrives within a few seconds while the worker "
                "runs. %(filled)s", address=address.lower(), filled=person.words), "success")
    return redirect(request.referrer if _same_site(request.referrer)
                    else url_for(".show", broadcast_id=broadcast_id))


def _same_site(url: str | None) -> bool:
    return bool(url) and url.startswith(request.host_url)


@bp.route("/tests/<int:message_id>")
def test_status(message_id: int):
    """HTMX, every 2 s until settled: what became of a test send (a broadcast's or an
    automation step's), one primary-key read. 204 while it still says what the line shows."""
    test = transactional.queued_test(db.session, message_id)
    if request.args.get("was") == test.version:
        return _nothing_new()
    return _no_store(make_response(render_template("broadcasts/_test_state.html", test=test),
                                   STOP_POLLING if test.settled and request.htmx else 200))


# ---------------------------------------------------------------- send and schedule

def _render_confirm(broadcast_id: int, *, error: str | None = None, status: int = 200,
                    send_form: SendForm | None = None, schedule_form: ScheduleForm | None = None):
    if service.get_broadcast(db.session, broadcast_id).status != "draft":
        return redirect(url_for(".show", broadcast_id=broadcast_id))  # before counting anyone
    plan = launch.send_plan(db.session, broadcast_id)
    # Can it send: the plan's problems, the identity it goes out through (paused? its From,
    # its transport, masked, to name where), and why sending would not happen now.
    readiness = sending_readiness(broadcast=plan.broadcast, problems=plan.problems)
    identity = readiness.identity
    assert identity is not None

    return render_template(
        "broadcasts/send_confirm.html", plan=plan, broadcast=plan.broadcast,
        list_name=drafts.audience_name(db.session, plan.broadcast), identity=identity,
        not_ready=readiness.reasons, from_name=identity.from_name, from_email=identity.from_email,
        error=error, version_counts=audience.readers_per_version(db.session, plan.broadcast),
        send_form=send_form or SendForm(formdata=None),
        schedule_form=schedule_form or ScheduleForm(formdata=None),
    ), status


@bp.route("/<int:broadcast_id>/send")
def confirm_send(broadcast_id: int):
    """The confirmation: who would receive it, who would be skipped and why."""
    return _render_confirm(broadcast_id)


@bp.route("/<int:broadcast_id>/send", methods=["POST"])
@allow("send")
def send(broadcast_id: int):
    form = SendForm()
    # Why sending would not happen now; `send_now` refuses while the broadcast's own problems
    # stand, so they are not read twice here.
    not_ready = sending_readiness(
        identity_id=service.get_broadcast(db.session, broadcast_id).identity_id).reasons
    try:
        broadcast = launch.send_now(db.session, broadcast_id,
                                    default_from=current_app.config["MAIL_FROM"],
                                    not_ready=not_ready, queue_anyway=bool(form.queue_anyway.data),
                                    jobs=get_jobs())
    except (ValidationError, Conflict) as exc:
        db.session.rollback()
        if isinstance(exc, Conflict):
            flash(exc.message, "error")
            return redirect(url_for(".show", broadcast_id=broadcast_id))
        return _render_confirm(broadcast_id, error=exc.message, status=exc.status_code,
                               send_form=form)
    if broadcast.snapshot_cursor >= broadcast.snapshot_until:
        flash(ngettext("Sending to %(num)s subscriber. You can leave this page: the worker "
                       "carries on.", "Sending to %(num)s subscribers. You can leave this page: "
                       "the worker carries on.", broadcast.total), "success")
    elif broadcast.audience_estimate is not None:  # a large audience, written in chunks
        flash(ngettext("Sending: the worker is preparing the recipient list of about %(num)s "
                       "subscriber and starts with the first of them. You can leave this page: "
                       "the worker carries on.", "Sending: the worker is preparing the recipient "
                       "list of about %(num)s subscribers and starts with the first of them. You "
                       "can leave this page: the worker carries on.",
                       broadcast.audience_estimate), "success")
    else:
        flash(_("Sending: the worker is preparing the recipient list and starts with the first "
                "of them. You can leave this page: the worker carries on."), "success")
    return redirect(url_for(".show", broadcast_id=broadcast_id))


@bp.route("/<int:broadcast_id>/schedule", methods=["POST"])
@allow("send")
def schedule(broadcast_id: int):
    form = ScheduleForm()
    try:
        broadcast = launch.schedule_at(db.session, broadcast_id, form.send_at.data or "")
    except (ValidationError, Conflict) as exc:
        db.session.rollback()
        if isinstance(exc, Conflict):
            flash(exc.message, "error")
            return redirect(url_for(".show", broadcast_id=broadcast_id))
        return _render_confirm(broadcast_id, error=exc.message, status=exc.status_code,
                               schedule_form=form)
    flash(_("Scheduled. You can cancel the schedule until it starts."), "success")
    return redirect(url_for(".show", broadcast_id=broadcast.id))


@bp.route("/<int:broadcast_id>/unschedule", methods=["POST"])
@allow("send")
def unschedule(broadcast_id: int):
    try:
        service.unschedule_broadcast(db.session, broadcast_id)
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for(".show", broadcast_id=broadcast_id))
    flash(_("The schedule is cancelled: this is a draft again and nothing was sent."), "success")
    return redirect(url_for(".edit", broadcast_id=broadcast_id))


# ---------------------------------------------------------------- watch and steer

@bp.route("/<int:broadcast_id>/progress")
def progress(broadcast_id: int):
    """HTMX, every 1.5 s while sending: one row read, never a COUNT over deliveries.

    `seen` is the version of the counters the page shows; when they moved, the answer fires
    DELIVERIES_CHANGED so the table re-reads its page (the last answer, the one that stops
    the polling, moved them too: the table shows the end state). `view=line` is the one-line
    form the deliveries page polls."""
    p = _progress(broadcast_id)
    line = request.args.get("view") == "line"
    seen = request.args.get("seen")
    moved = request.htmx and seen is not None and seen != p.version
    response = make_response(
        render_template("broadcasts/_progress_line.html" if line else "broadcasts/_progress.html",
                        p=p, oob_badge=True,
                        retry_transient=not line and evidence.offers_transient_retry(db.session, p)),
        trigger=DELIVERIES_CHANGED if moved else None)
    if p.poll_every is None and request.htmx:
        response.status_code = STOP_POLLING  # the fragment has no trigger either
    return _no_store(response)


def _steer(broadcast_id: int, action, done: str):
    """Pause, resume or cancel: the fragment for htmx, a redirect for a plain form."""
    message = None
    try:
        action(db.session, broadcast_id)
    except Conflict as exc:
        db.session.rollback()
        message = exc.message
    if request.htmx:
        # Cancel skips every waiting row: the table follows whatever happened.
        p = _progress(broadcast_id)
        return make_response(render_template("broadcasts/_progress.html", p=p,
                                             message=message, oob_badge=True,
                                             retry_transient=evidence.offers_transient_retry(
                                                 db.session, p)),
                             trigger=DELIVERIES_CHANGED)
    flash(message or str(done), "error" if message else "success")
    return redirect(url_for(".show", broadcast_id=broadcast_id))


@bp.route("/<int:broadcast_id>/pause", methods=["POST"])
@allow("send")
def pause(broadcast_id: int):
    return _steer(broadcast_id, service.pause_broadcast,
                  _("Paused. Nothing more is sent until you press Resume."))


@bp.route("/<int:broadcast_id>/resume", methods=["POST"])
@allow("send")
def resume(broadcast_id: int):
    return _steer(broadcast_id, functools.partial(service.resume_broadcast, jobs=get_jobs()),
                  _("Resumed: sending continues from where it stopped."))


@bp.route("/<int:broadcast_id>/cancel", methods=["POST"])
@allow("send")
def cancel(broadcast_id: int):
    if request.form.get("confirm") != "yes":
        # Without JavaScript (no hx-confirm dialog) the owner confirms on a page first.
        broadcast = service.get_broadcast(db.session, broadcast_id)
        return render_template("broadcasts/cancel_confirm.html", broadcast=broadcast,
                               p=_progress(broadcast_id))
    return _steer(broadcast_id, functools.partial(service.cancel_broadcast, jobs=get_jobs()),
                  _("Cancelled. Nobody else will receive it; what was sent stays sent."))


# ---------------------------------------------------------------- evidence

@bp.route("/<int:broadcast_id>/deliveries")
def deliveries(broadcast_id: int):
    """The deliveries table: a fragment for htmx, a page of its own without JavaScript.

    While a send runs the fragment asks again for the same page (filter, search, keyset
    position and length) each time the progress answer says a delivery moved, with `seen`,
    the version of the counters it was drawn from: when nothing moved since, the answer is
    204 and no delivery is read. Otherwise one LIMITed page of rows is read, and the filter's
    counts come from the broadcast's counters (the progress bar's row), never a COUNT."""
    p = _progress(broadcast_id)
    seen = request.args.get("seen")
    if request.htmx and seen is not None and seen == p.version:
        return vary_on_htmx(_nothing_new())
    per_page = int_arg("per_page", evidence.PER_PAGE, minimum=1, maximum=evidence.PER_PAGE)
    try:
        page = evidence.delivery_page(db.session, broadcast_id, status=request.args.get("status"),
                                      query=request.args.get("q", ""), after=int_arg("after"),
                                      before=int_arg("before"), per_page=per_page or evidence.PER_PAGE)
        error = None
    except ValidationError as exc:
        page = evidence.delivery_page(db.session, broadcast_id)
        error = exc.message
    broadcast = service.get_broadcast(db.session, broadcast_id)
    if request.htmx:
        return vary_on_htmx(_no_store(make_response(render_template(
            "broadcasts/_delivery_results.html", page=page, broadcast=broadcast, error=error,
            p=p, oob_counts=True))))
    return vary_on_htmx(make_response(render_template(
        "broadcasts/deliveries.html", page=page, broadcast=broadcast, error=error, p=p),
        422 if error else 200))


@bp.route("/<int:broadcast_id>/deliveries/<int:delivery_id>")
def timeline(broadcast_id: int, delivery_id: int):
    """One recipient's timeline: an expanded table row for htmx, else a small page."""
    if request.htmx and request.args.get("closed"):
        return vary_on_htmx(make_response(render_template("broadcasts/_timeline_row.html",
                                                   delivery_id=delivery_id, timeline=None)))
    found = evidence.delivery_timeline(db.session, broadcast_id, delivery_id)
    broadcast = service.get_broadcast(db.session, broadcast_id)
    template = "broadcasts/_timeline_row.html" if request.htmx else "broadcasts/timeline.html"
    return vary_on_htmx(make_response(render_template(template, timeline=found, broadcast=broadcast,
                                               delivery_id=delivery_id)))


RETRY_WHICH = ("unknown", "transient")
NOTHING_TO_RETRY = {
    "unknown": _l("No delivery of this broadcast has an unknown outcome."),
    "transient": _l("No delivery of this broadcast failed for a temporary reason. Any that "
                    "failed were refused for good (a wrong or closed address, a refusal by the "
                    "server), and sending again would be refused the same way."),
}


@bp.route("/<int:broadcast_id>/retry/<which>")
def confirm_retry(broadcast_id: int, which: str):
    """Ask first: an `unknown` row may already be in the inbox (invariant 5)."""
    plan = evidence.retry_plan(db.session, broadcast_id, which)
    broadcast = service.get_broadcast(db.session, broadcast_id)
    return render_template("broadcasts/retry_confirm.html", plan=plan, broadcast=broadcast,
                           explanation=str(evidence.UNKNOWN_EXPLANATION),
                           nothing=str(NOTHING_TO_RETRY.get(which, "")))


@bp.route("/<int:broadcast_id>/retry/<which>", methods=["POST"])
@allow("send")
def retry(broadcast_id: int, which: str):
    if which not in RETRY_WHICH:
        raise ValidationError("Choose which deliveries to send again: unknown or transient.")
    if request.form.get("confirm") != "yes":
        return redirect(url_for(".confirm_retry", broadcast_id=broadcast_id, which=which))
    try:
        moved = service.retry_deliveries(db.session, broadcast_id, which=which, jobs=get_jobs())
    except DomainError as exc:
        db.session.rollback()
        flash(exc.message, "error")
        return redirect(url_for(".show", broadcast_id=broadcast_id))
    if not moved:
        # Nothing queued: say why, rather than a success that did nothing.
        flash(_("Nothing was sent again. %(why)s", why=NOTHING_TO_RETRY[which]), "error")
        return redirect(url_for(".show", broadcast_id=broadcast_id), 303)
    flash(ngettext("Sending again to %(num)s recipient.", "Sending again to %(num)s recipients.",
                   moved), "success")
    return redirect(url_for(".show", broadcast_id=broadcast_id), 303)
