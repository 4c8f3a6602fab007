"""The OpenAPI document's part for automations (`webapp/api/automations.py`): their schemas
and their paths, merged into the document by `document.py`. Kept apart from `paths.py` and
`schemas.py`, which it reuses, so neither grows past the size a module keeps.

Limits and enumerations come from `broadside.campaigns.automations` and the models, as elsewhere.
"""

from __future__ import annotations

from typing import Any

from broadside.campaigns.automations import durations
from broadside.campaigns.automations import service as automations
from broadside.campaigns.feeds import trigger as feed_trigger
from broadside.core.models.automations import (
    AUTOMATION_STATUSES,
    FEED_EVERY,
    FEED_MODES,
    AutomationStatus,
)
from broadside.core.models.sending import DELIVERY_STATUSES
from broadside.mail.text_part import MAX_TEXT_BODY
from webapp.apidocs.paths import body, operation, reply
from webapp.apidocs.schemas import (
    ATTACHMENTS,
    BODY_FORMAT,
    CODES,
    ID,
    IDENTITY_CHOICE,
    MOMENT,
    NOT_BLANK,
    nullable,
    obj,
    ref,
)
from webapp.apidocs.versions import VERSIONS

AUTOMATION = {"name": "automation_id", "in": "path", "required": True, "schema": ID,
              "description": "The automation's id."}
# The API never shows a deleted automation: it is 404 from then on.
SHOWN_STATUSES = [s for s in AUTOMATION_STATUSES if s != AutomationStatus.DELETED.value]
EVERY_HOURS = {"type": "integer", "minimum": 1, "maximum": automations.MAX_EVERY_HOURS}
# The forms parse_duration reads (upper or lower case, outer spaces stripped), at least one
# part; what JSON Schema cannot state is the sum's bound (at most MAX_DAYS days).
_DATE = r"[0-9]{1,3}[Ww](?:[0-9]{1,4}[Dd])?|[0-9]{1,4}[Dd]"
_TIME = (r"[Tt](?:[0-9]{1,5}[Hh](?:[0-9]{1,6}[Mm])?(?:[0-9]{1,8}[Ss])?"
         r"|[0-9]{1,6}[Mm](?:[0-9]{1,8}[Ss])?|[0-9]{1,8}[Ss])")
DELAY = {"type": "string", "maxLength": 40,
         "pattern": rf"^ *[Pp](?:(?:{_DATE})(?:{_TIME})?|{_TIME}) *$", "description": (
    "How long after the previous step (the first: after they entered), as an ISO 8601 "
    f"duration in weeks, days, hours, minutes and seconds: {durations.EXAMPLES}, or P2W. "
    f"Years and months are refused (their length varies); at most {durations.MAX_DAYS} days.")}


