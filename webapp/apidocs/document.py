"""The API's description: one OpenAPI 3.1 document, built once at import from `paths.py` and
`schemas.py`. `/api/openapi.json` serves it as it is and the reference page is rendered
from it, so the two never disagree. It is Python, not a data file, so it ships inside the
package with no package-data setting, and its enumerations come from the domain's constants.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from webapp.apidocs.attachments import ATTACHMENT_PATHS, ATTACHMENT_SCHEMAS
from webapp.apidocs.audit import AUDIT_PATHS, AUDIT_SCHEMAS
from webapp.apidocs.automations import AUTOMATION_PATHS, AUTOMATION_SCHEMAS
from webapp.apidocs.codes import CODE_PATHS, CODE_SCHEMAS
from webapp.apidocs.engagement import ENGAGEMENT_PATHS, ENGAGEMENT_SCHEMAS
from webapp.apidocs.identities import IDENTITY_PATHS, IDENTITY_SCHEMAS
from webapp.apidocs.media import MEDIA_PATHS, MEDIA_SCHEMAS
from webapp.apidocs.message_templates import TEMPLATE_PATHS, TEMPLATE_SCHEMAS
from webapp.apidocs.paths import PATHS
from webapp.apidocs.rule_schemas import RULE_SCHEMAS
from webapp.apidocs.schemas import COMPONENTS
from webapp.apidocs.transactional import TRANSACTIONAL_PATHS, TRANSACTIONAL_SCHEMAS
from webapp.apidocs.users import USER_PATHS, USER_SCHEMAS
from webapp.apidocs.webhooks import WEBHOOK_PATHS, WEBHOOK_SCHEMAS


def _version() -> str:
    try:
        return version("broadside")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "0"


DESCRIPTION = """\
Broadside's JSON API: lists, subscribers, segments, broadcasts, automations, single-use
codes, sending identities, outgoing webhooks, transactional email and the media library.

**Authentication.** Send an API token with every request:
`Authorization: Bearer TOKEN`. Create tokens in Settings or with
`flask --app webapp tokens create NAME`. A read-only token may only read (GET); anything
else answers 403. This document itself needs no token.

**Errors** are JSON: `{"error": "what went wrong"}`, with 401 (no valid token), 403 (read-only
token), 404 (unknown id), 409 (not possible in the current state, with the reason) or 422 (the
request was refused; the message names the field). A refused request changes nothing. Bodies
are strict JSON (no NaN or Infinity) nested at most 32 deep. Unknown fields in the bodies of
the newer endpoints (segments, automations, identities, PATCH, unsubscribe) and unknown query
parameters of the paged lists are refused, so a typo never passes unnoticed.

**Paging.** `GET /api/subscribers` and `GET /api/broadcasts` return
`{"items": [...], "next": ID or null}`. Pass `next` as `after` to get the following page; it is
null on the last one. Every item that exists throughout is seen once, none twice.

**Times** are UTC in ISO 8601 (`2026-11-30T21:12:46Z`).
"""

TAGS = [
    {"name": "Subscribers", "description": "People, their lists and attributes."},
    {"name": "Lists", "description": "Mailing lists and CSV import."},
    {"name": "Segments", "description": "Saved rules that pick people by what they are and did."},
    {"name": "Broadcasts", "description": "Drafts, sending, and what became of each copy."},
    {"name": "Automations", "description": "Mail that goes out by itself: welcome series "
     "and lifecycle campaigns, each message to each person at most once."},
    {"name": "Codes", "description": "Single-use codes minted per recipient of a broadcast "
     "or automation step that mints them: look one up, redeem it once."},
    {"name": "Identities", "description": "Who mail is from and the transport it goes out "
     "through (SMTP or a provider's API), each its own paced stream with its own hourly cap. "
     "Secrets are never returned."},
    {"name": "Webhooks", "description": "Endpoints Broadside POSTs its events to (new "
     "subscribers, unsubscribes, deliveries, broadcasts), signed with each one's secret."},
    {"name": "Attachments", "description": "Files sent with a broadcast, an automation "
     "step or a transactional template (PDF, images, calendar, text, office documents)."},
    {"name": "Transactional", "description": "One-off email to one address (a password "
     "reset, a one-time code) from a template, with an Idempotency-Key so a retry never "
     "sends twice."},
    {"name": "Media", "description": "The media library: images uploaded once, verified, "
     "cleaned and resized for email, served by content hash."},
    {"name": "People", "description": "Who signs in and with which role: invitations, role "
     "changes, removal. Only an owner's token may use these."},
    {"name": "Audit", "description": "Who changed what, when and from where."},
    {"name": "Token", "description": "The token in use, and this document."},
]

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Broadside API", "version": _version(), "description": DESCRIPTION,
             "license": {"name": "MIT", "identifier": "MIT"}},
    "security": [{"bearer": []}],
    "tags": TAGS,
    "paths": {**PATHS, **AUTOMATION_PATHS, **CODE_PATHS, **IDENTITY_PATHS, **WEBHOOK_PATHS,
              **TRANSACTIONAL_PATHS, **USER_PATHS, **AUDIT_PATHS, **TEMPLATE_PATHS,
              **ATTACHMENT_PATHS, **MEDIA_PATHS, **ENGAGEMENT_PATHS},
    "components": {**COMPONENTS, "schemas": {**COMPONENTS["schemas"], **RULE_SCHEMAS,
                                             **AUTOMATION_SCHEMAS, **CODE_SCHEMAS,
                                             **IDENTITY_SCHEMAS, **WEBHOOK_SCHEMAS,
                                             **TRANSACTIONAL_SCHEMAS, **USER_SCHEMAS,
                                             **AUDIT_SCHEMAS, **TEMPLATE_SCHEMAS,
                                             **ATTACHMENT_SCHEMAS, **MEDIA_SCHEMAS,
                                             **ENGAGEMENT_SCHEMAS}},
}
