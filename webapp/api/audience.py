"""The audience API: lists, subscribers and CSV import (the contract is held by
tests/webapp/test_api_audience.py).

- POST /api/lists {"name"} -> 201 {"id", "name"}
- GET /api/lists -> 200 [{"id", "name", "tracking", "counts": {"active", "unconfirmed",
  "unsubscribed"}}]
- PATCH /api/lists/<id> {"tracking": "off" | "counts" | "people"} -> 200 {"id", "name",
  "tracking"}: the list's own tracking (`analytics.modes.set_list_tracking`): off, no pixel
  and no rewritten link for its readers whatever the broadcast's mode; counts, aggregate at
  most; people, per person where a broadcast tracks per person
- POST /api/subscribers {"email", "name"?, "lists": [int], "attributes"?, "locale"?, "timezone"?,
  "welcome"?}
  -> 201 {"id", "email", "warnings"} (new) or 200 (known address; the lists are added as
  active). "warnings": the owner's words when some sending identities cannot reach the
  address (a local part outside ASCII needs SMTPUTF8), else [].
  "welcome": true enters them into the welcome automations of each list they newly join.
  "locale": their language tag ("de"), replacing a known person's when given; 422 if invalid.
  "timezone": their IANA time zone ("Asia/Tokyo"), likewise.
- GET /api/subscribers/<id>, DELETE /api/subscribers/<id> (erases)
- POST /api/lists/<id>/import (multipart `file`, `consent`, `welcome`?): a file of at most
  API_IMPORT_INLINE_BYTES (1 MB by default, some 15,000 rows) is imported in the request ->
  200 {"import_id", "status", "consent", "imported", "updated", "skipped", "rejected":
  [{"line", "reason", "row"}], "rejected_count", "warnings": [{"line", "message"}]}, the
  answer small imports always had. A larger one (up to the page's MAX_IMPORT_BYTES) is stored
  and imported by the worker, like the page's -> 202 {"import_id", "status": "queued",
  "status_url"} with a Location header: a million rows cannot be written inside a short
  HTTP request. GET /api/imports/<id> -> 200: the same fields as the 200 above, plus
  "total_rows" (null until counted), "processed_rows" and "error"; poll it until "status" is
  "done" or "failed". `consent`: "opted_in" (the
  default when absent, as this endpoint always behaved, so existing clients keep working) adds
  people active; "confirm" adds them unconfirmed and the worker sends
  each the sign-up form's confirmation email (status "asking" until they are all queued).
  `welcome` 1/true: exactly the people the import adds to the list enter its welcome
  automations (0/false or absent: nobody does; people asked to confirm enter on confirming);
  the answer's "welcomed" counts them, and "welcome_note" says when the list has no enabled
  welcome automation (nobody is welcomed). "empty_rows": the file's blank rows, skipped.
Bad input is 422 {"error"}, unknown ids 404 {"error"}.
"""

from __future__ import annotations

from flask import current_app, jsonify, request, url_for
from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import RequestEntityTooLarge

from broadside.audience import lists
from broadside.audience.subscribers import service as subscribers
from broadside.audience.transfer import importer
from broadside.audience.transfer import report as import_report
from broadside.campaigns.analytics import modes
from broadside.core.errors import ValidationError
from webapp.address_warnings import warnings_for
from webapp.api import bp, json_body
from webapp.api.inputs import (
    LIST_FIELDS,
    SUBSCRIBER_FIELDS,
    null_only_for,
    only_keys,
    require_keys,
    takes_query,
)
from webapp.api.multipart import read_upload
from webapp.api.subscribers import locale_field, timezone_field
from webapp.extensions import db, get_jobs
from webapp.permissions import allow
from webapp.text_input import reads_own_body

# Files up to this size are imported in the request (200, the original answer); larger ones
# go to the worker (202 and a status URL).
DEFAULT_API_IMPORT_INLINE_BYTES = 1024 * 1024
LIST_PATCH_FIELDS = ("tracking",)


def _iso(moment) -> str | None:
    return moment.isoformat() + "Z" if moment else None


def _int_list(value) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ValidationError('"lists" must be an array of list ids (integers).')
    return value