def _triggers(suffix: str, ids: dict[str, Any], *, saved: bool) -> dict[str, Any]:
    """The two kinds of trigger, named (`JoinedListTrigger`, `SegmentTrigger` + suffix)."""
    gone = (" Null once that {} was deleted (enabling is refused until another is chosen)."
            if saved else "")
    return {
        f"JoinedListTrigger{suffix}": obj(
            {"type": {"const": "joined_list"},
             "list_id": {**ids, "description": "The list." + gone.format("list")}},
            description="Welcome: people enter when they join this list (through the API with "
            '"welcome": true, an import with welcome=1, or a confirmed sign-up).'),
        f"SegmentTrigger{suffix}": obj(
            {"type": {"const": "segment"},
             "segment_id": {**ids, "description": "The segment." + gone.format("segment")},
             "every_hours": {**EVERY_HOURS, "default": 12,
                             "description": "How often the segment is evaluated."}},
            None if saved else ("type", "segment_id"),
            description="Lifecycle: every `every_hours` hours, the people this segment matches "
            "who never entered it enter."),
        f"FeedTrigger{suffix}": obj(
            {"type": {"const": "feed"},
             "url": {"type": "string", "minLength": 1, "maxLength": feed_trigger.MAX_URL,
                     "pattern": r"^ *[Hh][Tt][Tt][Pp][Ss]?://[^\s@/?#]+([/?#][^\s]*)? *$",
                     "description": "The RSS or Atom feed's address (http or https, no user "
                     "name or password). Polled at most every 15 minutes, with ETag and "
                     "If-Modified-Since; it must resolve to public addresses only (unless "
                     "FEEDS_ALLOW_PRIVATE=1), answer within 10 s and weigh at most 5 MB. A poll "
                     "that fails is shown in `feed.error` and sends nothing."},
             "list_id": {**nullable(ID), "description": "The list each email goes to (or "
                         "segment_id: exactly one of them)." + gone.format("list")},
             "segment_id": {**nullable(ID), "description": "The segment each email goes to "
                            "(or list_id)." + gone.format("segment")},
             "mode": {"type": "string", "enum": list(FEED_MODES), "default": "each",
                      "description": "each: one email per new item; digest: the new items "
                      "together, at `at` every day or every week."},
             "every": {"type": "string", "enum": list(FEED_EVERY), "default": "daily",
                       "description": "A digest's schedule (digest only)."},
             "at": {"type": "string", "pattern": r"^ *([01][0-9]|2[0-3]):[0-5][0-9] *$",
                    "description": "A digest's time, HH:MM in the owner's time zone (Settings); "
                    "required for a digest, absent otherwise."},
             "weekday": {"type": "integer", "minimum": 0, "maximum": 6, "default": 0,
                         "description": "A weekly digest's day: 0 Monday ... 6 Sunday (weekly "
                         "only)."}},
            ("type", "url", "mode", "list_id", "segment_id") if saved else ("type", "url"),
            description="RSS to email: each new item of the feed (keyed by its id, else its "
            "link) is sent once, through a broadcast to the list or segment, its content from "
            "step 1 ([[title]], [[count]] and [[items]] filled in; the item's HTML sanitised). "
            "The items present at the first poll are recorded, never sent. A field that does "
            "not fit is 422 naming it (`trigger.url`, `trigger.at`...)."),
    }


STEP_INPUT = obj({
    "delay": {**DELAY, "default": "PT0S"},
    # One line (no CR or LF), not blank: what `service._check` refuses, stated.
    "subject": {"type": "string", "minLength": 1, "maxLength": automations.MAX_SUBJECT,
                "pattern": rf"^[^\r\n]*{NOT_BLANK}[^\r\n]*$",
                "description": "One line, with {{ merge fields }}."},
    "preheader": {"type": ["string", "null"], "maxLength": automations.MAX_PREHEADER,
                  "pattern": r"^[^\r\n]*$", "description": "One line."},
    "body": {"type": ["string", "null"], "maxLength": automations.MAX_BODY,
             "description": "Markdown (or HTML, with format html), with {{ merge fields }}."},
    "format": BODY_FORMAT,
    "text": {"type": ["string", "null"], "maxLength": MAX_TEXT_BODY,
             "description": "The plain-text part as you write it ({{ merge fields }} work; the "
                            "footer is added); absent, null or blank: made from the body."},
    "id": {**nullable(ID),
           "description": "On PUT, an existing step of this automation: it keeps its messages "
           "and moves to this place. When any step has an id, steps are matched by id (those "
           "left out are removed, their waiting messages skipped); without ids, by position. "
           "Null or absent: a new step."},
    "codes": {**CODES, "description": "Absent or null: no codes. {\"prefix\": \"SAVE\"}: each "
              "person's message mints a single-use code, {{ code }} in its subject or body (in a "
              "record-only automation the message is logged with its code, never sent)."},
    "attachments": {**ATTACHMENTS, "description": "Attachment ids (POST /api/attachments) "
                    "sent with each person's message; left out: none. At most 10 MB in all; an "
                    "unknown id or a larger total is 422 naming the step."},
    "versions": {**VERSIONS, "type": ["array", "null"], "description": "The step in other "
                 "languages, as a broadcast's `versions`; a refusal is 422 with field "
                 "`steps[N].versions`, naming the step."},
}, ("subject",))

STEP = obj({
    "id": ID, "position": {"type": "integer", "minimum": 1, "description": "1, 2, ... in order."},
    "delay": DELAY, "delay_seconds": {"type": "integer", "minimum": 0},
    "subject": {"type": "string"}, "preheader": {"type": "string"}, "body": {"type": "string"},
    "text": {"type": ["string", "null"], "description": "The plain-text part as written; null: "
             "made from the body."},
    "format": BODY_FORMAT,
    "revision_id": {**nullable(ID), "description": (
        "The frozen content new messages get. Saving changed content freezes a new one; "
        "messages already due keep the revision they had.")},
    "codes": CODES, "attachments": ATTACHMENTS, "versions": VERSIONS,
    "counts": ref("StepCounts"),
})

