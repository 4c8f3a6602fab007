"""The OpenAPI document's `paths`: every route of the API blueprint (`webapp/api/*.py`), one
operation each, with its parameters, an example request body and its responses.

tests/webapp/test_openapi.py compares these with `app.url_map` in both directions, so a route
added without its description here (or described but gone) fails the suite.
"""

from __future__ import annotations

from typing import Any

from broadside.audience.subscribers.search import MAX_QUERY, STATUS_FILTERS
from broadside.audience.subscribers.service import MAX_NAME
from broadside.audience.transfer.importer import CONSENTS
from broadside.audience.transfer.report import MAX_KEPT_ROWS
from broadside.core.models.sending import DELIVERY_STATUSES
from webapp.api.broadcasts import DEFAULT_PAGE as BROADCAST_PAGE
from webapp.api.broadcasts import MAX_PAGE as MAX_BROADCAST_PAGE
from webapp.api.subscribers import DEFAULT_PAGE as SUBSCRIBER_PAGE
from webapp.api.subscribers import MAX_PAGE as MAX_SUBSCRIBER_PAGE
from webapp.apidocs.schemas import AFTER, ERROR_STATUS, ID, VERSIONS_EXAMPLE, ref

JSON = "application/json"


def _id_param(name: str, what: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": ID,
            "description": f"The {what}'s id."}


SUBSCRIBER = _id_param("subscriber_id", "subscriber")
LIST = _id_param("list_id", "list")
SEGMENT = _id_param("segment_id", "segment")
BROADCAST = _id_param("broadcast_id", "broadcast")


def query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}


def paging(default: int, maximum: int, after: str) -> list[dict[str, Any]]:
    return [query("after", AFTER, after),
            query("limit", {"type": "integer", "minimum": 1, "maximum": maximum,
                            "default": default}, f"At most this many items (1-{maximum}).")]


def body(schema: str, example: Any, description: str = "") -> dict[str, Any]:
    request: dict[str, Any] = {"required": True, "content": {
        JSON: {"schema": ref(schema), "example": example}}}
    if description:
        request["description"] = description
    return request


def reply(description: str, schema: dict[str, Any] | str | None = None,
          example: Any = None) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description}
    if schema is not None:
        media: dict[str, Any] = {"schema": ref(schema) if isinstance(schema, str) else schema}
        if example is not None:
            media["example"] = example
        response["content"] = {JSON: media}
    return response


def operation(tag: str, operation_id: str, summary: str, description: str = "", *,
              parameters: list[dict[str, Any]] | None = None,
              request: dict[str, Any] | None = None, responses: dict[str, Any],
              errors: tuple[str, ...] = (), write: bool = False) -> dict[str, Any]:
    """One operation; it may answer 401, a write 403 (a read-only token), a body 413."""
    shared = ("Unauthorized", *(("ReadOnly",) if write else ()),
              *(("TooLarge",) if request is not None and "TooLarge" not in errors else ()), *errors)
    op: dict[str, Any] = {"tags": [tag], "operationId": operation_id, "summary": summary,
                          **({"description": description} if description else {})}
    if parameters:
        op["parameters"] = parameters
    if request is not None:
        op["requestBody"] = request
    op["responses"] = {**responses, **{str(ERROR_STATUS[name]): {
        "$ref": f"#/components/responses/{name}"} for name in shared}}
    return op


RULES_EXAMPLE = {"all": [
    {"field": "attributes.city", "op": "equals", "value": "Berlin"},
    {"any": [{"field": "joined", "op": "within_days", "value": 30},
             {"field": "received", "op": "is_not", "value": 12}]},
]}
SEGMENT_EXAMPLE = {"id": 3, "name": "Berlin readers", "rules": RULES_EXAMPLE,
                   "created_at": "2026-11-02T09:30:00Z", "updated_at": "2026-11-02T09:30:00Z"}