# The form values `welcome` takes on an import (a form field has no booleans).
WELCOME_VALUES = {"1": True, "true": True, "0": False, "false": False}


def _welcome_flag(data: dict) -> bool:
    value = data.get("welcome", False)
    if not isinstance(value, bool):
        raise ValidationError('"welcome" must be true or false.')
    return value


def _welcome_field(fields: MultiDict[str, str]) -> bool:
    """The import's `welcome` form field; anything but 1, 0, true or false is refused, so a
    typo never imports people without the welcome that was asked for."""
    given = fields.getlist("welcome")
    if not given:
        return False
    if len(given) > 1 or given[0] not in WELCOME_VALUES:
        raise ValidationError('"welcome" must be 1, 0, true or false.')
    return WELCOME_VALUES[given[0]]


CONSENT_REQUIRED = ('Send "consent" next to "file": "opted_in" (they already opted in: added as '
                    'subscribed) or "confirm" (ask them to confirm: each gets the double opt-in '
                    'email).')


def _consent_field(fields: MultiDict[str, str]) -> importer.Consent:
    """The import's `consent` form field: one of the two choices. Absent, it is "opted_in",
    what this endpoint did before the choice existed (an API client's import must not start
    failing, or start emailing people, because of an upgrade); the page asks every time."""
    given = fields.getlist("consent")
    if not given:
        return "opted_in"
    for consent in importer.CONSENTS:
        if given == [consent]:
            return consent
    raise ValidationError(CONSENT_REQUIRED)


