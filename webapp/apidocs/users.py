"""The OpenAPI document's part for people and invitations (`webapp/api/users.py`): their
schemas and paths, merged into the document by `document.py`. The roles come from
`broadside.core.roles`."""

from __future__ import annotations

from typing import Any

from broadside.core import roles
from webapp.apidocs.paths import body, operation, reply
from webapp.apidocs.schemas import EMAIL, ID, obj, ref

USER = {"name": "user_id", "in": "path", "required": True, "schema": ID,
        "description": "The person's id."}
INVITATION = {"name": "invitation_id", "in": "path", "required": True, "schema": ID,
              "description": "The invitation's id."}
ROLE = {"type": "string", "enum": list(roles.ROLES), "description": "; ".join(
    f"`{role}`: {roles.DESCRIPTIONS[role]}" for role in roles.ROLES)}
MOMENT = {"type": "string", "format": "date-time"}
PEOPLE_ONLY = ("Needs a token of an owner's (the `people` permission); any other role's "
               "token is refused with 403.")

USER_SCHEMAS: dict[str, Any] = {
    "InviteInput": obj({
        "email": {**EMAIL, "maxLength": 320,
                  "description": "The address to invite; one that already signs in is 409."},
        "role": {**ROLE, "description": "The role they join with: at most the inviter's. "
                 + ROLE["description"]},
    }),
    "RoleInput": obj({"role": ROLE}),
    "User": obj({
        "id": ID,
        "email": {"type": "string"},
        "name": {"type": "string", "description": "As they gave it when they joined ('' for "
                 "people created on the command line)."},
        "role": ROLE,
        "two_factor": {"type": "boolean", "description": "Whether they sign in with a second "
                       "factor."},
        "created_at": MOMENT,
        "last_seen_at": {"type": ["string", "null"], "format": "date-time", "description": (
            "The latest use of any of their open sessions; null when signed in nowhere.")},
    }),
    "Invitation": obj({
        "id": ID,
        "email": {"type": "string"},
        "role": ROLE,
        "invited_by": {"type": ["integer", "null"], "description": "The inviter's id (null: "
                       "the command line); they may have been removed since."},
        "created_at": MOMENT,
        "expires_at": {**MOMENT, "description": "72 hours after it was sent."},
        "expired": {"type": "boolean"},
    }, description="An invitation neither accepted nor withdrawn. Its link is never shown: "
                   "only its SHA-256 is stored, and it is mailed once."),
    "UsersList": obj({
        "people": {"type": "array", "items": ref("User")},
        "invitations": {"type": "array", "items": ref("Invitation"),
                        "description": "Open invitations (expired ones included), newest first."},
    }),
}

USER_EXAMPLE = {"id": 2, "email": "ana@example.com", "name": "Ana Lima", "role": "writer",
                "two_factor": True, "created_at": "2026-11-30T21:12:46Z",
                "last_seen_at": "2026-12-01T08:02:00Z"}
INVITATION_EXAMPLE = {"id": 4, "email": "bo@example.com", "role": "viewer", "invited_by": 1,
                      "created_at": "2026-12-01T09:00:00Z", "expires_at": "2026-12-04T09:00:00Z",
                      "expired": False}

USER_PATHS: dict[str, Any] = {
    "/api/users": {
        "get": operation("People", "listUsers", "People and open invitations",
                         "Everyone who signs in, owners first, and the invitations waiting. "
                         + PEOPLE_ONLY,
                         responses={"200": reply("People and invitations.", "UsersList", {
                             "people": [USER_EXAMPLE], "invitations": [INVITATION_EXAMPLE]})}),
        "post": operation(
            "People", "inviteUser", "Invite someone",
            "Mails a single-use link, valid 72 hours, through the transactional stream; the "
            "invitee chooses their name and password there and joins with the role. An open "
            "invitation of the same address is replaced (its link stops working). 409 when the "
            "address already signs in; 422 for a missing field, a role that is none of the "
            "five or an address that is not one. " + PEOPLE_ONLY,
            write=True, request=body("InviteInput", {"email": "bo@example.com", "role": "viewer"}),
            responses={"201": reply("Invited; the email is queued.", "Invitation",
                                    INVITATION_EXAMPLE)},
            errors=("Conflict", "Invalid")),
    },
    "/api/users/{user_id}": {
        "get": operation("People", "getUser", "One person", PEOPLE_ONLY, parameters=[USER],
                         responses={"200": reply("The person.", "User", USER_EXAMPLE)},
                         errors=("NotFound",)),
        "patch": operation(
            "People", "changeUserRole", "Change a person's role",
            "It applies to their next page and API call. The last owner cannot be demoted "
            "(409). " + PEOPLE_ONLY, parameters=[USER], write=True,
            request=body("RoleInput", {"role": "sender"}),
            responses={"200": reply("The person with their new role.", "User",
                                    {**USER_EXAMPLE, "role": "sender"})},
            errors=("NotFound", "Conflict", "Invalid")),
        "delete": operation(
            "People", "removeUser", "Remove a person",
            "Their sessions and API tokens stop working at once. The last owner cannot be "
            "removed (409). " + PEOPLE_ONLY, parameters=[USER], write=True,
            responses={"204": reply("Removed.")}, errors=("NotFound", "Conflict")),
    },
    "/api/invitations/{invitation_id}": {
        "delete": operation(
            "People", "revokeInvitation", "Withdraw an invitation",
            "Its link stops working; withdrawing one already withdrawn changes nothing. 409 once "
            "it was accepted. " + PEOPLE_ONLY, parameters=[INVITATION], write=True,
            responses={"204": reply("Withdrawn.")}, errors=("NotFound", "Conflict")),
    },
}
