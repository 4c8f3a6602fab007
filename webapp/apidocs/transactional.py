"""The OpenAPI document's part for transactional templates and their messages
(`webapp/api/transactional.py`), merged into the document by `document.py`, like identities'.

Limits come from `broadside.campaigns.transactional` and the broadcasts' drafts.
"""

from __future__ import annotations

from typing import Any

from broadside.campaigns.broadcasts.drafts import MAX_BODY, MAX_SUBJECT
from broadside.campaigns.transactional import sending
from broadside.core.models.transactional import MAX_TEMPLATE_NAME
from broadside.delivery.transactional_ledger import FAILED, PENDING, SENDING, SENT, UNKNOWN
from broadside.mail.text_part import MAX_TEXT_BODY
from webapp.apidocs.paths import body, operation, reply
from webapp.apidocs.schemas import (
    ATTACHMENTS,
    BODY_FORMAT,
    EMAIL,
    ID,
    MOMENT,
    NOT_BLANK,
    nullable,
    obj,
    ref,
)

STATUSES = [PENDING, SENDING, SENT, FAILED, UNKNOWN]
TEMPLATE = {"name": "template_id", "in": "path", "required": True, "schema": ID,
            "description": "The template's id."}
MESSAGE = {"name": "message_id", "in": "path", "required": True, "schema": ID,
           "description": "The message's id (the `id` POST /api/transactional answered)."}
KEY = {"name": "Idempotency-Key", "in": "header", "required": False,
       "schema": {"type": "string", "minLength": 1, "maxLength": sending.MAX_KEY,
                  "pattern": f"^[!-~]{{1,{sending.MAX_KEY}}}$"},
       "description": (
           f"1 to {sending.MAX_KEY} printable ASCII characters without spaces (a UUID fits), "
           "one per message you mean to send. The first request with a key stores the "
           "message and the key together; the same key with the same request (template, "
           "`to`, `data`) within 24 hours answers the same `id` (with `Idempotent-Replayed: "
           "true`) and sends nothing more, even while the first is still in flight; the same "
           "key with a different request answers 409. After 24 hours the key is forgotten "
           "and may name a new message. Keys are global to the installation (not per token). "
           "A refused request (404, 422) stores nothing, its key included. Without a key, "
           "every request sends its own message.")}

TRANSACTIONAL_SCHEMAS: dict[str, Any] = {
    "TransactionalTemplateInput": obj({
        "name": {"type": "string", "minLength": 1, "maxLength": MAX_TEMPLATE_NAME,
                 "pattern": f"^[^\\r\\n\\t]*{NOT_BLANK}[^\\r\\n\\t]*$",
                 "description": "One line, unique among the templates (not deleted); "
                 "`POST /api/transactional` may name it."},
        "subject": {"type": "string", "minLength": 1, "maxLength": MAX_SUBJECT,
                    "pattern": NOT_BLANK, "description": "With merge fields."},
        "body": {"type": "string", "minLength": 1, "maxLength": MAX_BODY, "pattern": NOT_BLANK,
                 "description": (
                     "Markdown (or HTML, with format html) with merge fields: `{{ email }}`, "
                     "`{{ name }}`, "
                     "`{{ attributes.x }}` (of a subscriber with that address, else empty) "
                     "and `{{ data.x }}` (the request's `data`; a field it lacks is empty). "
                     "No unsubscribe link is added.")},
        "format": BODY_FORMAT,
        "identity_id": {**nullable(ID), "description": "The sending identity it goes out "
                        "through; null or left out: the default one."},
        "text": {"type": ["string", "null"], "maxLength": MAX_TEXT_BODY, "description": (
            "The plain-text part as you write it (merge fields work; the footer is added); "
            "null, blank or left out: made from the body.")},
        "essential": {"type": "boolean", "default": False, "description": (
            "true: may reach an address that unsubscribed from every list (a password reset, "
            "a one-time code). No template ever reaches a suppressed address.")},
        "attachments": {**ATTACHMENTS, "description": "Attachment ids (POST /api/attachments) "
                        "sent with every message (an invoice, a ticket); left out: none."},
    }, ("name", "subject", "body")),
    "TransactionalTemplate": obj({
        "id": ID, "name": {"type": "string"}, "subject": {"type": "string"},
        "body": {"type": "string"}, "format": BODY_FORMAT, "text": {"type": ["string", "null"]},
        "identity_id": nullable(ID), "essential": {"type": "boolean"}, "attachments": ATTACHMENTS,
        "created_at": MOMENT, "updated_at": MOMENT,
    }),
    "TransactionalInput": obj({
        "template": {"oneOf": [ID, {"type": "string", "minLength": 1,
                                    "maxLength": MAX_TEMPLATE_NAME, "pattern": NOT_BLANK}],
                     "description": "The template's id, or its name."},
        "to": {**EMAIL, "description": "The address, checked and lower-cased."},
        "data": {"type": "object", "default": {}, "description": (
            f"What `{{{{ data.x }}}}` reads: a JSON object of at most "
            f"{sending.MAX_DATA_BYTES:,} bytes (as compact JSON), nested at most "
            f"{sending.MAX_DATA_DEPTH} deep.")},
    }, ("template", "to")),
    "TransactionalAccepted": obj({
        "id": ID, "status": {"type": "string", "enum": STATUSES},
    }),
    "TransactionalMessage": obj({
        "id": ID,
        "status": {"type": "string", "enum": STATUSES, "description": (
            "pending (queued, or waiting for a retry), sending, sent (accepted by the mail "
            "server or provider), failed (refused for good, or not sent because the address "
            "was suppressed, or unsubscribed for a template not essential, by the time it "
            "was sent), unknown (the worker stopped or the answer was lost mid-send: it may "
            "have gone, and is never resent).")},
        "reason": {"type": ["string", "null"], "description": "Why it ended so: the server's "
                   "reply, its refusal, or Broadside's reason."},
        "to": {"type": "string"},
        "template_id": nullable(ID),
        "template": {"type": ["string", "null"], "description": "The template's name."},
        "attempts": {"type": "integer", "minimum": 0},
        "created_at": MOMENT,
        "sent_at": {**MOMENT, "type": ["string", "null"]},
    }),
}