def _optional_str(data: dict, key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValidationError(f'"{key}" must be a string.')
    return value


@bp.route("/lists", methods=["POST"])
def api_create_list():
    data = json_body()
    null_only_for(data, documented=LIST_FIELDS)
    name = _optional_str(data, "name")
    created = lists.create_list(db.session, name, _optional_str(data, "description") or "")
    return jsonify(id=created.id, name=created.name), 201


def _list_json(summary: lists.ListSummary) -> dict:
    return {"id": summary.list.id, "name": summary.list.name,
            "tracking": modes.list_tracking(summary.list), "counts": {
                "active": summary.counts["active"], "unconfirmed": summary.counts["unconfirmed"],
                "unsubscribed": summary.counts["unsubscribed"]}}


@bp.route("/lists", methods=["GET"])
def api_lists():
    return jsonify([_list_json(s) for s in lists.list_summaries(db.session)])


@bp.route("/lists/<int:list_id>", methods=["GET"])
def api_list(list_id: int):
    return jsonify(_list_json(lists.list_summary(db.session, list_id)))


@bp.route("/lists/<int:list_id>", methods=["PATCH"])
@allow("manage")
def api_update_list(list_id: int):
    data = json_body()
    only_keys(data, LIST_PATCH_FIELDS)
    require_keys(data, LIST_PATCH_FIELDS)
    changed = modes.set_list_tracking(db.session, list_id, data["tracking"])
    return jsonify(id=changed.id, name=changed.name, tracking=modes.list_tracking(changed))


@bp.route("/subscribers", methods=["POST"])
def api_save_subscriber():
    data = json_body()
    null_only_for(data, ("name", "locale", "timezone"), documented=SUBSCRIBER_FIELDS)
    email = data.get("email")
    if not isinstance(email, str):
        raise ValidationError('"email" is required and must be a string.')
    subscriber, created = subscribers.save_subscriber(
        db.session, email=email, name=_optional_str(data, "name"),
        attributes=data.get("attributes"), list_ids=_int_list(data.get("lists", [])),
        source="api", welcome=_welcome_flag(data), locale=locale_field(data),
        timezone=timezone_field(data),
    )
    return (jsonify(id=subscriber.id, email=subscriber.email,
                    warnings=warnings_for(subscriber.email)), 201 if created else 200)


@bp.route("/subscribers/<int:subscriber_id>", methods=["GET"])
def api_subscriber(subscriber_id: int):
    subscriber = subscribers.get_subscriber(db.session, subscriber_id)
    return jsonify(
        id=subscriber.id, email=subscriber.email, name=subscriber.name,
        attributes=subscriber.attributes or {}, locale=subscriber.locale,
        timezone=subscriber.timezone,
        created_at=_iso(subscriber.created_at),
        suppression=subscriber.suppression, suppressed_at=_iso(subscriber.suppressed_at),
        subscriptions=[
            {"list_id": s.list_id, "list": s.list_name, "status": s.status,
             "created_at": _iso(s.created_at), "confirmed_at": _iso(s.confirmed_at),
             "unsubscribed_at": _iso(s.unsubscribed_at), "unsubscribe_source": s.unsubscribe_source}
            for s in subscribers.subscriptions_of(db.session, subscriber_id)
        ],
    )


@bp.route("/subscribers/<int:subscriber_id>", methods=["DELETE"])
def api_erase_subscriber(subscriber_id: int):
    subscribers.erase(db.session, subscriber_id)
    return "", 204


@bp.route("/lists/<int:list_id>/import", methods=["POST"])
@takes_query(form_fields=("welcome", "consent"))  # a client may put them in the URL: say where
@reads_own_body  # streamed by read_upload, which applies the text rule to its parts
def api_import(list_id: int):
    lists.get_list(db.session, list_id)
    limit = int(current_app.config["MAX_IMPORT_BYTES"])
    if current_app.config.get("API_IMPORT_MAX_BYTES"):
        limit = min(limit, int(current_app.config["API_IMPORT_MAX_BYTES"]))
    too_large = importer.FileTooLarge(f"The file is larger than the import limit of {limit:,} "
                                      "bytes.")
    if request.content_length and request.content_length > limit + 64 * 1024:
        raise too_large
    try:
        upload = read_upload("file")  # with a filename or without
    except RequestEntityTooLarge:
        raise too_large from None
    inline = int(current_app.config.get("API_IMPORT_INLINE_BYTES",
                                        DEFAULT_API_IMPORT_INLINE_BYTES))
    with upload:  # its file closed whatever happens
        welcome, consent = _welcome_field(upload.fields), _consent_field(upload.fields)
        if upload.file is None:
            raise ValidationError('Send the CSV as a multipart form field named "file".')
        record, rejections = importer.import_now(
            db.session, list_id, upload.filename, upload.file,
            instance_path=current_app.instance_path, max_bytes=limit, consent=consent,
            enqueue=get_jobs().enqueue_import, welcome=welcome, inline_max_bytes=inline,
        )
    if rejections is None:
        status_url = url_for("api.api_import_status", import_id=record.id)
        response = jsonify(import_id=record.id, status=record.status, status_url=status_url)
        response.headers["Location"] = status_url
        return response, 202
    return jsonify(_import_result(record, rejections))


def _import_result(record, rejections) -> dict:
    warnings = import_report.first_rows(db.session, record.id, "warning",
                                        limit=import_report.MAX_KEPT_ROWS)
    return dict(
        import_id=record.id, status=record.status, consent=record.consent,
        imported=record.imported, updated=record.updated,
        skipped={"unsubscribed": record.skipped_unsubscribed,
                 "suppressed": record.skipped_suppressed},
        rejected=[{"line": r.line, "reason": r.reason, "row": r.fields} for r in rejections],
        rejected_count=record.rejected,
        warnings=[{"line": w.line, "message": w.reason} for w in warnings],
        empty_rows=record.empty_rows, welcomed=record.welcomed,
        welcome_note=_welcome_note(record),
    )


def _welcome_note(record) -> str | None:
    """Said when the import asked for the welcome series and the list has none to give."""
    if not record.welcome or import_report.welcome_series(db.session, record.list_id):
        return None
    return ("No enabled welcome automation on this list: nobody "
            + ("who confirms gets" if record.consent == "confirm" else "got")
            + " the welcome series.")


@bp.route("/imports/<int:import_id>", methods=["GET"])
def api_import_status(import_id: int):
    record = import_report.get_import(db.session, import_id)
    db.session.refresh(record)
    rejections = import_report.first_rows(db.session, record.id, "rejected",
                                          limit=import_report.MAX_KEPT_ROWS)
    return jsonify(**_import_result(record, rejections), total_rows=record.total_rows,
                   processed_rows=record.processed_rows, error=record.error)
