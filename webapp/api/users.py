"""People and invitations over the API (described in `webapp/apidocs/users.py`); every route
needs the `people` permission (a token of an owner's).

- GET /api/users -> 200 {"people": [User], "invitations": [Invitation]}
- POST /api/users {"email", "role"} -> 201 Invitation: an invitation mailed through the
  transactional stream, never its link; 409 when the address already signs in; an open
  invitation of the address is replaced
- GET /api/users/<id> -> 200 User
- PATCH /api/users/<id> {"role"} -> 200 User; 409 for the last owner
- DELETE /api/users/<id> -> 204 (their sessions and tokens end at once); 409 for the last owner
- DELETE /api/invitations/<id> -> 204 (its link stops working); 409 once accepted

A refused body (an unknown field, a missing one, a role that is none of the five, an address
that is not one) is 422 naming the field.
"""

from __future__ import annotations

from typing import Any

from flask import g, jsonify

from broadside.core import accounts, invitations, people, roles
from broadside.core.errors import NotFound, ValidationError
from broadside.core.people import Person
from webapp import audit_trail
from webapp.api import bp, json_body
from webapp.api.inputs import iso, only_keys
from webapp.extensions import db
from webapp.people import mailing
from webapp.permissions import allow

INVITE_FIELDS = ("email", "role")
CHANGE_FIELDS = ("role",)


def user_output(person: Person) -> dict[str, Any]:
    return {"id": person.id, "email": person.email, "name": person.name, "role": person.role,
            "two_factor": person.two_factor, "created_at": iso(person.created_at),
            "last_seen_at": iso(person.last_seen_at)}


def invitation_output(shown: invitations.Shown) -> dict[str, Any]:
    inv = shown.invitation
    return {"id": inv.id, "email": inv.email, "role": inv.role, "invited_by": inv.invited_by,
            "created_at": iso(inv.created_at), "expires_at": iso(inv.expires_at),
            "expired": shown.expired}


def _token_person():
    person = accounts.person_of_token(db.session, g.api_token)
    if person is None:  # (the token goes with its person: never reached)
        raise NotFound("This token's person no longer exists.")
    return person


def _role(data: dict[str, Any]) -> str:
    role = data.get("role")
    if not roles.is_role(role):
        raise ValidationError(f"'role' must be one of: {', '.join(roles.ROLES)}.", field="role")
    return str(role)


def _body(allowed: tuple[str, ...]) -> dict[str, Any]:
    data = json_body()
    only_keys(data, allowed)
    for key in allowed:
        if key not in data:
            raise ValidationError(f"'{key}' is required.", field=key)
    return data


@bp.route("/users", methods=["GET"])
@allow(roles.PEOPLE)
def api_users():
    return jsonify(people=[user_output(p) for p in people.everyone(db.session)],
                   invitations=[invitation_output(s) for s in invitations.open_ones(db.session)])


@bp.route("/users", methods=["POST"])
@allow(roles.PEOPLE)
def api_invite_user():
    data = _body(INVITE_FIELDS)
    role = _role(data)
    if not isinstance(data["email"], str):
        raise ValidationError("'email' must be a string: the address to invite.", field="email")
    audit_trail.note(summary=f"invited {data['email'].strip()} as {role}", role=role)
    invitation = mailing.invite(_token_person(), data["email"], role)
    shown = next(s for s in invitations.open_ones(db.session) if s.invitation.id == invitation.id)
    return jsonify(invitation_output(shown)), 201


@bp.route("/users/<int:user_id>", methods=["GET"])
@allow(roles.PEOPLE)
def api_user(user_id: int):
    return jsonify(user_output(people.get(db.session, user_id)))


@bp.route("/users/<int:user_id>", methods=["PATCH"])
@allow(roles.PEOPLE)
def api_change_user(user_id: int):
    role = _role(_body(CHANGE_FIELDS))
    person = people.get(db.session, user_id)
    audit_trail.note(summary=f"changed the role of {person.email} from {person.role} to {role}",
                     before=person.role, after=role)
    people.change_role(db.session, user_id, role, giver_role=_token_person().role)
    return jsonify(user_output(people.get(db.session, user_id)))


@bp.route("/users/<int:user_id>", methods=["DELETE"])
@allow(roles.PEOPLE)
def api_remove_user(user_id: int):
    person = people.get(db.session, user_id)
    audit_trail.note(summary=f"removed {person.email} ({person.role})", email=person.email,
                     role=person.role)
    people.remove(db.session, user_id)
    return "", 204


@bp.route("/invitations/<int:invitation_id>", methods=["DELETE"])
@allow(roles.PEOPLE)
def api_revoke_invitation(invitation_id: int):
    audit_trail.note(summary="withdrew an invitation", invitation_id=invitation_id)
    invitations.revoke(db.session, invitation_id)
    return "", 204
