"""Segments over the API (the contract is held by tests/webapp/test_api_segments.py and
described in `webapp/apidocs/paths.py`).

- GET /api/segments -> 200 [Segment], by name as the Segments page lists them (no paging:
  an installation has tens of segments, not thousands)
- POST /api/segments {"name", "rules"} -> 201 Segment
- GET /api/segments/<id> -> 200 Segment with "count" (who a send would reach now)
- PUT /api/segments/<id> {"name", "rules"} -> 200 Segment (both replaced)
- DELETE /api/segments/<id> -> 204; 409 with the reason while a scheduled, queued, sending or
  paused broadcast uses it (drafts that chose it lose their audience)
- GET /api/segments/<id>/count -> 200 {"count": N}

A Segment is {"id", "name", "rules", "created_at", "updated_at"}; "rules" is the rule tree the
builder saves (`broadside.segments.rules`), normalised. Every rule is checked before anything
is written: a bad one is 422 with a message naming the condition ("Condition 2.1
(attributes.age gt): the value must be a number"). A taken name is 409, an unknown id 404.
"""

from __future__ import annotations

from typing import Any

from flask import jsonify

from broadside.core.models import Segment
from broadside.segments import service as segments
from webapp.api import bp, json_body
from webapp.api.inputs import iso, only_keys, require_keys
from webapp.extensions import db
from webapp.permissions import allow

FIELDS = ("name", "rules")


def segment_json(segment: Segment) -> dict[str, Any]:
    return {"id": segment.id, "name": segment.name, "rules": segment.rules,
            "created_at": iso(segment.created_at), "updated_at": iso(segment.updated_at)}


def _name_and_rules() -> tuple[Any, Any]:
    data = json_body()
    only_keys(data, FIELDS)
    require_keys(data, FIELDS)
    return data["name"], data["rules"]


@bp.route("/segments", methods=["GET"])
def api_segments():
    return jsonify([segment_json(s) for s in segments.all_segments(db.session)])


@bp.route("/segments", methods=["POST"])
@allow("write")
def api_create_segment():
    name, rules = _name_and_rules()
    return jsonify(segment_json(segments.create_segment(db.session, name, rules))), 201


@bp.route("/segments/<int:segment_id>", methods=["GET"])
def api_segment(segment_id: int):
    segment = segments.get_segment(db.session, segment_id)
    return jsonify({**segment_json(segment), "count": segments.count_matching(db.session, segment)})


@bp.route("/segments/<int:segment_id>", methods=["PUT"])
@allow("write")
def api_update_segment(segment_id: int):
    name, rules = _name_and_rules()
    return jsonify(segment_json(segments.update_segment(db.session, segment_id, name, rules)))


@bp.route("/segments/<int:segment_id>", methods=["DELETE"])
@allow("write")
def api_delete_segment(segment_id: int):
    segments.delete_segment(db.session, segment_id)
    return "", 204


@bp.route("/segments/<int:segment_id>/count", methods=["GET"])
def api_segment_count(segment_id: int):
    segment = segments.get_segment(db.session, segment_id)
    return jsonify(count=segments.count_matching(db.session, segment))
