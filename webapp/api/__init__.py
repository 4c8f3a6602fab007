"""The JSON API under `/api`: bearer tokens only, never the session cookie, no CSRF.

Feature modules add their routes to `bp` (see `webapp/api/*.py`).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, jsonify, request

from broadside import accounts
from broadside.errors import ValidationError
from webapp.extensions import csrf, db

bp = Blueprint("api", __name__, url_prefix="/api")
# What a read-only token may do: read, never change.
READ_METHODS = ("GET", "HEAD", "OPTIONS")
csrf.exempt(bp)


@bp.before_request
def authenticate_bearer():
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    token = accounts.find_active_token(db.session, value.strip()) if scheme.lower() == "bearer" else None
    if token is None:
        response = jsonify(error="A valid API token is required: Authorization: Bearer TOKEN")
        response.status_code = 401
        response.headers["WWW-Authenticate"] = 'Bearer realm="broadside"'
        return response
    if token.read_only and request.method not in READ_METHODS:
        response = jsonify(error="This token is read-only: it may only read (GET). "
                                 "Create a full token in Settings to change things.")
        response.status_code = 403
        return response
    g.api_token = token
    accounts.touch_token(db.session, token.id)
    return None


def json_body() -> dict[str, Any]:
    """The request's JSON object, or a 400/422 with a clear message."""
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise ValidationError("The request body must be a JSON object (Content-Type: application/json).")
    return data


@bp.route("/whoami")
def whoami():
    return jsonify(token=g.api_token.name, owner_id=g.api_token.owner_id)


# Feature routes register on `bp` when their modules are imported.
