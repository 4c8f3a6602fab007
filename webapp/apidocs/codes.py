"""The OpenAPI document's part for single-use codes (`webapp/api/codes.py`): their schemas and
paths, merged into the document by `document.py`. The `codes` setting of broadcasts and
automation steps is `schemas.CODES`."""

from __future__ import annotations

from typing import Any

from broadside.core.models.sending import DELIVERY_STATUSES
from webapp.apidocs.paths import operation, reply
from webapp.apidocs.schemas import ID, MOMENT, nullable, obj

CODE = {"name": "code", "in": "path", "required": True,
        "schema": {"type": "string", "minLength": 1},
        "description": "The code, as the email carried it (`SAVE-7KQ2MXH9`); read in capitals."}

CODE_SCHEMAS: dict[str, Any] = {
    "Code": obj({
        "code": {"type": "string"}, "prefix": {"type": "string"},
        "subscriber": {**nullable(obj({"id": ID, "email": {"type": "string"}})),
                       "description": "Whose it is; null once they were erased."},
        "message": obj({
            "kind": {"type": "string", "enum": ["broadcast", "automation"]},
            "broadcast_id": nullable(ID), "automation_id": nullable(ID),
            "step_id": nullable(ID),
            "title": {"type": "string", "description": "The broadcast's subject, or the "
                      "automation's name, step and subject, as frozen when sent."},
            "status": {"type": ["string", "null"], "enum": [*DELIVERY_STATUSES, None],
                       "description": "The message's state now (sent, skipped: a record-only "
                       "automation's message is logged, never sent); null when its row is gone."},
            "sent_at": {**nullable(MOMENT), "description": "When it was sent; null if not."},
        }, description="The message that carried it."),
        "minted_at": {**MOMENT, "description": "When its message was claimed for sending."},
        "redeemed": {"type": "boolean"},
        "redeemed_at": nullable(MOMENT),
    }),
    "CodeRedeemed": obj({"code": {"type": "string"}, "redeemed_at": MOMENT}),
    "CodeAlreadyRedeemed": obj({
        "error": {"type": "string"}, "field": {"type": "string", "const": "code"},
        "redeemed_at": {**MOMENT, "description": "When it was redeemed."}}),
}

STORY_EXAMPLE = {
    "code": "SAVE-7KQ2MXH9", "prefix": "SAVE", "subscriber": {"id": 41, "email": "ann@example.com"},
    "message": {"kind": "broadcast", "broadcast_id": 7, "automation_id": None, "step_id": None,
                "title": "Spring sale", "status": "sent", "sent_at": "2026-11-20T10:00:03Z"},
    "minted_at": "2026-11-20T10:00:02Z", "redeemed": False, "redeemed_at": None}

CODE_PATHS: dict[str, Any] = {
    "/api/codes/{code}": {
        "get": operation(
            "Codes", "getCode", "A single-use code's story",
            "Whose it is, from which message, when that was sent and whether it was redeemed. "
            "404 for a code Broadside never minted.",
            parameters=[CODE], responses={"200": reply("The code.", "Code", STORY_EXAMPLE)},
            errors=("NotFound",)),
    },
    "/api/codes/{code}/redeem": {
        "post": operation(
            "Codes", "redeemCode", "Redeem a single-use code",
            "Succeeds once. Every later redeem (two at the same moment included: exactly one "
            "succeeds) answers 409 with when it was redeemed; 404 for no such code.",
            parameters=[CODE], write=True,
            responses={"200": reply("Redeemed now.", "CodeRedeemed",
                                    {"code": "SAVE-7KQ2MXH9",
                                     "redeemed_at": "2026-11-22T15:40:00Z"}),
                       "409": reply("Already redeemed.", "CodeAlreadyRedeemed",
                                    {"error": "The code SAVE-7KQ2MXH9 was already redeemed "
                                     "(2026-11-22T15:40:00Z UTC).", "field": "code",
                                     "redeemed_at": "2026-11-22T15:40:00Z"})},
            errors=("NotFound",)),
    },
}
