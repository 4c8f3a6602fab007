"""The OpenAPI document's `components` (JSON Schema 2020-12, as OpenAPI 3.1 uses): every body the
API reads or writes, the bearer scheme and the shared error responses. Enumerations and limits
are read from the domain modules that enforce them, so the document cannot drift from what the
API accepts. A segment's rules: `rule_schemas.py`; tests/webapp/test_openapi.py validates real
responses against these schemas."""

from __future__ import annotations

from typing import Any

from broadside.audience.subscribers import bulk
from broadside.audience.subscribers import service as people
from broadside.audience.subscribers.search import MAX_QUERY, STATUS_FILTERS
from broadside.campaigns.broadcasts.drafts import MAX_BODY, MAX_PREHEADER, MAX_SUBJECT
from broadside.core.models.audience import SUBSCRIPTION_STATUSES, SUPPRESSIONS
from broadside.core.models.bulk import BULK_ACTIONS, BULK_STATUSES
from broadside.core.models.sending import BROADCAST_STATUSES, DELIVERY_STATUSES
from broadside.core.site_settings import MAX_CAP_HOURS
from broadside.mail.attachments import MAX_COUNT as MAX_ATTACHMENTS
from broadside.mail.body_formats import BODY_FORMATS, DEFAULT_FORMAT
from broadside.mail.text_part import MAX_TEXT_BODY
from broadside.segments.service import MAX_NAME as MAX_SEGMENT_NAME
from webapp.apidocs.ab_tests import AB_RESULT, AB_TEST, AB_TEST_INPUT, LETTER, TEST_VARIANT
from webapp.apidocs.local_time import (
    LOCAL_TIME,
    READER_LOCALE,
    READER_TIMEZONE,
    TIMEZONE,
    TIMEZONE_INPUT,
    TIMEZONE_PATCH,
)
from webapp.apidocs.versions import VERSIONS, VERSIONS_EXAMPLE, VERSIONS_INPUT  # noqa: F401 - the paths' example
from webapp.params import MAX_DATABASE_ID


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "type": [schema["type"], "null"]}


def obj(properties: dict[str, Any], required: tuple[str, ...] | None = None, *,
        description: str = "", closed: bool = True, min_properties: int = 0,
        extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """An object; `required` defaults to every property (responses always carry them all).
    `extra`: rules across its fields (oneOf, not) that JSON Schema can state."""
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "required": list(properties if required is None else required)}
    if closed:
        schema["additionalProperties"] = False
    if min_properties:
        schema["minProperties"] = min_properties
    schema.update(extra or {})
    if description:
        schema["description"] = description
    return schema


ID = {"type": "integer", "minimum": 1, "maximum": MAX_DATABASE_ID}
AFTER = {"type": "integer", "minimum": 0, "maximum": MAX_DATABASE_ID}  # a page starts after it
# A character Python's str.strip() keeps (ECMA's \s, which JSON Schema readers use, leaves out
# \x1c-\x1f and \x85): text with one is not blank to the server either.
NOT_BLANK = r"[^\s\x1c-\x1f\x85]"