AUTOMATION_SCHEMAS: dict[str, Any] = {
    "AutomationStatus": {"type": "string", "enum": SHOWN_STATUSES, "description": (
        "disabled (a new one starts here: nobody enters, due messages are held), enabled, "
        "or paused (the worker met a channel-wide error: held, with `pause_reason`; enable "
        "resumes it).")},
    **_triggers("", ID, saved=False),
    **_triggers("Saved", nullable(ID), saved=True),
    "AutomationStepInput": STEP_INPUT,
    "AutomationInput": obj({
        "name": {"type": "string", "minLength": 1, "maxLength": automations.MAX_NAME},
        "trigger": {"oneOf": [ref("JoinedListTrigger"), ref("SegmentTrigger"),
                              ref("FeedTrigger")]},
        "priority": {"type": "integer", "minimum": -automations.MAX_PRIORITY,
                     "maximum": automations.MAX_PRIORITY, "default": 0,
                     "description": "Lifecycle automations are evaluated highest first; one "
                     "evaluation enters a person into one of them at most."},
        "record_only": {"type": "boolean", "default": False,
                        "description": "People are recorded as entered and nothing is sent "
                        "(a step that mints codes logs each person's message with its code)."},
        "identity_id": {**IDENTITY_CHOICE, "default": None, "description": (
            "The sending identity its messages (and test sends) go out through: a live "
            "identity's id (GET /api/identities); absent or null: the default identity. "
            "Changing it freezes new revisions (the From is part of each), reaching the "
            "messages not yet due.")},
        "steps": {"type": "array", "maxItems": automations.MAX_STEPS,
                  "items": ref("AutomationStepInput"),
                  "description": "The whole series, in order. On a replacement steps are "
                  "matched by position; those beyond the new count are removed and their "
                  "pending messages skipped."},
    }, ("name", "trigger", "steps")),
    "StepCounts": obj({status: {"type": "integer", "minimum": 0} for status in DELIVERY_STATUSES},
                      description="This step's messages by status."),
    "AutomationStep": STEP,
    "Automation": obj({
        "id": ID, "name": {"type": "string"}, "status": ref("AutomationStatus"),
        "pause_reason": {"type": ["string", "null"]},
        "trigger": {"oneOf": [ref("JoinedListTriggerSaved"), ref("SegmentTriggerSaved"),
                              ref("FeedTriggerSaved")]},
        "priority": {"type": "integer"}, "record_only": {"type": "boolean"},
        "identity_id": IDENTITY_CHOICE,
        "entered": {"type": "integer", "minimum": 0, "description": "People who entered it."},
        "created_at": MOMENT, "updated_at": MOMENT,
        "steps": {"type": "array", "items": ref("AutomationStep")},
        "feed": {**ref("FeedStatus"), "description": "A feed trigger's feed; null for the "
                 "other triggers."},
    }),
    "FeedStatus": {"oneOf": [{"type": "null"}, obj({
        "polled_at": nullable(MOMENT), "next_poll_at": nullable(MOMENT),
        "next_digest_at": nullable(MOMENT),
        "error": {"type": ["string", "null"], "description": "Why the last poll failed, in "
                  "words; null when it worked."},
        "error_at": nullable(MOMENT),
        "waiting": {"type": "integer", "minimum": 0, "description": "Items recorded and not "
                    "sent yet (a digest's)."},
        "sent_count": {"type": "integer", "minimum": 0, "description": "Items sent."},
        "sent": {"type": "array", "description": "The newest items sent (at most 20).",
                 "items": obj({"title": {"type": "string"}, "link": {"type": "string"},
                               "published_at": nullable(MOMENT), "broadcast_id": ID})}})]},
}

STEPS_EXAMPLE = [{"delay": "PT0S", "subject": "Welcome, {{ name }}", "body": "Glad you came."},
                 {"delay": "P3D", "subject": "Three tips", "preheader": "Start here",
                  "body": "1. ..."}]
INPUT_EXAMPLE = {"name": "Welcome series", "trigger": {"type": "joined_list", "list_id": 1},
                 "priority": 0, "record_only": False, "steps": STEPS_EXAMPLE}