SUBSCRIBER_EXAMPLE = {"id": 41, "email": "ann@example.com", "name": "Ann", "locale": "de",
                      "attributes": {"city": "Berlin", "plan": "gold"}, "suppression": None,
                      "created_at": "2026-10-01T08:00:00Z", "timezone": "Europe/Berlin",
                      "subscriptions": [{"list_id": 1, "status": "active"}]}
BULK_EXAMPLE = {"id": 5, "action": "add", "list_id": 2, "status": "queued", "total": 120,
                "processed": 0, "acted_on": 0, "no_longer_matched": 0, "changed": 0,
                "error": None, "created_at": "2026-12-01T10:00:00Z", "finished_at": None}
COUNTS_EXAMPLE = {"total": 0, **{status: 0 for status in DELIVERY_STATUSES}}
BROADCAST_EXAMPLE = {"id": 7, "status": "draft", "subject": "November news", "preheader": "",
                     "list_id": None, "segment_id": 3, "skip_if_received_within_hours": 24,
                     "identity_id": None, "codes": None, "attachments": [], "format": "markdown",
                     "versions": [VERSIONS_EXAMPLE], "counts": COUNTS_EXAMPLE,
                     "created_at": "2026-11-20T10:00:00Z", "updated_at": "2026-11-20T10:05:00Z",
                     "scheduled_at": None, "finished_at": None, "ab_test": None, "send_at_local": "09:00"}
ACTIONS = {
    "send": ("Send a draft now", "Freezes its content, snapshots the audience and queues the "
             "send. 409 if it is not a draft; 422 if it cannot be sent (no subject, no audience).",
             "202", "Queued."),
    "pause": ("Pause a send", "409 unless it is queued or sending.", "200", "Paused."),
    "resume": ("Resume a paused send", "409 unless it is paused.", "200", "Queued again."),
    "cancel": ("Cancel a send", "The rows not yet sent become skipped. 409 unless it is "
               "scheduled, queued, sending or paused.", "200", "Cancelled."),
}

TOKEN_PATHS: dict[str, Any] = {
    "/api/whoami": {"get": operation(
        "Token", "whoami", "Which token is this",
        responses={"200": reply("The token's name and its owner.", "WhoAmI",
                                {"token": "zapier", "owner_id": 1})})},
    "/api/openapi.json": {"get": {
        **operation("Token", "openapi", "This document (OpenAPI 3.1)",
                    "Served without a token: it is documentation.",
                    responses={"200": reply("The OpenAPI document.", {"type": "object"})}),
        "security": [],
    }},
}
# The description of the document itself answers no 401.
del TOKEN_PATHS["/api/openapi.json"]["get"]["responses"]["401"]

