"""The JSON API under `/api`: bearer tokens only, never the session cookie, no CSRF.

Feature modules add their routes to `bp` (see `webapp/api/*.py`).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, g, jsonify, request

from broadside.core import accounts
from broadside.core.errors import ValidationError
from broadside.core.json_input import json_within, unstorable_at
from webapp.api.inputs import check_query_parameters, whole_numbers
from webapp.extensions import csrf, db

bp = Blueprint("api", __name__, url_prefix="/api")
# What a read-only token may do: read, never change.
READ_METHODS = ("GET", "HEAD", "OPTIONS")
MAX_NESTING = 32  # arrays and objects in a request body (a segment's deepest rules use 12)
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


@bp.before_request
def refuse_undeclared_query_parameters():
    """After the token: every API view's query string holds only what it declares."""
    check_query_parameters(current_app.view_functions[request.endpoint or ""])


def json_body() -> dict[str, Any]:
    """The request's JSON object, or a 422 with a clear message.

    Parsed strictly: NaN, Infinity and numbers beyond a float's range are refused (Python's
    parser accepts them; PostgreSQL then refused them with a 500), and so are lone surrogates
    (no column can store them) and nesting deeper than MAX_NESTING (the parser, and the
    domain's recursive checks of attributes, raised RecursionError on deep input; no real
    body comes close).
    """
    data: Any = None
    if request.is_json:
        data = whole_numbers(json_within(request.get_data(cache=True), max_depth=MAX_NESTING))
        # A lone surrogate ("\ud800") is valid JSON but no database column can store it: the
        # write raised UnicodeEncodeError (a 500) on SQLite and PostgreSQL. (A NUL is left to
        # the domain's checks, which name the field in their own words.)
        where = unstorable_at(data, nul=False)
        if where is not None:
            raise ValidationError("The request body holds text that is not valid Unicode "
                                  "(a lone surrogate such as \\ud800)"
                                  + (f" at '{where}'." if where else "."))
    if not isinstance(data, dict):
        raise ValidationError("The request body must be a JSON object (Content-Type: application/json).")
    return data


@bp.route("/whoami")
def whoami():
    return jsonify(token=g.api_token.name, owner_id=g.api_token.owner_id)


# Feature routes register on `bp` when their modules are imported.
