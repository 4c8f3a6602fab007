"""The OpenAPI document's part for the audit log (`webapp/api/audit.py`): its schema and
path, merged into the document by `document.py`, like webhooks'."""

from __future__ import annotations

from typing import Any

from webapp.api.audit import DEFAULT_PAGE, MAX_PAGE
from webapp.apidocs.paths import operation, paging, query, reply
from webapp.apidocs.schemas import ID, obj, ref

_TEXT = {"type": ["string", "null"]}

AUDIT_SCHEMAS: dict[str, Any] = {
    "AuditEntry": obj({
        "id": ID,
        "created_at": {"type": "string", "format": "date-time"},
        "actor": obj({
            "person_id": {"type": ["integer", "null"], "description": "The person who acted "
                          "(null from the command line); kept after they are removed."},
            "token_id": {"type": ["integer", "null"], "description": "The API token, when one "
                         "acted."},
            "label": {"type": "string", "description": "Who, in words, as they were then: "
                      "\"Ana Lima <ana@example.com>\", \"token “deploy” of ana@example.com\", "
                      "\"command line\"."},
        }, ("person_id", "token_id", "label")),
        "address": {"type": "string", "description": "The client's IP address (empty from "
                    "the command line)."},
        "action": {"type": "string", "description": "A stable dotted name, the same for the "
                   "pages and the API: broadcast.send, settings.sender, subscriber.erase, …"},
        "object_type": _TEXT,
        "object_id": _TEXT,
        "summary": {"type": "string", "description": "In words, naming subscribers by id only."},
        "details": {"type": ["object", "null"], "description": (
            "What the change noted; for settings, identities and webhook endpoints "
            "`before` and `after` of the fields that changed. A secret reads \"changed\".")},
    }, ("id", "created_at", "actor", "address", "action", "object_type", "object_id",
        "summary", "details")),
}

ENTRY_EXAMPLE = {"id": 812, "created_at": "2026-12-05T09:14:02Z",
                 "actor": {"person_id": 2, "token_id": None, "label": "Ana Lima <ana@example.com>"},
                 "address": "203.0.113.7", "action": "settings.sender", "object_type": "settings",
                 "object_id": None, "summary": "settings sender",
                 "details": {"before": {"sender_name": "Acme"}, "after": {"sender_name": "Acme Weekly"}}}
_MOMENT = {"type": "string", "format": "date-time"}

AUDIT_PATHS: dict[str, Any] = {
    "/api/audit": {
        "get": operation(
            "Audit", "listAudit", "The audit log",
            "Every change made by a person or a token, newest first, one row each: who, from "
            "where, what, the object, and for settings their before and after. Owners' and "
            "admins' tokens only (`manage`).",
            parameters=[
                query("person_id", ID, "Only this person's changes (their tokens' included)."),
                query("action", {"type": "string", "maxLength": 64}, (
                    "One action (`broadcast.send`), or every action on a kind of object "
                    "(`broadcast`).")),
                query("object_type", {"type": "string", "maxLength": 32}, "broadcast, list, "
                      "subscriber, segment, automation, identity, template, webhook, token, "
                      "bulk, import, settings."),
                query("object_id", {"type": "string", "maxLength": 64}, "With object_type."),
                query("since", _MOMENT, "From this moment (inclusive), ISO 8601."),
                query("until", _MOMENT, "Before this moment, ISO 8601."),
                *paging(DEFAULT_PAGE, MAX_PAGE, "The `next` of the previous page: older "
                        "entries than it."),
            ],
            responses={"200": reply("A page, and `next` (null on the last page).", obj({
                "items": {"type": "array", "items": ref("AuditEntry")},
                "next": {"type": ["integer", "null"]}}, ("items", "next")),
                {"items": [ENTRY_EXAMPLE], "next": None})},
            errors=("Invalid",)),
    },
}
