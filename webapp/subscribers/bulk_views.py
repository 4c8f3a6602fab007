"""Bulk actions from the subscriber table: the confirmation page, the submit, the progress.

- GET /subscribers/bulk?action=&target=&scope=selected|all&ids=…&<the table's filters>
  The confirmation: exactly how many people and what will happen; changes nothing. Bad input
  (nobody selected, no list chosen, a list or a person that is gone, an id that is not one)
  answers 422 with the sentence and a form that keeps the selection.
- POST /subscribers/bulk  (the same fields, plus `max_id` and `expected` from the confirmation,
  and for an erase the typed count) stores the action with the set of people it is for (the
  worker touches nobody else), queues its job, then redirects to its progress page. If the
  count changed since the confirmation, the confirmation is shown again with the new number
  (422): the owner confirms what will really happen.
- GET /subscribers/bulk/<id> and /subscribers/bulk/<id>/progress: the progress bar, polled by
  htmx every second until the action is over (286 stops the polling).
"""

from __future__ import annotations

from flask import render_template, request, url_for

from broadside.audience.lists import all_lists
from broadside.audience.subscribers import bulk, search
from broadside.audience.subscribers.bulk_progress import progress
from broadside.audience.subscribers.language import language_name
from broadside.core.errors import ValidationError
from broadside.core.i18n import _
from broadside.segments.service import all_segments
from webapp.extensions import db, get_jobs
from webapp.forms import after_post
from webapp.htmx import STOP_POLLING
from webapp.subscribers import bp


def _values():
    source = request.form if request.method == "POST" else request.args
    filters = search.Filters.parse(source.get("q"), source.get("match"), source.get("list"),
                                   source.get("status"), source.get("segment"),
                                   source.get("language"))
    target = search.parse_id(source.get("target"))
    max_id = search.parse_id(source.get("max_id"))
    return source, filters, target, max_id


def _filter_words(filters: search.Filters) -> list[str]:
    """The filter in the owner's words, for the confirmation page."""
    words = []
    if filters.q:
        words.append(_("email or name containing “%(q)s”", q=filters.q)
                     if filters.match == "contains" else
                     _("email or name starting with “%(q)s”", q=filters.q))
    if filters.list_id:
        names = {item.id: item.name for item in all_lists(db.session)}
        words.append(_("on %(list)s", list=names.get(filters.list_id, _("a deleted list"))))
    if filters.status:
        words.append(_("status %(status)s", status=filters.status))
    if filters.segment_id:
        names = {item.id: item.name for item in all_segments(db.session)}
        words.append(_("in the segment %(segment)s",
                       segment=names.get(filters.segment_id, _("(deleted)"))))
    if filters.locale:
        words.append(_("whose language is the list's default")
                     if filters.locale == search.NO_LOCALE else
                     _("whose language is %(language)s", language=language_name(filters.locale)))
    return words


def _render(source, filters, *, plan=None, error=None, status=200):
    return render_template(
        "subscribers/bulk_confirm.html", plan=plan, error=error, filters=filters,
        filter_args=filters.as_args(), filter_words=_filter_words(filters),
        choices=bulk.CHOICES, lists=all_lists(db.session),
        chosen={"action": source.get("action", ""), "target": source.get("target", ""),
                "scope": source.get("scope", "")},
        ids=source.getlist("ids"), typed=source.get("confirm_count", ""),
    ), status


@bp.route("/bulk")
def bulk_confirm():
    source, filters, target, max_id = _values()
    try:
        plan = _plan(source, filters, target, max_id)
    except ValidationError as exc:
        return _render(source, filters, error=exc.message, status=422)
    return _render(source, filters, plan=plan)


def _plan(source, filters, target, max_id, count: bool = True) -> bulk.Plan:
    """The same check and count on the confirmation page and on submit (ValidationError)."""
    return bulk.plan(db.session, action=source.get("action"), list_id=target,
                     scope=source.get("scope"), ids=source.getlist("ids"),
                     filters=filters, max_id=max_id, count=count)


def _confirm_again(source, filters, target, max_id, error: str):
    """The confirmation again (422), counted now; `error` may use {total}."""
    try:
        plan = _plan(source, filters, target, max_id)
    except ValidationError as exc:
        return _render(source, filters, error=exc.message, status=422)
    return _render(source, filters, plan=plan, status=422, error=error.format(total=plan.total))


def changed_message() -> str:
    return _("The number of people changed since you looked: it is now %(total)s. Check and "
             "confirm again.", total="{total:,}")


@bp.route("/bulk", methods=["POST"])
def bulk_submit():
    source, filters, target, max_id = _values()
    try:
        # Uncounted: the set stored by `submit` is the count, checked against `expected`.
        plan = _plan(source, filters, target, max_id, count=False)
    except ValidationError as exc:
        return _render(source, filters, error=exc.message, status=422)
    expected = search.parse_id(source.get("expected"))
    if expected is None:
        return _confirm_again(source, filters, target, max_id, changed_message())
    if plan.action == "erase" and source.get("confirm_count", "").strip().replace(",", "") \
            != str(expected):
        return _confirm_again(source, filters, target, max_id,
                              _("Type %(total)s to confirm the erase.", total="{total}"))
    try:
        record = bulk.submit(db.session, plan, get_jobs().enqueue_bulk, expected=expected)
    except (ValidationError, bulk.SetChanged):
        return _confirm_again(source, filters, target, max_id, changed_message())
    return after_post(url_for("subscribers.bulk_status", bulk_id=record.id))


@bp.route("/bulk/<int:bulk_id>")
def bulk_status(bulk_id: int):
    return render_template("subscribers/bulk_status.html",
                           state=progress(db.session, bulk_id))


@bp.route("/bulk/<int:bulk_id>/progress")
def bulk_progress(bulk_id: int):
    state = progress(db.session, bulk_id)
    html = render_template("subscribers/_bulk_progress.html", state=state)
    return html, STOP_POLLING if state.finished else 200
