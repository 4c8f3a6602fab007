"""Broadcast API: create, list, send, steer, read, test (the contract is in the README's API
section and `webapp/apidocs/paths.py`, held by tests/webapp/test_api_broadcasts.py and
test_api_broadcast_drafts.py). Editing and deleting drafts is in `webapp/api/broadcast_drafts.py`.

- POST /api/broadcasts {"list_id" | "segment_id", "subject", "body", "format"?, "preheader"?,
  "skip_if_received_within_hours"?, "identity_id"?, "codes"?, "attachments"?} -> 201 {"id",
  "status", "identity_id", "codes", "attachments", "format"}. `format`: "markdown" (the
  default) or "html" (the body is HTML, sanitised for email when frozen). `attachments`: ids
  from POST /api/attachments (422 naming an unknown one, or the total over 10 MB). `codes`:
  null (off) or {"prefix": "SAVE"}, a code per recipient. `versions`: the message in other
  languages, [{"locale", "subject", "preheader"?, "body"}] (`content.versions.clean_versions`).
  `ab_test`: an A/B test (webapp/api/ab_tests.py), shown by GET. Exactly one audience. The cap:
  absent or null takes the Settings default, 0 means no cap, 1-720 hours. The sending
  identity: absent or null is the default, else a live identity's id.
- "send_at_local": "09:00" sends each copy at that hour in its reader's time zone, null at once
  (`webapp/api/broadcast_local_time.py`).
- GET /api/broadcasts?after=&limit= -> 200 {"items": [Broadcast], "next"}: newest first (by
  id, descending); `after` is the previous page's `next`, so a page holds ids below it.
"""

from __future__ import annotations

from typing import Any

from flask import current_app, jsonify, request

from broadside.campaigns.broadcasts import ab_drafts, drafts, merge_person, queries, service
from broadside.campaigns.codes.minting import codes_json, codes_setting
from broadside.core.errors import ValidationError, shown
from broadside.core.models import Broadcast
from broadside.core.models.sending import DELIVERY_STATUSES
from broadside.mail import attachment_use
from broadside.mail.body_formats import DEFAULT_FORMAT, check_format
from webapp.api import bp, json_body
from webapp.api.ab_tests import ab_result_json, ab_test_input, ab_test_json
from webapp.api.broadcast_local_time import save_send_at_local, send_at_local_field, send_at_local_json
from webapp.api.inputs import (
    BROADCAST_FIELDS,
    cap_hours_field,
    id_field,
    iso,
    null_only_for,
    only_keys,
    page_args,
    require_keys,
    takes_query,
    text_field,
)
from webapp.extensions import db, get_jobs
from webapp.permissions import allow, own_address_only

DEFAULT_PAGE = 50
MAX_PAGE = 500
DELIVERIES_PAGE = 1000
MAX_DELIVERIES_PAGE = 10_000


def _state(broadcast) -> dict:
    return {"id": broadcast.id, "status": broadcast.status}


def broadcast_json(b: Broadcast) -> dict[str, Any]:
    """A broadcast in lists and after an edit (the body is left out: it can be 500 kB)."""
    return {
        "id": b.id, "status": b.status, "subject": b.subject, "preheader": b.preheader,
        "format": b.body_format, "list_id": b.list_id, "segment_id": b.segment_id,
        "skip_if_received_within_hours": b.skip_if_received_within_hours,
        "identity_id": b.identity_id, "codes": codes_json(b.codes_prefix),
        "attachments": list(b.attachment_ids or []), "versions": list(b.versions or []),
        "ab_test": ab_test_json(b.ab_test), "counts": {"total": b.total,
                   **{status: getattr(b, f"{status}_count") for status in DELIVERY_STATUSES}},
        "created_at": iso(b.created_at), "updated_at": iso(b.updated_at),
        "scheduled_at": iso(b.scheduled_at), "finished_at": iso(b.finished_at),
        **send_at_local_json(b),
    }


def audience_fields(data: dict[str, Any]) -> tuple[int | None, int | None]:
    """(list_id, segment_id) as given; both set is refused (a broadcast has one audience)."""
    list_id, segment_id = id_field(data, "list_id"), id_field(data, "segment_id")
    if list_id is not None and segment_id is not None:
        raise ValidationError("Give 'list_id' or 'segment_id', not both: a broadcast goes to a "
                              "list or to a segment.")
    return list_id, segment_id


@bp.route("/broadcasts", methods=["POST"])
@allow("write")
def create_broadcast():
    data = json_body()
    null_only_for(data, ("identity_id", "skip_if_received_within_hours", "codes", "versions",
                         "ab_test", "send_at_local"), documented=BROADCAST_FIELDS)
    require_keys(data, ("subject", "body"))
    list_id, segment_id = audience_fields(data)
    if list_id is None and segment_id is None:
        raise ValidationError("'list_id' or 'segment_id' is required: who is it for?")
    cap = cap_hours_field(data)
    attachments = attachment_use.checked_ids(db.session, data.get("attachments", []))
    test = ab_test_input(data.get("ab_test"))  # judged before anything is written
    ab_drafts.clean_for(test, subject=str(data["subject"]), preheader=str(data.get("preheader") or ""))
    send_at_local = send_at_local_field(data)  # checked before anything is written
    broadcast = drafts.create_draft(
        db.session,
        list_id=list_id,
        segment_id=segment_id,
        subject=text_field(data, "subject", non_empty=True),
        body=data["body"],
        preheader=data.get("preheader", ""),
        skip_if_received_within_hours=drafts.KEEP if cap is None else cap,
        identity_id=id_field(data, "identity_id"),
        codes_prefix=codes_setting(data.get("codes")),
        body_format=check_format(data.get("format", DEFAULT_FORMAT)),
        versions=data.get("versions"),
    )
    if attachments:
        attachment_use.attach_to_draft(db.session, broadcast.id, attachments)
    if test is not None:
        ab_drafts.set_ab_test(db.session, broadcast.id, test)
    save_send_at_local(broadcast.id, send_at_local)
    return jsonify({**_state(broadcast), "identity_id": broadcast.identity_id,
                    **send_at_local_json(broadcast),
                    "codes": codes_json(broadcast.codes_prefix),
                    "attachments": attachments, "format": broadcast.body_format,
                    "versions": list(broadcast.versions or [])}), 201


