"""Transactional templates and their messages over the API (described in
`webapp/apidocs/transactional.py`, held by tests/webapp/test_api_transactional.py).

- GET /api/transactional/templates -> 200 [Template], by name
- POST /api/transactional/templates {"name", "subject", "body", "identity_id"?, "essential"?}
  -> 201 Template (its first revision frozen); a live template's name taken: 409
- GET, PUT (the same body: the whole template), DELETE (204: marked deleted, its name free
  again) /api/transactional/templates/<id>
- POST /api/transactional {"template": NAME or id, "to", "data"?} with an optional
  `Idempotency-Key` header -> 202 {"id", "status"}; the same key and request again: the same
  answer, nothing more sent (`Idempotent-Replayed: true`); the same key with another request:
  409; an unknown template: 404 naming `template`; a suppressed address, or an unsubscribed
  one for a template not essential: 422 naming `to`
- GET /api/transactional/<id> -> 200 {"id", "status", "reason", ...}

Every refusal names its field (`Idempotency-Key` for the header).
"""

from __future__ import annotations

from typing import Any

from flask import current_app, jsonify, request

from broadside.campaigns.transactional import sending, templates
from webapp.api import bp, json_body
from webapp.api.inputs import iso
from webapp.extensions import db, get_jobs

KEY_HEADER = "Idempotency-Key"


@bp.route("/transactional/templates", methods=["GET"])
def api_transactional_templates():
    return jsonify([templates.template_json(t) for t in templates.list_templates(db.session)])


@bp.route("/transactional/templates", methods=["POST"])
def api_create_transactional_template():
    data = templates.parse_template(db.session, json_body())
    template = templates.create_template(db.session, data,
                                         default_from=current_app.config["MAIL_FROM"])
    return jsonify(templates.template_json(template)), 201


@bp.route("/transactional/templates/<int:template_id>", methods=["GET"])
def api_transactional_template(template_id: int):
    return jsonify(templates.template_json(templates.get_template(db.session, template_id)))


@bp.route("/transactional/templates/<int:template_id>", methods=["PUT"])
def api_replace_transactional_template(template_id: int):
    templates.get_template(db.session, template_id)  # 404 before judging the body
    data = templates.parse_template(db.session, json_body())
    template = templates.update_template(db.session, template_id, data,
                                         default_from=current_app.config["MAIL_FROM"])
    return jsonify(templates.template_json(template))


@bp.route("/transactional/templates/<int:template_id>", methods=["DELETE"])
def api_delete_transactional_template(template_id: int):
    templates.delete_template(db.session, template_id)
    return "", 204


@bp.route("/transactional", methods=["POST"])
def api_send_transactional():
    key = sending.check_key(request.headers.get(KEY_HEADER))
    accepted = sending.send_template(db.session, get_jobs(), sending.parse_send(json_body()),
                                     key=key, default_from=current_app.config["MAIL_FROM"])
    response = jsonify(id=accepted.id, status=accepted.status)
    response.status_code = 202
    if accepted.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


def _state(state: sending.MessageState) -> dict[str, Any]:
    return {"id": state.id, "status": state.status, "reason": state.reason, "to": state.to,
            "template_id": state.template_id, "template": state.template,
            "attempts": state.attempts, "created_at": iso(state.created_at),
            "sent_at": iso(state.sent_at)}


@bp.route("/transactional/<int:message_id>", methods=["GET"])
def api_transactional_message(message_id: int):
    return jsonify(_state(sending.message_state(db.session, message_id)))
