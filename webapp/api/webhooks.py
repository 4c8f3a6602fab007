"""Outgoing webhook endpoints over the API (described in `webapp/apidocs/webhooks.py`, held by
tests/webapp/test_api_webhooks.py).

- GET /api/webhooks -> 200 [Endpoint], oldest first; never a secret
- POST /api/webhooks {"url", "events": [...]} -> 201 Endpoint with its `secret`, shown this
  once (Settings -> Webhooks shows it again to the signed-in owner)
- DELETE /api/webhooks/<id> -> 204 (its delivery log goes with it), 404 if there is none

A refused body (an unknown field, a URL that is not http(s) or reaches a private address
without WEBHOOKS_ALLOW_PRIVATE=1, an unknown or missing event) is 422 with the reason. Write
routes need a full token (a read-only one gets 403, like every write).
"""

from __future__ import annotations

from flask import current_app, jsonify

from broadside.webhooks import endpoints
from webapp.api import bp, json_body
from webapp.extensions import db


@bp.route("/webhooks", methods=["GET"])
def api_webhooks():
    return jsonify([endpoints.as_output(e) for e in endpoints.all_endpoints(db.session)])


@bp.route("/webhooks", methods=["POST"])
def api_create_webhook():
    url, events = endpoints.parse_input(json_body())
    endpoint = endpoints.create(db.session, url, events,
                                allow_private=bool(current_app.config.get("WEBHOOKS_ALLOW_PRIVATE")))
    return jsonify(endpoints.as_output(endpoint, with_secret=True)), 201


@bp.route("/webhooks/<int:endpoint_id>", methods=["DELETE"])
def api_delete_webhook(endpoint_id: int):
    endpoints.remove(db.session, endpoint_id)
    return "", 204