LIST_PATHS: dict[str, Any] = {
    "/api/lists": {
        "get": operation("Lists", "listLists", "All lists, with their counts",
                         responses={"200": reply("Every list.", {"type": "array",
                                                                 "items": ref("List")})}),
        "post": operation("Lists", "createList", "Create a list", write=True,
                          request=body("ListInput", {"name": "Weekly"}),
                          responses={"201": reply("Created.", "ListCreated", {"id": 1, "name": "Weekly"})},
                          errors=("Conflict", "Invalid")),
    },
    "/api/lists/{list_id}/import": {"post": operation(
        "Lists", "importCsv", "Import a CSV file into a list",
        "Multipart form with the file in the field `file`; a header row with an `email` column "
        "(and optionally `name` and attribute columns; `rejected_line` and `rejected_reason`, "
        "the columns of a rejected-rows download, are ignored; of an export's columns, a row "
        "whose `status` is unsubscribed or whose `suppression` names one is skipped, and the "
        "dates and `lists` are ignored). `consent` says how these "
        "people agreed to receive mail: `opted_in` (the default) adds new people as active "
        "(nobody is emailed); `confirm` adds them unconfirmed, and the worker sends each the "
        "sign-up form's confirmation email at the sending pace (`status` is `asking` until "
        "all are queued). Either way people already on the list keep their status: nobody "
        "is downgraded, and people who unsubscribed from the list or whose address is "
        "suppressed are skipped (counted in `skipped`), never re-added or asked. Rows that "
        "cannot be used are listed with the reason and the row as uploaded (the first "
        f"{MAX_KEPT_ROWS:,}); a name longer than {MAX_NAME} characters is shortened, with a "
        "warning. With `welcome` set to 1 or true, exactly the people the import adds to the "
        "list as active enter its enabled welcome automations (people asked to confirm enter "
        "them when they confirm). A file of at most 1 MB (`API_IMPORT_INLINE_BYTES`) is "
        "imported in the request and answered 200 with the result; a larger one (up to "
        "`MAX_IMPORT_BYTES`, as on the import page) is stored and imported by the worker, "
        "answered 202 with the import's id and its status URL (also in `Location`): poll "
        "`GET /api/imports/{import_id}` until `status` is `done` or `failed`.",
        parameters=[LIST], write=True,
        request={"required": True, "content": {"multipart/form-data": {"schema": {
            "type": "object", "required": ["file"], "properties": {
                "file": {"type": "string", "contentMediaType": "text/csv"},
                "consent": {"type": "string", "enum": list(CONSENTS), "default": "opted_in",
                            "description": (
                    "How these people agreed to receive mail: `opted_in` (they already "
                    "opted in) or `confirm` (ask them to confirm). Absent: `opted_in`, as "
                    "before this choice existed; anything else is 422.")},
                "welcome": {"type": "string", "enum": ["1", "0", "true", "false"],
                            "default": "0", "description": (
                                "1 or true: the people added enter the list's welcome "
                                "automations. Anything else is 422.")}}}}}},
        responses={"200": reply("Imported.", "ImportResult", {
            "import_id": 7, "status": "done", "consent": "opted_in", "imported": 2,
            "updated": 0, "skipped": {"unsubscribed": 1, "suppressed": 0},
            "rejected": [{"line": 4, "reason": "not a valid email address",
                          "row": ["ann@example", "Ann", "Paris"]}],
            "rejected_count": 1,
            "warnings": [{"line": 6, "message": "name shortened to 200 characters (it had 231)"}],
            "empty_rows": 0, "welcomed": 0, "welcome_note": None}),
                   "202": reply("Stored; the worker imports it.", "ImportQueued", {
                       "import_id": 8, "status": "queued", "status_url": "/api/imports/8"}),
                   "413": reply("The file is larger than the import limit.", "Error"),
                   "503": reply("The import could not be queued (Redis is not answering); "
                                "nothing was imported.", "Error")},
        errors=("NotFound", "Invalid"))},
    "/api/imports/{import_id}": {"get": operation(
        "Lists", "getImport", "An import's progress and result",
        "While the worker imports the file, `processed_rows` counts the rows read of "
        "`total_rows` (null until the file is counted, its first step). Once `status` is "
        "`done` (or `asking`: the worker is queueing confirmation emails) the fields are the "
        "same as the import's 200 answer; `failed` comes with `error`.",
        parameters=[_id_param("import_id", "import")],
        responses={"200": reply("The import.", "ImportStatus", {
            "import_id": 8, "status": "running", "consent": "opted_in", "imported": 40000,
            "updated": 0, "skipped": {"unsubscribed": 0, "suppressed": 0}, "rejected": [],
            "rejected_count": 0, "warnings": [], "empty_rows": 0, "welcomed": 0,
            "welcome_note": None, "total_rows": 1000000,
            "processed_rows": 40000, "error": None})},
        errors=("NotFound",))},
}

