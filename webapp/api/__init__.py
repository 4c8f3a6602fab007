"""The JSON API under `/api`: bearer tokens only, never the session cookie, no CSRF.

A token belongs to a person and carries at most their role (a read-only one at most a
viewer's): each route's declared permission (webapp/permissions.py; the blueprint's default is
`view` to read and `manage` to change) is checked against it after the token, a 403 naming
what it needs when the token's person may not.

Feature modules add their routes to `bp` (see `webapp/api/*.py`).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, g, jsonify, request

from broadside.core import accounts, roles
from broadside.core.errors import ValidationError
from broadside.core.json_input import json_within, refuse_unstorable
from webapp.api.inputs import check_query_parameters, whole_numbers
from webapp.audit.hook import act_as_token
from webapp.extensions import csrf, db
from webapp.permissions import defaults, permission_for
from webapp.text_input import refuse_unstorable_text

bp = Blueprint("api", __name__, url_prefix="/api")
# What a read-only token may do: read, never change.
READ_METHODS = ("GET", "HEAD", "OPTIONS")
MAX_NESTING = 32  # arrays and objects in a request body (a segment's deepest rules use 12)
csrf.exempt(bp)
defaults(bp, read=roles.VIEW, change=roles.MANAGE)


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
    person = accounts.person_of_token(db.session, token)
    granted = roles.permissions_of(person.role if person else "", token=True,
                                   read_only=token.read_only)
    needed = permission_for(current_app, request.endpoint, request.method)
    if needed is None or needed not in granted:
        role = roles.LABELS.get(person.role, "nobody").lower() if person else "nobody"
        holders = ", ".join(roles.LABELS[r].lower() for r in roles.roles_with(needed or ""))
        response = jsonify(error=f"This token's person is a {role}, which may not do this"
                                 + (f": it needs one of {holders}." if holders else "."))
        response.status_code = 403
        return response
    g.api_token = token
    g.broadside_granted = granted
    act_as_token(token, person)  # the actor of its audit rows and events
    accounts.touch_token(db.session, token.id)
    return None


# After the token: no NUL or lone surrogate in a query parameter or form field (a 422 naming
# it); JSON bodies are checked by `json_body`.
bp.before_request(refuse_unstorable_text)


@bp.before_request
def refuse_undeclared_query_parameters():
    """After the token: every API view's query string holds only what it declares."""
    check_query_parameters(current_app.view_functions[request.endpoint or ""])


def json_body() -> dict[str, Any]:
    """The request's JSON object, or a 422 with a clear message.

    Parsed strictly: NaN, Infinity and numbers beyond a float's range are refused (Python's
    parser accepts them; PostgreSQL then refused them with a 500), and so is nesting deeper
    than MAX_NESTING (the parser, and the domain's recursive checks of attributes, raised
    RecursionError on deep input; no real body comes close). So is any string, value or key,
    holding a NUL character or a lone surrogate (valid JSON escapes, `\\u0000` and `\\ud800`,
    that no column stores: PostgreSQL refused a NUL in a broadcast's subject with a 500): one
    rule for every field, naming its path (`steps[2].body`) in the message and in `field`, so
    a field added tomorrow cannot forget it. Forms and query strings: webapp/text_input.py.
    """
    data: Any = None
    if request.is_json:
        data = whole_numbers(json_within(request.get_data(cache=True), max_depth=MAX_NESTING))
        refuse_unstorable(data)
    if not isinstance(data, dict):
        raise ValidationError("The request body must be a JSON object (Content-Type: application/json).")
    return data


@bp.route("/whoami")
def whoami():
    return jsonify(token=g.api_token.name, owner_id=g.api_token.owner_id)


# Feature routes register on `bp` when their modules are imported.
