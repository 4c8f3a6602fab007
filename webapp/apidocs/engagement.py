"""The OpenAPI document's part for engagement: a list's own tracking (`PATCH /api/lists/{id}`,
webapp/api/audience.py) and "send again to those who did not open"
(`POST /api/broadcasts/{id}/non_openers`, webapp/api/non_openers.py), merged into the
document by `document.py`. A segment's engagement conditions are in `rule_schemas.py`."""

from __future__ import annotations

from typing import Any

from broadside.campaigns.analytics.modes import LIST_CHOICES
from broadside.campaigns.broadcasts.non_openers import MAX_SUBJECT, MAX_WAIT_HOURS
from webapp.apidocs.paths import BROADCAST, BROADCAST_EXAMPLE, LIST, body, operation, reply
from webapp.apidocs.schemas import ID, obj

LIST_TRACKING = {
    "type": "string", "enum": list(LIST_CHOICES),
    "description": "The list's own tracking. `off`: its readers' copies carry no tracking image "
    "and no rewritten link, whatever the broadcast's tracking. `counts`: opens and clicks are "
    "counted in aggregate at most. `people`: broadcasts sent with per-person tracking record who "
    "opened and clicked (its sign-up and preferences pages say so)."}

ENGAGEMENT_SCHEMAS: dict[str, Any] = {
    "ListTracking": LIST_TRACKING,
    "ListTrackingInput": obj({"tracking": LIST_TRACKING}),
    "ListUpdated": obj({"id": ID, "name": {"type": "string"}, "tracking": LIST_TRACKING}),
    "NonOpenersInput": obj({"subject": {
        "type": "string", "minLength": 1, "maxLength": MAX_SUBJECT,
        "description": "The new draft's subject: not blank, and different from the first "
        "broadcast's (ignoring case and spaces)."}}),
}

ENGAGEMENT_PATHS: dict[str, Any] = {
    "/api/lists/{list_id}": {"get": operation(
        "Lists", "getList", "One list, with its counts", parameters=[LIST],
        responses={"200": reply("The list.", "List")}, errors=("NotFound",)),
                             "patch": operation(
        "Lists", "updateList", "Set a list's own tracking",
        "What the list's page sets: `off`, `counts` or `people`. 422 for anything else.",
        write=True, parameters=[LIST],
        request=body("ListTrackingInput", {"tracking": "people"}),
        responses={"200": reply("Saved.", "ListUpdated",
                                {"id": 1, "name": "Weekly", "tracking": "people"})},
        errors=("NotFound", "Invalid"))},
    "/api/broadcasts/{broadcast_id}/non_openers": {"post": operation(
        "Broadcasts", "resendToNonOpeners", "Send again to those who did not open",
        "Makes a new draft (nothing is sent until it is sent) with the broadcast's content, "
        "list or segment, identity, tracking, design and attachments and a new `subject`; its "
        "audience is the people the broadcast reached (a copy `sent` or `unknown`) with no "
        "recorded open, among those its list or segment reaches when it is sent. Opens are an "
        "estimate: Apple Mail Privacy Protection opens some emails by itself (some who did "
        "not read it count as openers and will not get it) and other clients block images "
        "(some readers count as non-openers). 409 with the reason when it is not offered: "
        "not sent yet; not sent with per-person tracking; a list it went to counts in "
        "aggregate only; fewer than Settings' wait (`resend_after_hours`, 1 to "
        f"{MAX_WAIT_HOURS}, 24 by default) since it finished; or a resend of it exists.",
        write=True, parameters=[BROADCAST],
        request=body("NonOpenersInput", {"subject": "In case you missed it: November news"}),
        responses={"201": reply("The new draft.", "Broadcast",
                                {**BROADCAST_EXAMPLE, "id": 8,
                                 "subject": "In case you missed it: November news"})},
        errors=("NotFound", "Conflict", "Invalid"))},
}