SUBSCRIBER_PATHS: dict[str, Any] = {
    "/api/subscribers": {
        "get": operation(
            "Subscribers", "listSubscribers", "Subscribers, filtered, a page at a time",
            "Ascending id. Pass the `next` of one page as `after` to get the following one; "
            "`next` is null on the last page. Filters combine (AND). An invalid value, an "
            "unknown parameter, or a list or segment that does not exist is 422, never an "
            "unfiltered or empty page.",
            parameters=[
                *paging(SUBSCRIBER_PAGE, MAX_SUBSCRIBER_PAGE,
                        "The previous page's `next`: only subscribers with a higher id."),
                query("list_id", ID, "On this list (in any status; with a subscription "
                      "`status`, in that status on this list)."),
                query("segment_id", ID, "Whom this segment reaches now, as a send would."),
                query("status", {"type": "string", "enum": list(STATUS_FILTERS)},
                      "A subscription status (on any list, or on `list_id`), `suppressed`, or "
                      "one kind of suppression."),
                query("q", {"type": "string", "maxLength": MAX_QUERY},
                      "Text found anywhere in the address or the name (case ignored)."),
            ],
            responses={"200": reply("One page.", "SubscriberPage",
                                    {"items": [SUBSCRIBER_EXAMPLE], "next": 41})},
            errors=("Invalid",)),
        "post": operation(
            "Subscribers", "saveSubscriber", "Add a subscriber (or update a known address)",
            "A new address is 201; a known one is 200 with the same id: its name is replaced "
            "when given, attributes are merged, and the lists are added as active (an "
            "unsubscribed or suppressed person is never re-activated).", write=True,
            request=body("SubscriberInput", {"email": "ann@example.com", "name": "Ann",
                                             "lists": [1], "locale": "de", "timezone": "Europe/Berlin"}),
            responses={"201": reply("Created.", "SubscriberSaved",
                                    {"id": 41, "email": "ann@example.com", "warnings": []}),
                       "200": reply("Known address, updated.", "SubscriberSaved")},
            errors=("Invalid",)),
    },
    "/api/subscribers/{subscriber_id}": {
        "get": operation("Subscribers", "getSubscriber", "One subscriber, with their lists",
                         parameters=[SUBSCRIBER],
                         responses={"200": reply("The subscriber.", "SubscriberDetail")},
                         errors=("NotFound",)),
        "patch": operation(
            "Subscribers", "editSubscriber", "Change a subscriber's name, language or time zone",
            "`attributes` replaces all of them; `locale` null: the list's default; `timezone` null: none.",
            parameters=[SUBSCRIBER], write=True,
            request=body("SubscriberPatch", {"name": "Ann Lee", "timezone": "Asia/Tokyo"}),
            responses={"200": reply("Changed.", "Subscriber", SUBSCRIBER_EXAMPLE)},
            errors=("NotFound", "Invalid")),
        "delete": operation(
            "Subscribers", "eraseSubscriber", "Erase a subscriber (a privacy request)",
            "Their subscriptions and history go; broadcasts keep their counts.",
            parameters=[SUBSCRIBER], write=True, responses={"204": reply("Erased.")},
            errors=("NotFound",)),
    },
    "/api/subscribers/bulk": {"post": operation(
        "Subscribers", "bulkAction", "Act on many subscribers at once, in the background",
        "What the subscriber table's bulk actions do: add to a list, remove from one (someone "
        "who unsubscribed stays recorded as unsubscribed), unsubscribe from one list or all, "
        "block, erase. Nothing is sent to anyone. Checked at once (422 with the reason: nobody "
        "selected or matching, a list or a person that does not exist). The set of people is "
        "fixed when the call is accepted; then the worker does it in batches, leaving alone "
        "anyone of the set who no longer matches when reached (`no_longer_matched`): follow "
        "it with GET /api/subscribers/bulk/{bulk_id}.",
        write=True, request=body("BulkInput", {"action": "add", "list_id": 2,
                                               "filter": {"q": "hamilton"}, "expected": 120}),
        responses={"202": reply("Queued.", "BulkAction", BULK_EXAMPLE)},
        errors=("Conflict", "Invalid"))},
    "/api/subscribers/bulk/{bulk_id}": {"get": operation(
        "Subscribers", "getBulkAction", "How far a bulk action got",
        parameters=[_id_param("bulk_id", "bulk action")],
        responses={"200": reply("The action.", "BulkAction",
                                {**BULK_EXAMPLE, "status": "done", "processed": 120,
                                 "acted_on": 119, "no_longer_matched": 1, "changed": 118,
                                 "finished_at": "2026-12-01T10:00:09Z"})},
        errors=("NotFound",))},
    "/api/subscribers/{subscriber_id}/unsubscribe": {"post": operation(
        "Subscribers", "unsubscribe", "Unsubscribe a subscriber from one list",
        "Idempotent: `changed` is false when they had already left. Someone who was never on "
        "that list is 404; a list that does not exist is 422.",
        parameters=[SUBSCRIBER], write=True, request=body("UnsubscribeInput", {"list_id": 1}),
        responses={"200": reply("They are unsubscribed from that list.", "Unsubscribed",
                                {"subscriber_id": 41, "list_id": 1, "status": "unsubscribed",
                                 "changed": True})},
        errors=("NotFound", "Invalid"))},
}