INPUT_EXAMPLE = {"name": "Password reset", "subject": "Reset your password",
                 "body": "Hello {{ name }},\n\n[Choose a new password]"
                         "(https://app.example.com/reset/{{ data.token }})",
                 "identity_id": None, "essential": True}
TEMPLATE_EXAMPLE = {"id": 3, **INPUT_EXAMPLE, "attachments": [], "text": None, "format": "markdown",
                    "created_at": "2026-12-01T10:00:00Z",
                    "updated_at": "2026-12-01T10:00:00Z"}
SEND_EXAMPLE = {"template": "Password reset", "to": "ann@example.com",
                "data": {"token": "abc123"}}
MESSAGE_EXAMPLE = {"id": 41, "status": "failed",
                   "reason": "550 5.1.1 No such user", "to": "ann@example.com",
                   "template_id": 3, "template": "Password reset", "attempts": 1,
                   "created_at": "2026-12-01T10:00:00Z", "sent_at": None}

TRANSACTIONAL_PATHS: dict[str, Any] = {
    "/api/transactional/templates": {
        "get": operation("Transactional", "listTransactionalTemplates",
                         "Transactional templates", "Every template not deleted, by name.",
                         responses={"200": reply("Every template.", {
                             "type": "array", "items": ref("TransactionalTemplate")},
                             [TEMPLATE_EXAMPLE])}),
        "post": operation(
            "Transactional", "createTransactionalTemplate", "Create a transactional template",
            "Saved with its first frozen revision (with the sender, postal address and design "
            "in force). A refused body is 422 naming the field (a merge-field mistake names "
            "its line); a name already taken is 409.",
            write=True, request=body("TransactionalTemplateInput", INPUT_EXAMPLE),
            responses={"201": reply("Created.", "TransactionalTemplate", TEMPLATE_EXAMPLE)},
            errors=("Conflict", "Invalid")),
    },
    "/api/transactional/templates/{template_id}": {
        "get": operation("Transactional", "getTransactionalTemplate",
                         "One transactional template", parameters=[TEMPLATE],
                         responses={"200": reply("The template.", "TransactionalTemplate",
                                                 TEMPLATE_EXAMPLE)},
                         errors=("NotFound",)),
        "put": operation(
            "Transactional", "replaceTransactionalTemplate", "Replace a transactional template",
            "The whole template (fields left out take their defaults). Messages already "
            "stored keep what they were rendered from; the next one is rendered from the new "
            "text.", parameters=[TEMPLATE], write=True,
            request=body("TransactionalTemplateInput", INPUT_EXAMPLE),
            responses={"200": reply("Saved.", "TransactionalTemplate", TEMPLATE_EXAMPLE)},
            errors=("NotFound", "Conflict", "Invalid")),
        "delete": operation(
            "Transactional", "deleteTransactionalTemplate", "Delete a transactional template",
            "It is 404 from then on and its name is free again; the messages sent from it "
            "keep their revision.", parameters=[TEMPLATE], write=True,
            responses={"204": reply("Deleted.")}, errors=("NotFound",)),
    },
    "/api/transactional": {
        "post": operation(
            "Transactional", "sendTransactional", "Send a transactional email",
            "Renders the template for `to` now (a subscriber's `name` and `attributes`, the "
            "request's `data`), stores the message and queues it on its identity's stream, "
            "ahead of automations and broadcasts; `GET /api/transactional/{message_id}` "
            "tells what became of it. 404 (`field`: `template`): no such template. 422 "
            "(`field` names it): a bad `to`, `data` or `Idempotency-Key`, an address that is "
            "suppressed (bounced, complained, blocked: never sent to), or one that "
            "unsubscribed from every list (a subscriber with no subscription left, who left "
            "at least one) when the template is not essential; the same is asked again just "
            "before sending, and a message refused then is `failed` with the reason. 409 "
            "(`field`: `Idempotency-Key`): the key was used within 24 hours with another "
            "request.",
            parameters=[KEY], write=True, request=body("TransactionalInput", SEND_EXAMPLE),
            responses={"202": {**reply("Stored and queued; or, for a key seen within 24 "
                                       "hours with this same request, that message.",
                                       "TransactionalAccepted", {"id": 41, "status": "pending"}),
                               "headers": {"Idempotent-Replayed": {
                                   "description": "`true` when the answer is an earlier "
                                   "request's message (nothing more was sent).",
                                   "schema": {"type": "string", "enum": ["true"]}}}}},
            errors=("NotFound", "Conflict", "Invalid")),
    },
    "/api/transactional/{message_id}": {
        "get": operation("Transactional", "getTransactional",
                         "What became of a transactional email",
                         "Its status and the reason of its outcome. Only messages sent "
                         "through `POST /api/transactional`.", parameters=[MESSAGE],
                         responses={"200": reply("The message.", "TransactionalMessage",
                                                 MESSAGE_EXAMPLE)},
                         errors=("NotFound",)),
    },
}
