"""Every route declares who may use it: one permission per route and method.

A view declares itself with `@public("why")` (anybody, no sign-in), or `@allow(permission)`
(every method of the route), or `@allow(read=..., change=...)` (GET and HEAD, and the
others); a view that declares nothing takes its blueprint's defaults (`defaults(bp, read=...,
change=...)`). A route with no declaration at all is refused to everyone (403), and
tests/webapp/test_permissions.py walks `app.url_map` and fails on it, so a new route cannot
forget. The permissions and which role holds which: broadside.core.roles.

`permission_for` is the one reader of the declarations, used by the check before every
request (webapp/security.py for pages, webapp/api for tokens) and by `can` in templates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from flask import Blueprint, Flask, g
from flask_login import current_user

from broadside.core import roles

F = TypeVar("F", bound=Callable[..., Any])

PUBLIC = "public"
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DECLARABLE = frozenset(roles.PERMISSIONS) | {PUBLIC}


@overload
def public(reason: str) -> Callable[[F], F]: ...
@overload
def public(reason: F) -> F: ...
def public(reason: Any) -> Any:
    """Mark a view as reachable without signing in: `@public("why it may be")`."""
    def mark(view: F, why: str) -> F:
        view.broadside_public = True  # type: ignore[attr-defined]
        view.broadside_public_reason = why  # type: ignore[attr-defined]
        return view
    if callable(reason):
        return mark(reason, "")
    return lambda view: mark(view, str(reason))


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
