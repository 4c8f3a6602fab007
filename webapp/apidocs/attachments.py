"""The OpenAPI document's part for attachments (`webapp/api/attachments.py`): their schema and
paths, merged into the document by `document.py`. The `attachments` lists of broadcasts, steps
and templates are `schemas.ATTACHMENTS`."""

from __future__ import annotations

from typing import Any

from broadside.core.models.attachments import MAX_ATTACHMENT_NAME
from broadside.mail.attachments import ALLOWED_WORDS, KINDS
from webapp.apidocs.paths import operation, reply
from webapp.apidocs.schemas import ID, MOMENT, obj

ATTACHMENT = {"name": "attachment_id", "in": "path", "required": True, "schema": ID,
              "description": "The attachment's id."}

ATTACHMENT_SCHEMAS: dict[str, Any] = {
    "Attachment": obj({
        "id": ID,
        "name": {"type": "string", "maxLength": MAX_ATTACHMENT_NAME,
                 "description": "The file's name as readers see it (cleaned: no folders, "
                 "no control characters)."},
        "size": {"type": "integer", "minimum": 1, "description": "In bytes."},
        "content_type": {"type": "string",
                         "enum": sorted({kind.content_type for kind in KINDS.values()}),
                         "description": "Decided by Broadside from the file's content."},
        "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "created_at": MOMENT,
    }),
}

EXAMPLE = {"id": 4, "name": "programme.pdf", "size": 248113, "content_type": "application/pdf",
           "sha256": "9f" * 32, "created_at": "2026-12-05T10:00:00Z"}

ATTACHMENT_PATHS: dict[str, Any] = {
    "/api/attachments": {
        "post": operation(
            "Attachments", "uploadAttachment", "Upload a file to attach",
            f"Allowed: {ALLOWED_WORDS}. The type is decided from the file's content (a `.pdf` "
            "that is not a PDF is 422), up to 10 MB (a message carries at most 10 MB of "
            "attachments in all). Put its id in `attachments` of a broadcast, an automation's "
            "step or a transactional template.", write=True,
            request={"required": True, "content": {"multipart/form-data": {"schema": {
                "type": "object", "required": ["file"], "properties": {
                    "file": {"type": "string", "contentMediaType": "application/octet-stream",
                             "description": "The file; its part's filename is its name."},
                    "name": {"type": "string", "description": (
                        "The file's name when its part has no filename.")}}}}}},
            responses={"201": reply("Stored.", "Attachment", EXAMPLE)},
            errors=("Invalid",)),
    },
    "/api/attachments/{attachment_id}": {
        "get": operation("Attachments", "getAttachment", "An attachment's details",
                         parameters=[ATTACHMENT],
                         responses={"200": reply("The attachment.", "Attachment", EXAMPLE)},
                         errors=("NotFound",)),
        "delete": operation(
            "Attachments", "deleteAttachment", "Delete an attachment",
            "409 while a broadcast, an automation step or a transactional template names it, "
            "or a revision of one frozen when it was sent.", parameters=[ATTACHMENT],
            write=True, responses={"204": reply("Deleted.")},
            errors=("NotFound", "Conflict")),
    },
}