@bp.route("/broadcasts", methods=["GET"])
@takes_query("after", "limit")
def list_broadcasts():
    after, limit = page_args(default_limit=DEFAULT_PAGE, max_limit=MAX_PAGE)
    rows, following = drafts.broadcasts_before(db.session, before=after, limit=limit)
    return jsonify(items=[broadcast_json(b) for b in rows], next=following)


@bp.route("/broadcasts/<int:broadcast_id>/send", methods=["POST"])
@allow("send")
def send(broadcast_id: int):
    broadcast = service.send_broadcast(
        db.session, broadcast_id, default_from=current_app.config["MAIL_FROM"], jobs=get_jobs()
    )
    return jsonify(_state(broadcast)), 202


@bp.route("/broadcasts/<int:broadcast_id>/pause", methods=["POST"])
@allow("send")
def pause(broadcast_id: int):
    return jsonify(_state(service.pause_broadcast(db.session, broadcast_id)))


@bp.route("/broadcasts/<int:broadcast_id>/resume", methods=["POST"])
@allow("send")
def resume(broadcast_id: int):
    return jsonify(_state(service.resume_broadcast(db.session, broadcast_id, jobs=get_jobs())))


@bp.route("/broadcasts/<int:broadcast_id>/cancel", methods=["POST"])
@allow("send")
def cancel(broadcast_id: int):
    return jsonify(_state(service.cancel_broadcast(db.session, broadcast_id, jobs=get_jobs())))


@bp.route("/broadcasts/<int:broadcast_id>")
def show(broadcast_id: int):
    b = service.get_broadcast(db.session, broadcast_id)
    return jsonify(
        {
            **_state(b),
            "identity_id": b.identity_id,
            "codes": codes_json(b.codes_prefix),
            "attachments": list(b.attachment_ids or []),
            "format": b.body_format,
            "versions": list(b.versions or []),
            "ab_test": ab_test_json(b.ab_test), "ab_result": ab_result_json(b.id),
            **send_at_local_json(b),
            "pause_reason": shown(b.pause_reason),
            "total": b.total,
            # One counter column per delivery status, in the order of DELIVERY_STATUSES.
            "counts": {status: getattr(b, f"{status}_count") for status in DELIVERY_STATUSES},
        }
    )


@bp.route("/broadcasts/<int:broadcast_id>/deliveries")
@takes_query("status", "after", "limit")
def deliveries(broadcast_id: int):
    service.get_broadcast(db.session, broadcast_id)
    status = request.args.get("status")
    if status is not None and status not in DELIVERY_STATUSES:
        raise ValidationError(f"'status' must be one of {', '.join(DELIVERY_STATUSES)}.")
    after, limit = page_args(default_limit=DELIVERIES_PAGE, max_limit=MAX_DELIVERIES_PAGE)
    rows = queries.delivery_rows(db.session, broadcast_id, status=status, after=after or 0,
                                 limit=limit)
    return jsonify([{"id": row.id, "email": row.email, "status": row.status, "reason": shown(row.reason),
                     "attempts": row.attempts} for row in rows])


@bp.route("/broadcasts/<int:broadcast_id>/test", methods=["POST"])
@allow("write")
def test_send(broadcast_id: int):
    data = json_body()
    only_keys(data, ("email", "fill_from", "variant"))
    null_only_for(data)
    if not isinstance(data.get("email"), str):
        raise ValidationError("'email' is required.", field="email")
    picked = data.get("fill_from")
    if picked is not None and (not isinstance(picked, str) or not picked.strip()):
        raise ValidationError("'fill_from' must be a subscriber's email address (or left out "
                              "for the newest active one).", field=merge_person.FIELD)
    own_address_only(data["email"], field="email")  # a writer's token: only to their own address
    broadcast = service.get_broadcast(db.session, broadcast_id)
    person = merge_person.chosen(db.session, picked, list_id=broadcast.list_id,
                                 segment_id=broadcast.segment_id)
    service.send_test(
        db.session, broadcast_id, data["email"], default_from=current_app.config["MAIL_FROM"],
        jobs=get_jobs(), person=person, variant=data.get("variant"),
    )
    return jsonify({"id": broadcast_id, "test_to": data["email"].strip().lower(),
                    "variant": data.get("variant") or "A",
                    "filled_from": {"email": person.email, "name": person.name,
                                    "sample": person.subscriber_id is None}}), 202
