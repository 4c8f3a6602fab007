"""Automations over the API (the contract is held by tests/webapp/test_api_automations.py and
described in `webapp/apidocs/automations.py`).

- GET /api/automations -> 200 [Automation], highest priority first, as the Automations page
  lists them (no paging: an installation has a handful, not thousands)
- POST /api/automations {"name", "trigger", "steps", "priority"?, "record_only"?,
  "identity_id"?} -> 201 Automation (disabled until it is enabled)
- GET /api/automations/<id> -> 200 Automation
- PUT /api/automations/<id> (the same body) -> 200 Automation: the whole automation is
  replaced; steps are matched by position, changed content freezes a new revision (people
  already due keep theirs), steps beyond the new count are removed and their pending messages
  skipped
- DELETE /api/automations/<id> -> 204; its pending messages are skipped, what it sent is kept
- POST /api/automations/<id>/enable, /disable -> 200 Automation (idempotent); enable is 422
  with the reason while it cannot send: no step, no list or segment, or no postal address
  (its identity's or Settings', which every email prints, as for a broadcast's send)

An Automation is {"id", "name", "status", "pause_reason", "trigger", "priority",
"record_only", "identity_id", "entered", "created_at", "updated_at", "steps", "feed"}
(`identity_id`: the sending identity its messages go out through, null for the default); each
step carries its "counts" of messages by status. The trigger is {"type": "joined_list",
"list_id"}, {"type": "segment", "segment_id", "every_hours"} or {"type": "feed", "url",
"list_id" | "segment_id", "mode": "each" | "digest", "every": "daily" | "weekly", "at":
"HH:MM", "weekday"?} (`broadside.campaigns.feeds.trigger`); "feed" is then its last poll, its
error, the items waiting for a digest and the newest sent with their broadcast (null for the
other triggers). A refused body is 422 with a message naming
the field (and the step by its number), a taken name 409, an unknown or deleted id 404.
"""

from __future__ import annotations

from typing import Any

from flask import current_app, jsonify

from broadside.campaigns.automations import service as automations
from broadside.campaigns.codes.minting import codes_json
from broadside.campaigns.feeds.status import feed_status, status_json
from broadside.core import roles
from broadside.core.errors import ValidationError, shown
from broadside.core.models import Automation, AutomationStep
from broadside.core.models.sending import DELIVERY_STATUSES
from webapp.api import bp, json_body
from webapp.api.inputs import is_id, iso, only_keys, require_keys
from webapp.extensions import db
from webapp.params import MAX_DATABASE_ID
from webapp.permissions import allow, can

FIELDS = ("name", "trigger", "priority", "record_only", "steps", "identity_id")
# "steps" is required too: a PUT that left it out would otherwise remove every step.
REQUIRED = ("name", "trigger", "steps")
TRIGGER_IDS = ("list_id", "segment_id")


def step_json(step: AutomationStep, counts: dict[str, int] | None) -> dict[str, Any]:
    return {"id": step.id, "position": step.position, "delay": step.delay,
            "delay_seconds": step.delay_seconds, "subject": step.subject,
            "preheader": step.preheader, "body": step.body, "format": step.body_format,
            "text": step.text_body,
            "revision_id": step.revision_id,
            "codes": codes_json(step.codes_prefix),
            "attachments": list(step.attachment_ids or []),
            "versions": list(step.versions or []),
            "counts": {status: (counts or {}).get(status, 0) for status in DELIVERY_STATUSES}}


def automation_json(automation: Automation) -> dict[str, Any]:
    counts = automations.step_counts(db.session, automation.id)
    shape = automations.as_input(db.session, automation)
    return {
        "id": automation.id, "name": automation.name, "status": automation.status,
        "pause_reason": shown(automation.pause_reason), "trigger": shape["trigger"],
        "priority": automation.priority, "record_only": automation.record_only,
        "identity_id": automation.identity_id,
        "entered": automations.entered_count(db.session, automation.id),
        "created_at": iso(automation.created_at), "updated_at": iso(automation.updated_at),
        "steps": [step_json(step, counts.get(step.id))
                  for step in automations.steps_of(db.session, automation.id)],
        "feed": (status_json(feed_status(db.session, automation.id))
                 if automation.trigger_type == "feed" else None),
    }


def _trigger_ids_in_range(data: dict[str, Any]) -> None:
    # The domain looks the list or segment up by this id; beyond the id columns' range
    # PostgreSQL raises instead of finding nothing.
    trigger = data.get("trigger")
    if not isinstance(trigger, dict):
        return
    for key in TRIGGER_IDS:
        value = trigger.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and not is_id(value):
            raise ValidationError(f"The trigger's {key} must be an id: a whole number from 1 "
                                  f"to {MAX_DATABASE_ID}.")


def _input() -> automations.AutomationInput:
    data = json_body()
    only_keys(data, FIELDS)
    require_keys(data, REQUIRED)
    _trigger_ids_in_range(data)
    return automations.parse_input(data)


def _default_from() -> str:
    return current_app.config["MAIL_FROM"]


@bp.route("/automations", methods=["GET"])
def api_automations():
    return jsonify([automation_json(a) for a in automations.list_automations(db.session)])


@bp.route("/automations", methods=["POST"])
@allow("write")
def api_create_automation():
    data = _input()
    automation = automations.create_automation(db.session, data, default_from=_default_from())
    return jsonify(automation_json(automation)), 201


@bp.route("/automations/<int:automation_id>", methods=["GET"])
def api_automation(automation_id: int):
    return jsonify(automation_json(automations.get_automation(db.session, automation_id)))


@bp.route("/automations/<int:automation_id>", methods=["PUT"])
@allow("write")
def api_replace_automation(automation_id: int):
    data = _input()
    automation = automations.update_automation(db.session, automation_id, data,
                                               default_from=_default_from(),
                                               only_if_off=not can(roles.SEND))
    return jsonify(automation_json(automation))


@bp.route("/automations/<int:automation_id>", methods=["DELETE"])
@allow("write")
def api_delete_automation(automation_id: int):
    automations.delete(db.session, automation_id, only_if_off=not can(roles.SEND))
    return "", 204


@bp.route("/automations/<int:automation_id>/enable", methods=["POST"])
@allow("send")
def api_enable_automation(automation_id: int):
    return jsonify(automation_json(automations.enable(db.session, automation_id)))


@bp.route("/automations/<int:automation_id>/disable", methods=["POST"])
@allow("send")
def api_disable_automation(automation_id: int):
    return jsonify(automation_json(automations.disable(db.session, automation_id)))
