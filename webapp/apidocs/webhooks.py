"""The OpenAPI document's part for outgoing webhook endpoints (`webapp/api/webhooks.py`): their
schemas and paths, merged into the document by `document.py`, like identities'.

The event names come from `broadside.webhooks.EVENT_TYPES`.
"""

from __future__ import annotations

from typing import Any

from broadside.core.models.webhooks import ENDPOINT_STATUSES
from broadside.webhooks import EVENT_TYPES
from broadside.webhooks.addresses import MAX_URL
from webapp.apidocs.paths import body, operation, reply
from webapp.apidocs.schemas import ID, obj, ref

ENDPOINT = {"name": "endpoint_id", "in": "path", "required": True, "schema": ID,
            "description": "The endpoint's id."}
EVENTS = {"type": "array", "minItems": 1, "uniqueItems": True,
          "items": {"type": "string", "enum": list(EVENT_TYPES)},
          "description": "The events POSTed to it (at least one)."}

WEBHOOK_SCHEMAS: dict[str, Any] = {
    "WebhookEndpointInput": obj({
        "url": {"type": "string", "maxLength": MAX_URL, "format": "uri", "description": (
            "http(s), no user name or password. Its host must resolve to public addresses "
            "only (not loopback, private, link-local or another special-purpose range, nor an "
            "IPv6 address wrapping one) unless the server sets WEBHOOKS_ALLOW_PRIVATE=1 "
            "(link-local and cloud metadata addresses stay refused); checked again before "
            "every delivery.")},
        "events": EVENTS,
    }, ("url", "events")),
    "WebhookEndpoint": obj({
        "id": ID,
        "url": {"type": "string", "description": (
            "The whole URL for a full token. A read-only token sees only its scheme, host "
            "and port, the path and query masked (`https://hooks.example:8443/•••`): a "
            "receiver's path is often its only credential.")},
        "events": EVENTS,
        "status": {"type": "string", "enum": list(ENDPOINT_STATUSES), "description": (
            "enabled, or disabled (Broadside disables an endpoint whose every delivery "
            "failed for a day; enable it again in Settings -> Webhooks).")},
        "disabled_reason": {"type": ["string", "null"], "description": (
            "Why Broadside disabled it, with the receiver's last answer; for a read-only "
            "token the URL's path and query are masked in it too.")},
        "created_at": {"type": "string", "format": "date-time"},
        "secret": {"type": "string", "description": (
            "Only in the answer to POST: the key of its `Broadside-Signature` HMAC. "
            "Settings -> Webhooks shows it again.")},
    }, ("id", "url", "events", "status", "disabled_reason", "created_at")),
}

INPUT_EXAMPLE = {"url": "https://crm.acme.example/hooks/broadside",
                 "events": ["subscriber.created", "subscriber.unsubscribed"]}
ENDPOINT_EXAMPLE = {"id": 3, **INPUT_EXAMPLE, "status": "enabled", "disabled_reason": None,
                    "created_at": "2026-11-30T21:12:46Z"}

WEBHOOK_PATHS: dict[str, Any] = {
    "/api/webhooks": {
        "get": operation("Webhooks", "listWebhooks", "Outgoing webhook endpoints",
                         "Every endpoint, oldest first. Secrets are never listed, and a "
                         "read-only token sees each URL masked to its scheme, host and port "
                         "(the path and query replaced by `•••`).",
                         responses={"200": reply("Every endpoint.", {
                             "type": "array", "items": ref("WebhookEndpoint")},
                             [ENDPOINT_EXAMPLE])}),
        "post": operation(
            "Webhooks", "createWebhook", "Add an outgoing webhook endpoint",
            "Broadside POSTs each chosen event as JSON, signed with the endpoint's secret "
            "(`Broadside-Signature: t=<unix>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">`) and "
            "carrying a stable `Broadside-Event-Id`; retried with backoff for a day. A refused "
            "body (an unknown field, a URL to a private address, an unknown event) is 422.",
            write=True, request=body("WebhookEndpointInput", INPUT_EXAMPLE),
            responses={"201": reply("Created; `secret` is shown this once.", "WebhookEndpoint",
                                    {**ENDPOINT_EXAMPLE, "secret": "whsec_…"})},
            errors=("Invalid",)),
    },
    "/api/webhooks/{endpoint_id}": {
        "delete": operation(
            "Webhooks", "deleteWebhook", "Delete an outgoing webhook endpoint",
            "Nothing more is sent to it; its delivery log goes with it.",
            parameters=[ENDPOINT], write=True, responses={"204": reply("Deleted.")},
            errors=("NotFound",)),
    },
}
