"""Every route declares who may use it: one permission per route and method.

A view declares itself with `@public("why")` (anybody, no sign-in), or `@allow(permission)`
(every method of the route), or `@allow(read=..., change=...)` (GET and HEAD, and the
others); a view that declares nothing takes its blueprint's defaults (`defaults(bp, read=...,
change=...)`). A route with no declaration at all is refused to everyone (403), and
tests/webapp/test_permissions.py walks `app.url_map` and fails on it, so a new route cannot
forget. The permissions and which role holds which: broadside.core.roles.

`permission_for` is the one reader of the declarations, used by the check before every
request (webapp/security.py for pages, webapp/api for tokens) and by `can` in templates.

One rule is finer than a route: a test send. Whoever may send (`send`) tests any address;
anyone else with `write` (a writer) only their own, checked by `own_address_only` before the
test is queued (the broadcast editor, an automation step's editor, the API's test send).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask import Blueprint, Flask, g
from flask_login import current_user

from broadside.core import accounts, roles
from broadside.core.addresses import normalise_email
from broadside.core.errors import ValidationError
from broadside.core.i18n import _
from webapp.extensions import db

F = TypeVar("F", bound=Callable[..., Any])

PUBLIC = "public"
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DECLARABLE = frozenset(roles.PERMISSIONS) | {PUBLIC}


def public(reason: str) -> Callable[[F], F]:
    """Mark a view as reachable without signing in, saying why: `@public("why it may be")`.
    The reason is required (a bare `@public` fails at import), and the public routes are a
    reviewed list (tests/reliability/test_security.py): making one public is a decision."""
    if not isinstance(reason, str) or not reason.strip():
        raise TypeError('@public needs its reason: @public("why anybody may use this")')

    def mark(view: F) -> F:
        view.broadside_public = True  # type: ignore[attr-defined]
        view.broadside_public_reason = reason.strip()  # type: ignore[attr-defined]
        return view
    return mark


def public_reason(app: Flask, endpoint: str) -> str:
    """Why `endpoint` is public ("" when it is not, or declares no reason)."""
    return str(getattr(app.view_functions.get(endpoint), "broadside_public_reason", ""))


def allow(permission: str | None = None, *, read: str | None = None,
          change: str | None = None) -> Callable[[F], F]:
    """Declare what a view needs: one permission for every method, or `read` (GET, HEAD) and
    `change` (POST, PUT, PATCH, DELETE) apart."""
    declared = {"read": read or permission, "change": change or permission}
    for value in declared.values():
        if value is not None and value not in roles.PERMISSIONS:
            raise ValueError(f"unknown permission {value!r}")

    def mark(view: F) -> F:
        view.broadside_permission = declared  # type: ignore[attr-defined]
        return view
    return mark


def defaults(bp: Blueprint, *, read: str, change: str) -> None:
    """What the blueprint's views need unless one declares otherwise."""
    for value in (read, change):
        if value not in roles.PERMISSIONS:
            raise ValueError(f"unknown permission {value!r}")
    bp.broadside_permissions = {"read": read, "change": change}  # type: ignore[attr-defined]


def is_public(app: Flask, endpoint: str | None) -> bool:
    if endpoint is None or endpoint == "static":
        return True
    return bool(getattr(app.view_functions.get(endpoint), "broadside_public", False))


def permission_for(app: Flask, endpoint: str | None, method: str) -> str | None:
    """The permission `method` on `endpoint` needs: "public", one of roles.PERMISSIONS, or
    None when nothing declares it (refused to everyone)."""
    if is_public(app, endpoint):
        return PUBLIC
    assert endpoint is not None
    kind = "read" if method.upper() in READ_METHODS else "change"
    declared = getattr(app.view_functions.get(endpoint), "broadside_permission", None)
    if declared and declared.get(kind):
        return str(declared[kind])
    blueprint = app.blueprints.get(endpoint.rpartition(".")[0])
    fallback = getattr(blueprint, "broadside_permissions", None)
    if fallback:
        return str(fallback[kind])
    return None


def granted() -> frozenset[str]:
    """What the current request's person (or token) may do; nothing when nobody signed in."""
    found = g.get("broadside_granted")
    if found is not None:
        return found  # type: ignore[no-any-return]
    if current_user.is_authenticated:
        return roles.permissions_of(current_user.role)
    return frozenset()


def can(permission: str) -> bool:
    """For templates: show a button only to those who may press it."""
    return permission in granted()


def acting_email() -> str:
    """The address of whoever makes this request: the signed-in person, or the API token's."""
    token = g.get("api_token")
    if token is not None:
        person = accounts.person_of_token(db.session, token)
        return person.email if person is not None else ""
    return str(current_user.email) if current_user.is_authenticated else ""


def own_address_only(address: str, *, field: str) -> None:
    """A test send's address, by role: anyone who may send (`send`) tests any address; anyone
    else only their own (a ValidationError under `field`, before anything is queued)."""
    if roles.SEND in granted():
        return
    own = acting_email()
    try:
        typed = normalise_email(address or "")
    except ValidationError:
        typed = None
    if not own or typed != own:
        raise ValidationError(
            _("You may send a test only to your own address (%(own)s): sending to any other "
              "address needs a sender, admin or owner.", own=own), field=field)
