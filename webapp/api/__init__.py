"""The JSON API under `/api`: bearer tokens only, never the session cookie, no CSRF.

Feature modules add their routes to `bp` (see `webapp/api/*.py`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from flask import Blueprint, g, jsonify, request

from broadside.core import accounts
from broadside.core.errors import ValidationError
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


class _NotANumber(ValueError):
    """A number JSON allows Python to read but we refuse (its words are ours, shown)."""


def _refuse_constant(name: str) -> Any:
    raise _NotANumber(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotANumber(f"the number {text[:20]} is too large")
    return value


def _nesting(value: Any) -> int:
    """How deeply arrays and objects nest in `value` (counted without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in children)
    return deepest


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
        try:
            data = json.loads(request.get_data(cache=True),
                              parse_constant=_refuse_constant, parse_float=_finite_float)
            too_deep = _nesting(data) > MAX_NESTING
        except RecursionError:
            too_deep = True
        except json.JSONDecodeError as exc:  # where it stops parsing; Python's words stay out
            raise ValidationError(f"The request body is not valid JSON (it stops making sense "
                                  f"at line {exc.lineno}, column {exc.colno}).") from None
        except _NotANumber as exc:
            raise ValidationError(f"The request body is not valid JSON: {exc}.") from None
        except ValueError:  # bytes that are not UTF-8 (Python's words stay out)
            raise ValidationError("The request body is not valid JSON: it is not UTF-8 "
                                  "text.") from None
        if too_deep:
            raise ValidationError(f"The request body nests arrays and objects more than "
                                  f"{MAX_NESTING} deep.")
        try:
            # A lone surrogate ("\ud800") is valid JSON but no database column can store
            # it: the write raised UnicodeEncodeError (a 500) on SQLite and PostgreSQL.
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError("The request body holds text that is not valid Unicode "
                                  "(a lone surrogate such as \\ud800).") from None
    if not isinstance(data, dict):
        raise ValidationError("The request body must be a JSON object (Content-Type: application/json).")
    return data


@bp.route("/whoami")
def whoami():
    return jsonify(token=g.api_token.name, owner_id=g.api_token.owner_id)


# Feature routes register on `bp` when their modules are imported.
