"""The OpenAPI document's part for templates (`webapp/api/message_templates.py`): their schema
and paths, merged into the document by `document.py`."""

from __future__ import annotations

from typing import Any

from broadside.campaigns.content.builtin import BUILT_INS
from broadside.mail.design import FONTS, MAX_WIDTH, MIN_WIDTH
from webapp.apidocs.paths import operation, reply
from webapp.apidocs.schemas import obj, ref

TEMPLATE_ID = {"oneOf": [{"type": "integer", "minimum": 1},
                         {"type": "string", "enum": [b.key for b in BUILT_INS]}],
               "description": "An owner's template's number, or a built-in's key."}
REF = {"name": "template_id", "in": "path", "required": True,
       "schema": {"type": "string", "maxLength": 20},
       "description": "A template's id: the owner's template's number, or a built-in's key "
                      f"({', '.join(b.key for b in BUILT_INS)})."}
MOMENT_OR_NULL = {"type": ["string", "null"], "format": "date-time",
                  "description": "null for a built-in."}

_FIELDS: dict[str, Any] = {
    "id": TEMPLATE_ID,
    "name": {"type": "string"},
    "description": {"type": "string"},
    "built_in": {"type": "boolean", "description": "Shipped with Broadside: never changed or "
                 "deleted; an upgrade may improve its wording."},
    "subject": {"type": "string"},
    "preheader": {"type": "string"},
    "format": {"type": "string", "enum": ["markdown", "html"]},
    "editor": {"type": "string", "enum": ["markdown", "rich", "html"],
               "description": "The compose mode it was written in."},
    "design": {"oneOf": [{"type": "null"}, obj({
        "colour": {"type": "string", "pattern": "^#[0-9a-f]{6}$"},
        "width": {"type": "integer", "minimum": MIN_WIDTH, "maximum": MAX_WIDTH},
        "font": {"type": "string", "enum": list(FONTS)},
        "footer_text": {"type": "string"},
    }, required=())], "description": "Its changes over Settings -> Design (only the keys it "
                                     "changes); null: the design in Settings."},
    "created_at": MOMENT_OR_NULL,
    "updated_at": MOMENT_OR_NULL,
}

TEMPLATE_SCHEMAS: dict[str, Any] = {
    "MessageTemplate": obj(_FIELDS, description="A starting point for a broadcast."),
    "MessageTemplateWithBody": obj({**_FIELDS, "body": {"type": "string", "description": (
        "In `format`; `[[block: Name]]` lines name reusable blocks, expanded when sent.")}}),
    "MessageTemplateList": obj({"items": {"type": "array", "items": ref("MessageTemplate")}}),
}

EXAMPLE = {"id": "letter", "name": "Plain letter", "description": "A personal note.",
           "built_in": True, "subject": "A note from us", "preheader": "", "format": "markdown",
           "editor": "markdown", "design": None, "created_at": None, "updated_at": None}

TEMPLATE_PATHS: dict[str, Any] = {
    "/api/templates": {
        "get": operation("Broadcasts", "listTemplates", "Templates",
                         "The built-in templates, then the owner's by name (no body; read one "
                         "for it).",
                         responses={"200": reply("The templates.", "MessageTemplateList",
                                                 {"items": [EXAMPLE]})}),
    },
    "/api/templates/{template_id}": {
        "get": operation("Broadcasts", "getTemplate", "One template, with its body",
                         parameters=[REF],
                         responses={"200": reply("The template.", "MessageTemplateWithBody",
                                                 {**EXAMPLE, "body": "Dear {{ name }}, …"})},
                         errors=("NotFound",)),
    },
}
