"""Single-use codes over the API (described in `webapp/apidocs/codes.py`, held by
tests/webapp/test_api_codes.py):

- GET /api/codes/<code> -> 200 Code: whose it is, from which message, when that was sent,
  whether it was redeemed. 404 for no such code.
- POST /api/codes/<code>/redeem -> 200 {"code", "redeemed_at"} once; then 409 with
  `redeemed_at` (when it was). The domain's guarded UPDATE decides, so two redeems at the
  same moment get one 200 and one 409.

A code is read as written, in capitals (a lower-case one typed at a till is the same code).
"""

from __future__ import annotations

from typing import Any

from flask import jsonify

from broadside.campaigns.codes import lookup, redemption
from broadside.campaigns.codes.lookup import CodeStory
from broadside.core.errors import NotFound
from webapp.api import bp
from webapp.api.inputs import iso
from webapp.extensions import db

MAX_CODE = 64  # longer than any code (12 + 1 + 8): not looked up


def _code(value: str) -> str:
    code = value.strip().upper()
    if not code or len(code) > MAX_CODE or not code.isascii():
        raise NotFound("There is no such code.")
    return code


def code_json(story: CodeStory) -> dict[str, Any]:
    return {
        "code": story.code, "prefix": story.prefix,
        "subscriber": None if story.subscriber_id is None else {
            "id": story.subscriber_id, "email": story.email},
        "message": {"kind": "broadcast" if story.broadcast_id is not None else "automation",
                    "broadcast_id": story.broadcast_id, "automation_id": story.automation_id,
                    "step_id": story.step_id, "title": story.message, "status": story.status,
                    "sent_at": iso(story.sent_at)},
        "minted_at": iso(story.minted_at),
        "redeemed": story.redeemed_at is not None, "redeemed_at": iso(story.redeemed_at),
    }


@bp.route("/codes/<code>")
def show_code(code: str):
    return jsonify(code_json(lookup.story(db.session, _code(code))))


@bp.route("/codes/<code>/redeem", methods=["POST"])
def redeem_code(code: str):
    code = _code(code)
    try:
        redeemed_at = redemption.redeem(db.session, code)
    except redemption.AlreadyRedeemed as taken:
        return jsonify(error=taken.message, field="code",
                       redeemed_at=iso(taken.redeemed_at)), 409
    return jsonify(code=code, redeemed_at=iso(redeemed_at))
