"""Subscribers over the API: the filtered list, editing a person, unsubscribing them from a
list (the contract is held by tests/webapp/test_api_subscribers_list.py and described in
`webapp/apidocs/paths.py`; adding, reading one, erasing and importing are in `audience.py`).

- GET /api/subscribers?after=&limit=&list_id=&segment_id=&status=&q= -> 200
  {"items": [Subscriber], "next"}: ascending id, `after` is the previous page's `next` (ids
  above it), `limit` 1-1000 (100 by default). Filters combine with AND:
  `list_id` (on that list, any status; with a subscription `status`, that status there),
  `segment_id` (who the segment reaches now, as a send would), `status` (one of
  `broadside.audience.subscribers.search.STATUS_FILTERS`), `q` (a substring of the address or the name,
  case ignored). A value that is not valid, an unknown parameter, or a list or segment that does
  not exist is 422 with a message: never silently an unfiltered or empty page.
- PATCH /api/subscribers/<id> {"name"?, "attributes"?, "locale"?, "timezone"?} -> 200
  Subscriber. "attributes" replaces the whole object; "locale" is a language tag ("de",
  "pt-BR"), null or "" for the list's default; "timezone" an IANA name ("Asia/Tokyo"), null or
  "" for none; all are checked by `broadside.audience.subscribers.service`.
- POST /api/subscribers/<id>/unsubscribe {"list_id"} -> 200 {"subscriber_id", "list_id",
  "status": "unsubscribed", "changed"}: "changed" is false when they had already left (the
  call is idempotent). A person who was never on that list is 404, a list that does not exist
  422, an unknown subscriber 404.
- POST /api/subscribers/bulk {"action", "list_id"?, "ids" | "filter", "expected"?} -> 202
  BulkAction: the subscriber table's bulk actions (`broadside.audience.subscribers.bulk`: add, remove,
  unsubscribe, unsubscribe_all, block, erase), for up to 1,000 ids or everyone a filter (the
  list's filters above) matches now; the worker does it in batches. The set of people is
  fixed when the call is accepted: nobody who comes to match the filter later is touched,
  and someone of the set who no longer matches when the worker reaches them is left alone
  (`no_longer_matched`; `acted_on` counts the others). `expected`, when given, must be the
  number of people in that set (409 otherwise, nothing stored); an erase requires it.
  GET /api/subscribers/bulk/<id> -> 200 BulkAction: how far it got.
"""

from __future__ import annotations

from typing import Any

from flask import jsonify, request

from broadside.audience.subscribers import bulk, search
from broadside.audience.subscribers import service as subscribers
from broadside.audience.subscribers.language import clean_reader_locale
from broadside.audience.subscribers.time_zone import clean_reader_timezone
from broadside.core.errors import Conflict, ValidationError
from broadside.core.models import BulkAction, MailingList, Segment, Subscriber
from webapp.api import bp, json_body
from webapp.api.inputs import (
    id_field,
    is_id,
    iso,
    null_only_for,
    only_keys,
    page_args,
    query_id,
    require_some,
    takes_query,
)
from webapp.extensions import db, get_jobs

DEFAULT_PAGE = 100
MAX_PAGE = 1000
FILTERS = ("list_id", "segment_id", "status", "q")
EDITABLE = ("name", "attributes", "locale", "timezone")


def locale_field(data: dict[str, Any]) -> str | None:
    """The body's "locale" as stored: a language tag, or None (null, "" or absent)."""
    value = data.get("locale")
    if value is not None and not isinstance(value, str):
        raise ValidationError("'locale' must be a language tag such as \"de\" (null or \"\" for "
                              "the list's default).", field="locale")
    try:
        return clean_reader_locale(value)
    except ValidationError:
        raise ValidationError(f"'locale': {str(value)[:40]!r} is not a language tag (such as "
                              "\"de\", \"fr\" or \"pt-BR\").", field="locale") from None