def any_case(word: str) -> str:
    """`word` as a pattern that ignores case (JSON Schema's patterns take no flags)."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in word)


# An address the API keeps or mails: an email address whose domain has a dot and is not a
# reserved name (what `broadside.core.addresses.normalise_email` refuses besides its shape).
RESERVED_DOMAINS = "|".join(any_case(name) for name in ("arpa", "invalid", "local", "localhost",
                                                        "onion", "test"))
EMAIL = {"type": "string", "format": "email",
         "not": {"pattern": rf"(@[^.]*|\.({RESERVED_DOMAINS}))$"}}
# A broadcast goes to a list or to a segment: both given (neither null) is refused.
BOTH_AUDIENCES = {"required": ["list_id", "segment_id"], "properties": {
    "list_id": {"type": "integer"}, "segment_id": {"type": "integer"}}}
MOMENT = {"type": "string", "format": "date-time", "description": "UTC, ISO 8601."}
CAP = nullable({"type": "integer", "minimum": 0, "maximum": MAX_CAP_HOURS})
IDENTITY_CHOICE = {**nullable(ID), "description": "The sending identity it goes out through "
                   "(GET /api/identities); null: the default identity."}
# How a body is written (broadside.mail.body_formats).
BODY_FORMAT = {"type": "string", "enum": list(BODY_FORMATS), "default": DEFAULT_FORMAT,
               "description": "How `body` is written: markdown (the default; raw HTML in it is "
               "shown as text) or html (the owner's HTML, sanitised for email when frozen: "
               "tables, inline styles, align and width kept; scripts, forms, event handlers "
               "and non-https images removed). Merge fields work in both."}
# "Mint a code per recipient" (broadside.campaigns.codes): null (off) or the codes' prefix.
CODES = {"type": ["object", "null"], "properties": {"prefix": {
    "type": "string", "pattern": "^[A-Z0-9]{1,12}$", "description": "1-12 of A-Z and 0-9; each "
    "code is PREFIX-XXXXXXXX (8 of 23456789ABCDEFGHJKMNPQRSTUVWXYZ)."}},
    "required": ["prefix"], "additionalProperties": False, "description": (
    "null: no codes. Else each recipient's copy carries its own single-use code, minted when "
    "the copy is claimed for sending and shown by {{ code }} (GET /api/codes/{code}).")}
# Attachments (POST /api/attachments) sent with a message, by id, in order.
ATTACHMENTS = {"type": "array", "maxItems": MAX_ATTACHMENTS, "items": ID, "description": (
    "Attachment ids (POST /api/attachments), sent with every copy in this order; at most "
    f"{MAX_ATTACHMENTS}, and 10 MB in all. An unknown id or a larger total is 422 naming it.")}
SUBSCRIPTION_STATUS = {"type": "string", "enum": list(SUBSCRIPTION_STATUSES)}
SUPPRESSION = {"type": ["string", "null"], "enum": [*SUPPRESSIONS, None],
               "description": "Set when no list may mail them: bounced, complained or blocked."}
ATTRIBUTES = {"type": "object", "propertyNames": {
    "minLength": 1, "maxLength": people.MAX_ATTRIBUTE_KEY, "pattern": NOT_BLANK,
    "not": {"pattern": r"^\s*(" + "|".join(any_case(n) for n in people.RESERVED_ATTRIBUTES) + r")\s*$"}},
    "additionalProperties": {"anyOf": [
        {"type": ["number", "boolean", "null", "array", "object"]},
        {"type": "string", "maxLength": people.MAX_ATTRIBUTE_VALUE}]}, "description": (
    "Names and values (any JSON), at most "
    f"{people.MAX_ATTRIBUTES_JSON:,} characters in all; names are at most "
    f"{people.MAX_ATTRIBUTE_KEY} characters and cannot be email or name.")}

SEGMENT = {"id": ID, "name": {"type": "string"}, "rules": ref("RuleGroup"),
           "created_at": MOMENT, "updated_at": MOMENT}

IMPORT_RESULT: dict[str, Any] = {
    "import_id": ID,
    "status": {"type": "string", "enum": ["done", "asking"], "description": (
        "`asking`: the rows are in and the worker is queueing the confirmation emails.")},
    "consent": {"type": "string", "enum": ["opted_in", "confirm"]},
    "imported": {"type": "integer", "description": "New on the list."},
    "updated": {"type": "integer", "description": (
        "Already on the list, subscribed or waiting for confirmation: name and "
        "attributes refreshed, status kept.")},
    "skipped": obj({"unsubscribed": {"type": "integer"}, "suppressed": {"type": "integer"}},
                   description="Accepted rows left off the list: they unsubscribed from "
                   "it, or their address is suppressed (bounced, complained, blocked)."),
    "rejected": {"type": "array", "description": "The first rejected rows, by line.",
                 "items": obj({
                     "line": {"type": "integer"}, "reason": {"type": "string"},
                     "row": {"type": ["array", "null"], "items": {"type": "string"},
                             "description": "The row's fields as uploaded (bytes that "
                             "are not UTF-8 replaced by U+FFFD); null when it could not "
                             "be read or is too long to keep."}})},
    "rejected_count": {"type": "integer", "description": "Every rejected row, listed or not."},
    "warnings": {"type": "array", "description": "Rows imported with a change.",
                 "items": obj({"line": {"type": "integer"}, "message": {"type": "string"}})},
    "empty_rows": {"type": "integer", "description": "Blank rows of the file, skipped."},
    "welcomed": {"type": "integer", "description": (
        "People the import entered into the list's welcome series (`welcome`).")},
    "welcome_note": {"type": ["string", "null"], "description": (
        "With `welcome`: said when the list has no enabled welcome automation, so nobody "
        "is welcomed; null otherwise.")},
}



AUDIENCE_SCHEMAS: dict[str, Any] = {
    "List": obj({"id": ID, "name": {"type": "string"}, "tracking": ref("ListTracking"), "counts": obj(
        {status: {"type": "integer", "minimum": 0} for status in SUBSCRIPTION_STATUSES})}),
    "ListCreated": obj({"id": ID, "name": {"type": "string"}}),
    "ListInput": obj({"name": {"type": "string", "minLength": 1, "maxLength": 200},
                      "description": {"type": "string"}}, ("name",), closed=False),
    "Subscription": obj({"list_id": ID, "status": SUBSCRIPTION_STATUS}),
    "Subscriber": obj({
        "id": ID, "email": {"type": "string", "format": "email"}, "name": {"type": "string"},
        "attributes": ATTRIBUTES, "locale": READER_LOCALE, "suppression": SUPPRESSION,
        "created_at": MOMENT, **TIMEZONE, "subscriptions": {"type": "array", "items": ref("Subscription"),
                          "description": "Every list they are on, by list id, in any status."},
    }),
    "SubscriberPage": obj({"items": {"type": "array", "items": ref("Subscriber")},
                           "next": {**nullable(ID), "description": "Pass as `after` for the next "
                                    "page; null on the last page."}}),
    "BulkInput": obj({
        "action": {"type": "string", "enum": list(bulk.CHOICES), "description": (
            "add, remove and unsubscribe need `list_id`; unsubscribe_all leaves every list; "
            "block suppresses them; erase deletes them for good.")},
        "list_id": ID,
        "ids": {"type": "array", "items": ID, "minItems": 1, "maxItems": bulk.MAX_SELECTION,
                "description": "These people (every one must exist)."},
        "filter": obj({"list_id": ID, "segment_id": ID, "status": {
            "type": "string", "enum": list(STATUS_FILTERS)}, "q": {
            "type": "string", "maxLength": MAX_QUERY}}, (), description=(
            "Or everyone matching now, with the filters of GET /api/subscribers. The set is "
            "fixed when the call is accepted: nobody who comes to match later is included.")),
        "expected": {"type": "integer", "minimum": 0, "description": (
            "How many people you expect it to touch: 409 if the set is not so (nothing is "
            "stored). An erase requires it.")},
    }, ("action",), description="Exactly one of `ids` and `filter`.",
        extra={"oneOf": [{"required": ["ids"]}, {"required": ["filter"]}],
               "allOf": [{"if": {"properties": {"action": {"enum": ["add", "remove", "unsubscribe"]}},
                                 "required": ["action"]},
                          "then": {"required": ["list_id"]}},
                         {"if": {"properties": {"action": {"const": "erase"}}, "required": ["action"]},
                          "then": {"required": ["expected"]}}]}),
    "BulkAction": obj({
        "id": ID, "action": {"type": "string", "enum": list(BULK_ACTIONS)},
        "list_id": {**nullable(ID), "description": "null: every list (or not about a list)."},
        "status": {"type": "string", "enum": list(BULK_STATUSES)},
        "total": {"type": "integer", "minimum": 0, "description": (
            "People in its set, fixed when it was accepted: it never touches anyone else.")},
        "processed": {"type": "integer", "minimum": 0, "description": "Gone through so far."},
        "acted_on": {"type": "integer", "minimum": 0, "description": (
            "Of those, the people it acted on: still matching the filter (still there, for "
            "`ids`) when the worker reached them.")},
        "no_longer_matched": {"type": "integer", "minimum": 0, "description": (
            "Of those, the people left alone: no longer matching the filter (or erased "
            "meanwhile) when the worker reached them.")},
        "changed": {"type": "integer", "minimum": 0, "description": (
            "Of those acted on, how many it changed (the rest were already so).")},
        "error": {"type": ["string", "null"], "description": "Why it stopped, when failed."},
        "created_at": MOMENT, "finished_at": nullable(MOMENT)}),
    "SubscriberDetail": obj({
        "id": ID, "email": {"type": "string"}, "name": {"type": "string"},
        "attributes": ATTRIBUTES, "locale": READER_LOCALE, "timezone": READER_TIMEZONE,
        "created_at": MOMENT, "suppression": SUPPRESSION, "suppressed_at": nullable(MOMENT),
        "subscriptions": {"type": "array", "items": obj({
            "list_id": ID, "list": {"type": "string"}, "status": SUBSCRIPTION_STATUS,
            "created_at": MOMENT, "confirmed_at": nullable(MOMENT),
            "unsubscribed_at": nullable(MOMENT),
            "unsubscribe_source": {"type": ["string", "null"]}})},
    }),
    "SubscriberInput": obj({
        "email": {**EMAIL, "maxLength": people.MAX_EMAIL},
        "name": {"type": ["string", "null"], "maxLength": people.MAX_NAME},
        "lists": {"type": "array", "items": ID, "description": "Lists to put them on as active."},
        "attributes": {**ATTRIBUTES, "description": "Merged into a known person's attributes."},
        "locale": {**READER_LOCALE, "description": "Their language (replaces a known person's "
                   "when given); 422 when it is not a language tag."},
        "timezone": TIMEZONE_INPUT,
        "welcome": {"type": "boolean", "default": False, "description": (
            "true: on each list they newly join, they enter its enabled welcome automations "
            "(a person already on the list is not welcomed again).")},
    }, ("email",), closed=False),
    "SubscriberSaved": obj({"id": ID, "email": {"type": "string"}, "warnings": {
        "type": "array", "items": {"type": "string"},
        "description": "The owner's words when some sending identities cannot reach this "
                       "address (a local part outside ASCII needs SMTPUTF8, which a server "
                       "that did not offer it at its last check, or a provider that does "
                       "not take it, cannot carry; an SMTP identity never checked is named "
                       "as not checked yet); empty otherwise."}}),
    "SubscriberPatch": obj({
        "name": {"type": "string", "maxLength": people.MAX_NAME,
                 "description": '"" removes the name.'},
        "attributes": {**ATTRIBUTES, "description": "Replaces all of them ({} removes them)."},
        "locale": {**READER_LOCALE, "description": 'null or "" returns them to the list\'s '
                   "default; 422 when it is not a language tag."},
        "timezone": TIMEZONE_PATCH,
    }, (), description="At least one of the four.", min_properties=1),
    "UnsubscribeInput": obj({"list_id": ID}),
    "Unsubscribed": obj({"subscriber_id": ID, "list_id": ID, "status": {"const": "unsubscribed"},
                         "changed": {"type": "boolean", "description": "false when they had "
                                     "already left that list (nothing was changed)."}}),
    "ImportResult": obj(IMPORT_RESULT),
    "ImportQueued": obj({
        "import_id": ID, "status": {"type": "string", "enum": ["queued", "failed"]},
        "status_url": {"type": "string", "description": "GET it for progress and the result."},
    }),
    "ImportStatus": obj({
        **IMPORT_RESULT,
        "status": {"type": "string", "enum": ["queued", "running", "asking", "done", "failed"]},
        "total_rows": {"type": ["integer", "null"], "description": (
            "The file's rows, counted before the first is written; null until then.")},
        "processed_rows": {"type": "integer", "description": "Rows read so far."},
        "error": {"type": ["string", "null"], "description": "Why it failed."},
    }),
    "Segment": obj(SEGMENT),
    "SegmentWithCount": obj({**SEGMENT, "count": {
        "type": "integer", "minimum": 0, "description": "Who a send would reach now: people "
        "the rules match who are active on at least one list and not suppressed."}}),
    "SegmentInput": obj({"name": {"type": "string", "minLength": 1, "maxLength": MAX_SEGMENT_NAME},
                         "rules": ref("RuleGroup")}),
    "Count": obj({"count": {"type": "integer", "minimum": 0}}),
}

COUNTS = obj({"total": {"type": "integer", "minimum": 0},
              **{status: {"type": "integer", "minimum": 0} for status in DELIVERY_STATUSES}},
             description="Deliveries by status; total is all of them (0 until it is sent).")

# One line, not blank: what drafts._validate and the API's text_field refuse, stated.
ONE_LINE_SUBJECT = {"type": "string", "minLength": 1, "maxLength": MAX_SUBJECT,
                    "pattern": rf"^[^\r\n]*{NOT_BLANK}[^\r\n]*$"}

BROADCAST_SCHEMAS: dict[str, Any] = {
    "BroadcastStatus": {"type": "string", "enum": list(BROADCAST_STATUSES)},
    "BroadcastState": obj({"id": ID, "status": ref("BroadcastStatus")}),
    "BroadcastCreated": obj({"id": ID, "status": ref("BroadcastStatus"),
                             "identity_id": IDENTITY_CHOICE, "codes": CODES,
                             "attachments": ATTACHMENTS, "format": BODY_FORMAT,
                             "versions": VERSIONS, **LOCAL_TIME}),
    "Broadcast": obj({
        "id": ID, "status": ref("BroadcastStatus"), "subject": {"type": "string"},
        "preheader": {"type": "string"}, "format": BODY_FORMAT,
        "list_id": {**nullable(ID), "description": "The list it goes to, or null."},
        "segment_id": {**nullable(ID), "description": "The segment it goes to, or null."},
        "skip_if_received_within_hours": {**CAP, "description": "The frequency cap: people who "
                                          "received a broadcast within this many hours are "
                                          "skipped at their turn; null: no cap."},
        "identity_id": IDENTITY_CHOICE, "codes": CODES, "attachments": ATTACHMENTS,
        "versions": VERSIONS, "ab_test": AB_TEST, "counts": COUNTS, "created_at": MOMENT,
        "updated_at": MOMENT, "scheduled_at": nullable(MOMENT), "finished_at": nullable(MOMENT), **LOCAL_TIME,
    }, description="The body and the plain-text part are left out of lists and edits (the body "
       "can be 500 kB)."),
    "BroadcastPage": obj({"items": {"type": "array", "items": ref("Broadcast")},
                          "next": {**nullable(ID), "description": "Pass as `after` for the next "
                                   "(older) page; null on the last page."}}),
    "BroadcastDetail": obj({
        "id": ID, "status": ref("BroadcastStatus"), "identity_id": IDENTITY_CHOICE, "ab_test": AB_TEST,
        "codes": CODES, "attachments": ATTACHMENTS, "format": BODY_FORMAT, "versions": VERSIONS,
        "pause_reason": {"type": ["string", "null"]}, "total": {"type": "integer"},
        "counts": obj({status: {"type": "integer"} for status in DELIVERY_STATUSES}),
        "ab_result": AB_RESULT, **LOCAL_TIME,
    }),
    "BroadcastInput": obj({
        "list_id": ID, "segment_id": ID,
        "subject": ONE_LINE_SUBJECT,
        "body": {"type": "string", "maxLength": MAX_BODY, "description": "Markdown (or HTML, "
                 "with format html), with {{ merge fields }}."},
        "format": BODY_FORMAT,
        "preheader": {"type": "string", "maxLength": MAX_PREHEADER},
        "skip_if_received_within_hours": {**CAP, "description": "Absent or null: the default "
                                          "from Settings; 0: no cap; else hours."},
        "identity_id": {**IDENTITY_CHOICE, "description": "A live sending identity's id; "
                        "absent or null: the default identity."},
        "codes": {**CODES, "description": "Absent or null: no codes. {\"prefix\": \"SAVE\"}: "
                  "a single-use code per recipient, {{ code }} in the subject or body."},
        "attachments": ATTACHMENTS, "versions": VERSIONS_INPUT, "ab_test": AB_TEST_INPUT, **LOCAL_TIME,
    }, ("subject", "body"), closed=False,
        description="Exactly one of list_id and segment_id.",
        extra={"oneOf": [{"required": ["list_id"]}, {"required": ["segment_id"]}]}),
    "BroadcastPatch": obj({
        "list_id": nullable(ID), "segment_id": nullable(ID),
        "subject": ONE_LINE_SUBJECT,
        "body": {"type": "string", "maxLength": MAX_BODY},
        "format": {**BODY_FORMAT, "description": "How `body` is written: markdown or html; "
                   "left out: as it was."},
        "preheader": {"type": "string", "maxLength": MAX_PREHEADER},
        "skip_if_received_within_hours": {**CAP, "description": "null or 0: no cap."},
        "identity_id": {**IDENTITY_CHOICE, "description": "A live sending identity's id; null: "
                        "the default identity."},
        "codes": {**CODES, "description": "null: no codes; {\"prefix\": \"SAVE\"}: a code "
                  "per recipient."},
        "text": {"type": ["string", "null"], "maxLength": MAX_TEXT_BODY,
                 "description": "The plain-text part as you write it ({{ merge fields }} work; "
                                "the footer is added), or null (or blank) for the one made from "
                                "the body."},
        "attachments": ATTACHMENTS, "versions": VERSIONS_INPUT, "ab_test": AB_TEST_INPUT, **LOCAL_TIME,
    }, (), description=("At least one field; the rest stay as they are. Giving segment_id "
                        "clears list_id and giving list_id clears segment_id; not both (one "
                        "of them null is fine)."),
        min_properties=1, extra={"not": BOTH_AUDIENCES}),
    "Delivery": obj({"id": {**ID, "description": "Pass the last one as `after` for the next page."},
                     "email": {"type": ["string", "null"]},
                     "status": {"type": "string", "enum": list(DELIVERY_STATUSES)},
                     "reason": {"type": ["string", "null"]}, "attempts": {"type": "integer"}}),
    "TestSend": obj({"email": EMAIL,
                     "fill_from": {**EMAIL,
                                   "description": "The subscriber whose details fill the merge "
                                                  "fields. Left out: the newest active one the "
                                                  "broadcast reaches, else the sample Alex."},
                      "variant": TEST_VARIANT}, required=("email",)),
    "TestQueued": obj({"id": ID, "test_to": {"type": "string"}, "variant": LETTER,
                       "filled_from": obj({"email": {"type": "string"},
                                           "name": {"type": "string"},
                                           "sample": {"type": "boolean"}},
                                          description="Whose details filled the merge fields "
                                                      "(sample: the made-up reader Alex).")}),
    "WhoAmI": obj({"token": {"type": "string"}, "owner_id": ID}),
}

ERROR_EXAMPLES = {
    "Unauthorized": (401, "No valid bearer token.",
                     "A valid API token is required: Authorization: Bearer TOKEN"),
    "ReadOnly": (403, "The token is read-only and this request changes something.",
                 "This token is read-only: it may only read (GET). Create a full token in "
                 "Settings to change things."),
    "NotFound": (404, "No such thing with that id.", "There is no such segment."),
    "Conflict": (409, "Not possible in the current state; the message says why.",
                 "Only a draft can be edited; this broadcast is sending."),
    "Invalid": (422, "The request was refused: the message names the field.",
                "Condition 2.1 (attributes.age gt): the value must be a number, like 42 or 9.5."),
    "TooLarge": (413, "The body is larger than the server takes (MAX_CONTENT_LENGTH).",
                 "That upload is larger than this server accepts."),
}

COMPONENTS: dict[str, Any] = {
    "securitySchemes": {"bearer": {
        "type": "http", "scheme": "bearer",
        "description": ("An API token, created in Settings or with `flask --app webapp tokens "
                        "create NAME`. A read-only token may only GET."),
    }},
    "schemas": {
        "Error": obj({"error": {"type": "string", "description": "What went wrong, in words "
                                "that can be shown to a person."},
                      "field": {"type": "string", "description": "When the refusal is about "
                                "one input: its name, or its path in the body (`subject`, "
                                "`steps[2].body`, a query parameter's `q`)."}},
                     required=("error",)),
        **AUDIENCE_SCHEMAS, **BROADCAST_SCHEMAS,
    },
    "responses": {
        name: {"description": text, "content": {"application/json": {
            "schema": ref("Error"), "example": {"error": example}}}}
        for name, (_status, text, example) in ERROR_EXAMPLES.items()
    },
}
ERROR_STATUS = {name: status for name, (status, _text, _example) in ERROR_EXAMPLES.items()}