SEGMENT_PATHS: dict[str, Any] = {
    "/api/segments": {
        "get": operation("Segments", "listSegments", "All segments, by name",
                         responses={"200": reply("Every segment.", {
                             "type": "array", "items": ref("Segment")}, [SEGMENT_EXAMPLE])}),
        "post": operation(
            "Segments", "createSegment", "Create a segment",
            "Every condition is checked before anything is saved; a refused one is named in the "
            "422 message by its outline number (condition 2.1 is the first item of the second "
            "item). Lists and broadcasts the rules name must exist.",
            write=True, request=body("SegmentInput", {"name": "Berlin readers", "rules": RULES_EXAMPLE}),
            responses={"201": reply("Created.", "Segment", SEGMENT_EXAMPLE)},
            errors=("Conflict", "Invalid")),
    },
    "/api/segments/{segment_id}": {
        "get": operation("Segments", "getSegment", "One segment, with how many it reaches now",
                         parameters=[SEGMENT],
                         responses={"200": reply("The segment.", "SegmentWithCount",
                                                 {**SEGMENT_EXAMPLE, "count": 1234})},
                         errors=("NotFound",)),
        "put": operation(
            "Segments", "replaceSegment", "Replace a segment's name and rules",
            parameters=[SEGMENT], write=True,
            request=body("SegmentInput", {"name": "Berlin readers", "rules": RULES_EXAMPLE}),
            responses={"200": reply("Saved.", "Segment", SEGMENT_EXAMPLE)},
            errors=("NotFound", "Conflict", "Invalid")),
        "delete": operation(
            "Segments", "deleteSegment", "Delete a segment",
            "409 with the reason while a scheduled, queued, sending or paused broadcast uses it. "
            "Drafts that chose it are left without an audience.",
            parameters=[SEGMENT], write=True, responses={"204": reply("Deleted.")},
            errors=("NotFound", "Conflict")),
    },
    "/api/segments/{segment_id}/count": {"get": operation(
        "Segments", "countSegment", "How many people a segment reaches now",
        "People its rules match who are active on at least one list and not suppressed.",
        parameters=[SEGMENT], responses={"200": reply("The count.", "Count", {"count": 1234})},
        errors=("NotFound",))},
}