def timezone_field(data: dict[str, Any]) -> str | None:
    """The body's "timezone" as stored: an IANA name, or None (null, "" or absent)."""
    value = data.get("timezone")
    if value is not None and not isinstance(value, str):
        raise ValidationError("'timezone' must be an IANA time zone name such as \"Europe/Berlin\" "
                              "(null or \"\" for none).", field="timezone")
    try:
        return clean_reader_timezone(value)
    except ValidationError:
        raise ValidationError(f"'timezone': {str(value)[:64]!r} is not a time zone this server "
                              "knows (such as \"Europe/Berlin\" or \"America/New_York\").",
                              field="timezone") from None


def subscriber_json(subscriber: Subscriber, subscriptions: list[tuple[int, str]]) -> dict[str, Any]:
    return {
        "id": subscriber.id, "email": subscriber.email, "name": subscriber.name,
        "attributes": subscriber.attributes or {}, "locale": subscriber.locale,
        "timezone": subscriber.timezone, "suppression": subscriber.suppression,
        "created_at": iso(subscriber.created_at),
        "subscriptions": [{"list_id": list_id, "status": status} for list_id, status in subscriptions],
    }


def _filters() -> search.Filters:
    list_id, segment_id = query_id("list_id"), query_id("segment_id")
    if list_id is not None and db.session.get(MailingList, list_id) is None:
        raise ValidationError(f"'list_id': there is no list with id {list_id}.")
    if segment_id is not None and db.session.get(Segment, segment_id) is None:
        raise ValidationError(f"'segment_id': there is no segment with id {segment_id}.")
    status = request.args.get("status", "")
    if status and status not in search.STATUS_FILTERS:
        raise ValidationError(f"'status' must be one of {', '.join(search.STATUS_FILTERS)}.")
    q = " ".join(request.args.get("q", "").split())
    if len(q) > search.MAX_QUERY:
        raise ValidationError(f"'q' can be at most {search.MAX_QUERY} characters.")
    if "\x00" in q:
        raise ValidationError("'q' cannot contain a NUL character.")
    return search.Filters(q=q, match="contains", list_id=list_id, status=status,
                          segment_id=segment_id)


@bp.route("/subscribers", methods=["GET"])
@takes_query("after", "limit", *FILTERS)
def api_subscribers():
    after, limit = page_args(default_limit=DEFAULT_PAGE, max_limit=MAX_PAGE)
    rows, following = search.page_by_id(db.session, _filters(), after=after or 0, limit=limit)
    return jsonify(items=[subscriber_json(s, subs) for s, subs in rows], next=following)


@bp.route("/subscribers/<int:subscriber_id>", methods=["PATCH"])
def api_edit_subscriber(subscriber_id: int):
    data = json_body()
    only_keys(data, EDITABLE)
    require_some(data, EDITABLE)
    if "name" in data and not isinstance(data["name"], str):
        raise ValidationError("'name' must be a string (\"\" removes the name).")
    if "attributes" in data and not isinstance(data["attributes"], dict):
        raise ValidationError("'attributes' must be an object of names and values; it replaces "
                              "all of them ({} removes them all).")
    person = subscribers.get_subscriber(db.session, subscriber_id)
    updated = subscribers.update_subscriber(
        db.session, subscriber_id, email=person.email,
        name=data.get("name", person.name),
        attributes=data["attributes"] if "attributes" in data else person.attributes,
        locale=locale_field(data) if "locale" in data else ...,
        timezone=timezone_field(data) if "timezone" in data else ...,
    )
    subscriptions = [(s.list_id, s.status) for s in subscribers.subscriptions_of(db.session, subscriber_id)]
    return jsonify(subscriber_json(updated, sorted(subscriptions)))


@bp.route("/subscribers/<int:subscriber_id>/unsubscribe", methods=["POST"])
def api_unsubscribe(subscriber_id: int):
    data = json_body()
    only_keys(data, ("list_id",))
    list_id = id_field(data, "list_id")
    if list_id is None:
        raise ValidationError("'list_id' is required.")
    subscribers.get_subscriber(db.session, subscriber_id)
    subscribers.check_lists_exist(db.session, [list_id])
    changed = subscribers.unsubscribe(db.session, subscriber_id, list_id, source="api")
    return jsonify(subscriber_id=subscriber_id, list_id=list_id, status="unsubscribed",
                   changed=changed)