ZERO = dict.fromkeys(DELIVERY_STATUSES, 0)
AUTOMATION_EXAMPLE = {
    "id": 5, "name": "Welcome series", "status": "enabled", "pause_reason": None,
    "trigger": {"type": "joined_list", "list_id": 1}, "priority": 0, "record_only": False,
    "identity_id": None, "entered": 120, "created_at": "2026-11-02T09:30:00Z",
    "updated_at": "2026-11-03T10:00:00Z",
    "steps": [
        {"id": 9, "position": 1, "delay": "PT0S", "delay_seconds": 0,
         "subject": "Welcome, {{ name }}", "preheader": "", "body": "Glad you came.",
         "format": "markdown", "text": None, "revision_id": 14, "codes": None, "attachments": [],
         "versions": [{"locale": "de", "subject": "Willkommen, {{ name }}", "preheader": "",
                       "body": "Schön, dass Sie da sind."}],
         "counts": {**ZERO, "sent": 118, "skipped": 2}},
        {"id": 10, "position": 2, "delay": "P3D", "delay_seconds": 259200,
         "subject": "Three tips", "preheader": "Start here", "body": "1. ...",
         "format": "markdown", "text": "Three tips, in plain words: ...", "revision_id": 15,
         "codes": {"prefix": "TIPS"},
         "attachments": [], "versions": [],
         "counts": {**ZERO, "pending": 40, "sent": 78, "skipped": 2}},
    ],
    "feed": None,
}
ACTIONS = {
    "enable": ("Enable (or resume) an automation",
               "People enter it from now on and its due messages go out; a paused one resumes. "
               "Enabling an enabled one changes nothing. 422 without a step (unless it is "
               "record only) or when its list or segment was deleted.",
               ("NotFound", "Conflict", "Invalid")),
    "disable": ("Disable an automation",
                "Nobody new enters; its due messages are held until it is enabled again. "
                "Disabling a disabled one changes nothing.", ("NotFound", "Conflict")),
}

AUTOMATION_PATHS: dict[str, Any] = {
    "/api/automations": {
        "get": operation("Automations", "listAutomations", "All automations, highest priority first",
                         "Each with its steps and their counts.",
                         responses={"200": reply("Every automation.", {
                             "type": "array", "items": ref("Automation")}, [AUTOMATION_EXAMPLE])}),
        "post": operation(
            "Automations", "createAutomation", "Create an automation",
            "It starts disabled: enable it when it is ready. Each step's content is frozen into "
            "a revision. A refused body is 422 with a message naming the field, and the step by "
            "its number; the list or segment of the trigger must exist; names are unique "
            "(ignoring case).",
            write=True, request=body("AutomationInput", INPUT_EXAMPLE),
            responses={"201": reply("Created (disabled).", "Automation",
                                    {**AUTOMATION_EXAMPLE, "status": "disabled", "entered": 0})},
            errors=("Conflict", "Invalid")),
    },
    "/api/automations/{automation_id}": {
        "get": operation("Automations", "getAutomation", "One automation, with its steps' counts",
                         parameters=[AUTOMATION],
                         responses={"200": reply("The automation.", "Automation", AUTOMATION_EXAMPLE)},
                         errors=("NotFound",)),
        "put": operation(
            "Automations", "replaceAutomation", "Replace an automation",
            "The whole automation: fields left out take their defaults. Steps are matched by "
            "position; a step whose content changed gets a new revision, which reaches the "
            "messages not yet due (those already due keep theirs). A changed delay applies to "
            "people who enter afterwards. Steps beyond the new count are removed and their "
            "pending messages skipped; what was sent stays in the send log.",
            parameters=[AUTOMATION], write=True, request=body("AutomationInput", INPUT_EXAMPLE),
            responses={"200": reply("Saved.", "Automation", AUTOMATION_EXAMPLE)},
            errors=("NotFound", "Conflict", "Invalid")),
        "delete": operation(
            "Automations", "deleteAutomation", "Delete an automation",
            "Its pending messages are skipped; what it sent is kept. It is 404 from then on.",
            parameters=[AUTOMATION], write=True, responses={"204": reply("Deleted.")},
            errors=("NotFound",)),
    },
    **{f"/api/automations/{{automation_id}}/{action}": {"post": operation(
        "Automations", f"{action}Automation", summary, description, parameters=[AUTOMATION],
        write=True, responses={"200": reply("Its state now.", "Automation")}, errors=errors)}
       for action, (summary, description, errors) in ACTIONS.items()},
}