BROADCAST_PATHS: dict[str, Any] = {
    "/api/broadcasts": {
        "get": operation(
            "Broadcasts", "listBroadcasts", "Broadcasts, newest first, a page at a time",
            "Newest first (descending id). Pass the `next` of one page as `after` to get the "
            "following (older) one; `next` is null on the last page.",
            parameters=paging(BROADCAST_PAGE, MAX_BROADCAST_PAGE,
                              "The previous page's `next`: only broadcasts with a lower id."),
            responses={"200": reply("One page.", "BroadcastPage",
                                    {"items": [BROADCAST_EXAMPLE], "next": None})},
            errors=("Invalid",)),
        "post": operation(
            "Broadcasts", "createBroadcast", "Create a draft",
            "To a list (`list_id`) or a segment (`segment_id`): exactly one. It goes out through "
            "the sending identity `identity_id` (absent or null: the default).", write=True,
            request=body("BroadcastInput", {"segment_id": 3, "subject": "November news",
                                            "body": "Hello {{ name }}!",
                                            "skip_if_received_within_hours": 24, "send_at_local": "09:00",
                                            "identity_id": 2, "codes": {"prefix": "SAVE"}}),
            responses={"201": reply("Created.", "BroadcastCreated",
                                    {"id": 7, "status": "draft", "identity_id": 2, "versions": [],
                                     "codes": {"prefix": "SAVE"}, "attachments": [], "format": "markdown",
                                     "send_at_local": "09:00"})},
            errors=("Invalid",)),
    },
    "/api/broadcasts/{broadcast_id}": {
        "get": operation("Broadcasts", "getBroadcast", "A broadcast's state and counts",
                         parameters=[BROADCAST],
                         responses={"200": reply("The broadcast.", "BroadcastDetail")},
                         errors=("NotFound",)),
        "patch": operation(
            "Broadcasts", "editDraft", "Edit a draft",
            "Only the fields given change. 409 once it is no longer a draft.",
            parameters=[BROADCAST], write=True,
            request=body("BroadcastPatch", {"subject": "November news, part 2", "list_id": 1}),
            responses={"200": reply("Saved.", "Broadcast", BROADCAST_EXAMPLE)},
            errors=("NotFound", "Conflict", "Invalid")),
        "delete": operation(
            "Broadcasts", "deleteDraft", "Delete a draft", "409 once it is no longer a draft.",
            parameters=[BROADCAST], write=True, responses={"204": reply("Deleted.")},
            errors=("NotFound", "Conflict")),
    },
    **{f"/api/broadcasts/{{broadcast_id}}/{action}": {"post": operation(
        "Broadcasts", f"{action}Broadcast", summary, description, parameters=[BROADCAST],
        write=True, responses={status: reply(answer, "BroadcastState")},
        errors=("NotFound", "Conflict", *(("Invalid",) if action == "send" else ())))}
       for action, (summary, description, status, answer) in ACTIONS.items()},
    "/api/broadcasts/{broadcast_id}/deliveries": {"get": operation(
        "Broadcasts", "listDeliveries", "Who a broadcast went to, and what became of each",
        "Ordered by delivery id, at most `limit` rows after the delivery id `after`.",
        parameters=[BROADCAST,
                    query("status", {"type": "string", "enum": list(DELIVERY_STATUSES)},
                          "Only rows in this status."),
                    query("after", AFTER, "Skip rows up to this delivery id."),
                    query("limit", {"type": "integer", "minimum": 1, "maximum": 10_000,
                                    "default": 1000}, "At most this many rows (1-10000).")],
        responses={"200": reply("The rows.", {"type": "array", "items": ref("Delivery")})},
        errors=("NotFound", "Invalid"))},
    "/api/broadcasts/{broadcast_id}/test": {"post": operation(
        "Broadcasts", "testSend", "Send a test copy to one address", parameters=[BROADCAST], write=True,
        request=body("TestSend", {"email": "me@example.com", "fill_from": "ana@example.com"}),
        responses={"202": reply("Queued ahead of broadcasts.", "TestQueued",
                                {"id": 7, "test_to": "me@example.com", "variant": "A",
                                 "filled_from": {"email": "ana@example.com", "name": "Ana",
                                                 "sample": False}})},
        errors=("NotFound", "Invalid"))},
}

PATHS: dict[str, Any] = {**TOKEN_PATHS, **LIST_PATHS, **SUBSCRIBER_PATHS, **SEGMENT_PATHS,
                         **BROADCAST_PATHS}