BULK_KEYS = ("action", "list_id", "ids", "filter", "expected")


def bulk_json(record: BulkAction) -> dict[str, Any]:
    return {"id": record.id, "action": record.action, "list_id": record.list_id,
            "status": record.status, "total": record.total, "processed": record.processed,
            "acted_on": record.processed - record.no_longer_matched,
            "no_longer_matched": record.no_longer_matched,
            "changed": record.changed, "error": record.error,
            "created_at": iso(record.created_at), "finished_at": iso(record.finished_at)}


def _bulk_filter(data: Any) -> search.Filters:
    if not isinstance(data, dict):
        raise ValidationError("'filter' must be an object with any of "
                              f"{', '.join(FILTERS)}.")
    only_keys(data, FILTERS)
    list_id, segment_id = id_field(data, "list_id"), id_field(data, "segment_id")
    status, q = data.get("status", ""), data.get("q", "")
    if not isinstance(status, str) or (status and status not in search.STATUS_FILTERS):
        raise ValidationError(f"'status' must be one of {', '.join(search.STATUS_FILTERS)}.")
    if not isinstance(q, str) or len(q) > search.MAX_QUERY or "\x00" in q:
        raise ValidationError(f"'q' must be text of at most {search.MAX_QUERY} characters.")
    if list_id is not None and db.session.get(MailingList, list_id) is None:
        raise ValidationError(f"'filter.list_id': there is no list with id {list_id}.")
    if segment_id is not None and db.session.get(Segment, segment_id) is None:
        raise ValidationError(f"'filter.segment_id': there is no segment with id {segment_id}.")
    return search.Filters(q=" ".join(q.split()), match="contains", list_id=list_id,
                          status=status, segment_id=segment_id)


@bp.route("/subscribers/bulk", methods=["POST"])
def api_bulk():
    """The subscriber table's bulk actions: checked like the page's, done by the worker."""
    data = json_body()
    only_keys(data, BULK_KEYS)
    null_only_for(data)
    if ("ids" in data) == ("filter" in data):
        raise ValidationError("Give either 'ids' (at most "
                              f"{bulk.MAX_SELECTION:,}) or 'filter', not both.")
    ids = data.get("ids")
    if ids is not None and (not isinstance(ids, list) or not all(is_id(i) for i in ids)):
        raise ValidationError("'ids' must be a list of subscriber ids.")
    expected = data.get("expected")
    if expected is not None and (not isinstance(expected, int) or isinstance(expected, bool)):
        raise ValidationError("'expected' must be a whole number.")
    filters = _bulk_filter(data["filter"]) if "filter" in data else search.Filters()

    def planned(count: bool) -> bulk.Plan:
        return bulk.plan(
            db.session, action=data.get("action"), list_id=id_field(data, "list_id"),
            scope="selected" if ids is not None else "all", ids=[str(i) for i in ids or []],
            filters=filters, count=count)

    # Uncounted: the set `submit` stores is the count (checked against `expected`).
    plan = planned(count=False)
    if plan.action == "erase" and expected is None:
        raise ValidationError(f"An erase cannot be undone: give 'expected', the number of "
                              f"people it erases ({planned(count=True).total} now).")
    try:
        record = bulk.submit(db.session, plan, get_jobs().enqueue_bulk, expected=expected)
    except bulk.SetChanged as exc:
        raise Conflict(f"'expected' is {expected}, but the action touches {exc.total} "
                       "people now.") from exc
    return jsonify(bulk_json(record)), 202


@bp.route("/subscribers/bulk/<int:bulk_id>", methods=["GET"])
def api_bulk_progress(bulk_id: int):
    return jsonify(bulk_json(bulk.get(db.session, bulk_id)))
