"""Sending identities over the API (the contract is held by tests/webapp/test_api_identities.py
and described in `webapp/apidocs/identities.py`).

- GET /api/identities -> 200 [Identity], the default first (its id is null), then by name
- POST /api/identities {"name", "from", "transport"?, "delay_ms"?, "hourly_limit"?,
  "account_rate"?, "postal_address"?, "webhook_secret"?, "bounce_mailbox"?, "verp_domain"?}
  -> 201 Identity; 422 once the installation has
  MAX_IDENTITIES of them (besides the default), the message naming the bound
- GET /api/identities/<id> -> 200 Identity
- PUT /api/identities/<id> (the same body) -> 200 Identity: the whole identity is replaced,
  except that a missing or null `transport`, `webhook_secret` or `bounce_mailbox` keeps the
  stored one (they are secrets, never shown back); a new transport URL resumes a paused identity; the
  automations sending through it get new revisions with its From and postal address, in the
  same commit (their next messages carry them; a step that would no longer build: 422)
- DELETE /api/identities/<id> -> 204, or 409 naming what still uses it

`account_rate` is the provider account's ceiling (requests per second): set on one identity, it
is shown for every identity of its account, the smallest value set winning
(broadside.delivery.identities.accounts). An Identity is
`broadside.delivery.identities.service.as_input`: the transport URL and the bounce mailbox
URL masked, the webhook secret never (only `webhook_secret_set`). A refused body is 422 with a
message naming the field (an unknown field included), a taken name 409, an unknown or deleted
id 404. The default identity is the environment: it is listed, and changed only where it is set.
"""

from __future__ import annotations

from flask import current_app, jsonify

from broadside.campaigns.automations import refreeze
from broadside.core.errors import NotFound
from broadside.delivery.identities import service
from broadside.delivery.identities.service import SendingIdentity
from webapp.api import bp, json_body
from webapp.extensions import db


def _live(identity_id: int) -> SendingIdentity:
    identity = service.resolve(db.session, current_app.config, identity_id)
    if identity.status == "deleted":
        raise NotFound(f"There is no sending identity {identity_id}.")
    return identity


@bp.route("/identities", methods=["GET"])
def api_identities():
    return jsonify([service.as_input(i)
                    for i in service.all_identities(db.session, current_app.config)])


@bp.route("/identities", methods=["POST"])
def api_create_identity():
    row = service.create(db.session, service.check_endpoint(service.parse_input(json_body()),
                                                            current_app.config),
                         limit=current_app.config["MAX_IDENTITIES"])
    return jsonify(service.as_input(_live(row.id))), 201


@bp.route("/identities/<int:identity_id>", methods=["GET"])
def api_identity(identity_id: int):
    return jsonify(service.as_input(_live(identity_id)))


@bp.route("/identities/<int:identity_id>", methods=["PUT"])
def api_replace_identity(identity_id: int):
    data = service.check_endpoint(service.parse_input(json_body(), updating=True),
                                  current_app.config)
    refreeze.update_identity(db.session, identity_id, data,
                             default_from=current_app.config["MAIL_FROM"])
    return jsonify(service.as_input(_live(identity_id)))


@bp.route("/identities/<int:identity_id>", methods=["DELETE"])
def api_delete_identity(identity_id: int):
    service.delete(db.session, identity_id)
    return "", 204
