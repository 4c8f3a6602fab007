"""Editing and deleting a draft over the API (the contract is held by
tests/webapp/test_api_broadcast_drafts.py and described in `webapp/apidocs/paths.py`).

- PATCH /api/broadcasts/<id> with any of "list_id", "segment_id", "subject", "preheader",
  "body", "format", "skip_if_received_within_hours", "identity_id", "codes", "text",
  "attachments", "versions", "ab_test", "send_at_local" -> 200 Broadcast ("versions": all of
  them, replacing what was). "text" is the plain-text part as the owner writes it (merge
  fields work), null for the one made from the body. What is not given
  stays as it is; "identity_id": null is the default sending identity.
  The audience is one list or one segment: giving "segment_id" clears the list and giving
  "list_id" clears the segment (both at once is 422). The cap: null or 0 removes it.
- DELETE /api/broadcasts/<id> -> 204.

Drafts only: a broadcast that is scheduled, sending or sent is 409 with its status (what was
sent is frozen, invariant 8 in docs/ARCHITECTURE.md). The domain's write is itself guarded by
the draft state, so a send pressed between our check and the write still wins cleanly.
"""

from __future__ import annotations

from typing import Any

from flask import jsonify

from broadside.campaigns.broadcasts import ab_drafts, drafts, service
from broadside.campaigns.codes.minting import codes_setting
from broadside.core.errors import Conflict
from broadside.core.models.sending import BroadcastStatus
from broadside.mail import attachment_use
from broadside.mail.body_formats import check_format
from webapp.api import bp, json_body
from webapp.api.ab_tests import ab_test_input
from webapp.api.broadcast_local_time import save_send_at_local, send_at_local_field
from webapp.api.broadcasts import audience_fields, broadcast_json
from webapp.api.inputs import cap_hours_field, id_field, only_keys, require_some, text_field
from webapp.extensions import db
from webapp.permissions import allow

EDITABLE = ("list_id", "segment_id", "subject", "preheader", "body", "format",
            "skip_if_received_within_hours", "identity_id", "codes", "text", "attachments",
            "versions", "ab_test", "send_at_local")


@bp.route("/broadcasts/<int:broadcast_id>", methods=["PATCH"])
@allow("write")
def edit_draft(broadcast_id: int):
    data = json_body()
    only_keys(data, EDITABLE)
    require_some(data, EDITABLE)
    list_id, segment_id = audience_fields(data)
    subject = text_field(data, "subject", non_empty=True) if "subject" in data else None
    preheader = text_field(data, "preheader") if "preheader" in data else None
    body = text_field(data, "body") if "body" in data else None
    cap: Any = cap_hours_field(data) if "skip_if_received_within_hours" in data else drafts.KEEP
    identity: Any = id_field(data, "identity_id") if "identity_id" in data else drafts.KEEP
    codes: Any = codes_setting(data["codes"]) if "codes" in data else drafts.KEEP
    text: Any = (None if data["text"] is None else text_field(data, "text")
                 ) if "text" in data else drafts.KEEP
    body_format: Any = check_format(data["format"]) if "format" in data else drafts.KEEP
    versions: Any = data["versions"] if "versions" in data else drafts.KEEP
    send_at_local = send_at_local_field(data)

    current = service.get_broadcast(db.session, broadcast_id)
    if current.status != BroadcastStatus.DRAFT:
        raise Conflict(f"Only a draft can be edited; this broadcast is {current.status}.")
    if "list_id" not in data and "segment_id" not in data:
        list_id, segment_id = current.list_id, current.segment_id
    if "attachments" in data:  # checked before anything is written, saved after the rest
        attachments = attachment_use.checked_ids(db.session, data["attachments"])
    if "ab_test" in data:  # written uncommitted: the draft's update commits both, or neither
        ab_drafts.stage_ab_test(db.session, broadcast_id, ab_test_input(data["ab_test"]),
                                subject=current.subject if subject is None else subject,
                                preheader=current.preheader if preheader is None else preheader)
    updated = drafts.update_draft(
        db.session, broadcast_id, list_id=list_id, segment_id=segment_id,
        subject=current.subject if subject is None else subject,
        preheader=current.preheader if preheader is None else preheader,
        body=current.body if body is None else body,
        skip_if_received_within_hours=cap,
        identity_id=identity,
        codes_prefix=codes,
        text_body=text,
        body_format=body_format,
        versions=versions,
    )
    if "attachments" in data:
        attachment_use.attach_to_draft(db.session, broadcast_id, attachments)
        db.session.refresh(updated)
    save_send_at_local(broadcast_id, send_at_local)
    return jsonify(broadcast_json(updated))


@bp.route("/broadcasts/<int:broadcast_id>", methods=["DELETE"])
@allow("write")
def delete_draft(broadcast_id: int):
    drafts.delete_draft(db.session, broadcast_id)
    return "", 204
