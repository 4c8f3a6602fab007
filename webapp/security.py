"""Default-deny access control and the security headers sent with every response.

Every endpoint needs a signed-in person unless its view is marked `@public` (login, the
unsubscribe pages, webhooks, health) or it belongs to the API, which authenticates by bearer
token instead; and the person's role must hold the permission the route declares
(webapp/permissions.py; a route declaring nothing is refused to all). A new route therefore
cannot forget to require login, nor say who may use it.

Signing in and out go through `sign_in` and `sign_out` here, never Flask-Login's own
functions (for a person with two-factor sign-in, `sign_in` runs only after the second step:
webapp/auth/second_step.py): a session names its owner and the `session_epoch` it was opened in
(`Owner.get_id`), and holds a token of its own (`BROWSER_SESSION`) whose row in
`owner_sessions` says it is still open on the server (broadside.core.owner_sessions). It is
honoured on each request only while that row exists and the epoch is still the owner's, so
signing out ends this browser's session for good (a copied cookie stops working; other
browsers stay signed in), and a password change (a reset link, `owner reset-password`) signs
every session opened before it out. A session with no token (opened before the server kept
them) counts as signed out.
"""

from __future__ import annotations

import re
import secrets

from flask import Flask, Response, g, redirect, render_template, session, url_for
from flask_login import current_user, login_user, logout_user

from broadside.core import accounts, owner_sessions, roles, sign_in_policy
from broadside.core.i18n import _, _l
from broadside.core.models import Owner
from webapp.audit.hook import act_as_person
from webapp.extensions import db, login_manager
from webapp.htmx import make_response, request
from webapp.permissions import PUBLIC, can, permission_for, public

__all__ = ["public", "sign_in", "sign_out", "browser_token", "is_public_endpoint",
           "install_security", "forbidden"]


CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: https:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)




def style_nonce() -> str:
    """A nonce for the one <style> element a page's script may add (the rich-text editor's
    default rules: templates/_body_editor.html): minted once per response, on asking, and
    added to that response's style-src. Pages that do not ask keep the policy above as it is:
    no 'unsafe-inline' anywhere, and style attributes stay refused everywhere."""
    if "style_nonce" not in g:
        g.style_nonce = secrets.token_urlsafe(18)
    return str(g.style_nonce)


def policy_of_this_response() -> str:
    nonce = g.get("style_nonce")
    if not nonce:
        return CONTENT_SECURITY_POLICY
    return CONTENT_SECURITY_POLICY.replace("style-src 'self'",
                                           f"style-src 'self' 'nonce-{nonce}'", 1)


HSTS = "max-age=31536000"
# What a session keeps (`Owner.get_id`): "id:epoch"; a bare id is a session opened before
# epochs existed (epoch 0), which holds no browser token either and so counts no more.
_SESSION_ID = re.compile(r"([0-9]{1,10})(?::([0-9]{1,10}))?")
# The Flask session's key for this browser's token (its SHA-256 is the owner_sessions row).
BROWSER_SESSION = "browser_session"


def sign_in(owner: Owner) -> None:
    """Sign this browser in as `owner`: a new server-side session, its token in the cookie,
    with the browser (its User-Agent) and the network it came from (Settings -> Security)."""
    token = owner_sessions.open_session(
        db.session, owner.id, user_agent=request.user_agent.string,
        network=owner_sessions.network_of(request.remote_addr))
    login_user(owner)
    session[BROWSER_SESSION] = token


def browser_token() -> str | None:
    """This browser's session token (to keep it open while the person's others end)."""
    token = session.get(BROWSER_SESSION)
    return token if isinstance(token, str) else None


def sign_out() -> None:
    """End this browser's session on the server, and forget everything its cookie held (a
    secret waiting to be shown once included)."""
    owner_sessions.close_session(db.session, session.get(BROWSER_SESSION))
    logout_user()
    session.clear()


def is_public_endpoint(app: Flask, endpoint: str | None) -> bool:
    if endpoint is None or endpoint == "static":
        return True
    if endpoint.startswith("api."):
        return True  # the API authenticates every request with a bearer token instead
    return permission_for(app, endpoint, "GET") == PUBLIC


# A role named inside a sentence (the glossary's words; roles.LABELS are the column headings).
ROLE_IN_TEXT = {roles.OWNER: _l("owner"), roles.ADMIN: _l("admin"), roles.SENDER: _l("sender"),
                roles.WRITER: _l("writer"), roles.VIEWER: _l("viewer")}


def forbidden(needed: str | None, role: str) -> Response:
    """The answer to a person whose role does not allow this: 403, nothing changed; a page
    that says what it needs and who holds it, or a line for htmx to show."""
    if needed is None:
        message = _("This page does not say who may use it, so nobody may. Please report it.")
    else:
        holders = ", ".join(str(ROLE_IN_TEXT[r]) for r in roles.roles_with(needed))
        message = _("Your role (%(role)s) does not allow this. It needs one of: %(holders)s. "
                    "Ask an owner if you need it.", role=str(ROLE_IN_TEXT.get(role, role)),
                    holders=holders)
    if request.htmx:
        return make_response(render_template("_forbidden.html", message=message), 403,
                             retarget="#main", reswap="afterbegin")
    return make_response(render_template("error.html", status=403, message=message), 403)


def install_security(app: Flask) -> None:
    app.jinja_env.globals["can"] = can  # templates show a button only to who may press it
    app.jinja_env.globals["style_nonce"] = style_nonce
    # The signed cookie is refused past this age, so it lives at least as long as the longest
    # idle limit Settings allows; the server's row and that limit decide when a session ends.
    app.permanent_session_lifetime = max(app.permanent_session_lifetime,
                                         sign_in_policy.LONGEST_IDLE)
    login_manager.login_view = "auth.login"
    login_manager.login_message = _l("Please sign in to continue.")  # type: ignore[assignment]
    login_manager.localize_callback = str  # flashed in the language of the request
    login_manager.login_message_category = "info"

    @login_manager.user_loader
    def load_owner(session_id: str) -> Owner | None:
        """The session's owner, while the session is open on the server and of their
        current epoch; None (signed out) once this browser signed out, the password changed
        since, or it was left unused longer than Settings -> Security allows."""
        match = _SESSION_ID.fullmatch(session_id)
        if match is None or int(match[1]) >= 2**31:
            return None
        token = session.get(BROWSER_SESSION)
        if not isinstance(token, str):
            return None
        found = owner_sessions.owner_of(db.session, int(match[1]), int(match[2] or 0), token)
        if found is None:
            return None
        owner, last_seen = found
        g.owner_session_seen = (token, last_seen)  # noted by `require_owner`, before the view
        # What the person may do, read now: noting the session commits, which expires the row.
        g.broadside_granted = roles.permissions_of(owner.role)
        return owner

    @app.before_request
    def forget_the_last_requests_person() -> None:
        """`g` lives in the app context, which a caller may keep across requests (the test
        client inside one app context): each request decides who it is from its own cookie."""
        for key in ("_login_user", "broadside_granted"):
            g.pop(key, None)

    @app.before_request
    def require_owner() -> Response | None:
        if is_public_endpoint(app, request.endpoint):
            return None
        if current_user.is_authenticated:
            act_as_person(current_user)  # the actor of its audit rows and events
            # Loaded first thing, so noting the session as used (a commit, every few minutes)
            # cannot commit a view's work half done; a public page that reads the session
            # later leaves it unnoted.
            pending = g.pop("owner_session_seen", None)
            if pending is not None:
                owner_sessions.seen(db.session, *pending)
            needed = permission_for(app, request.endpoint, request.method)
            if needed is None or not can(needed):
                if needed is None:
                    app.logger.error("route %s declares no permission: refused",
                                     request.endpoint)
                return forbidden(needed, current_user.role)
            return None
        if request.htmx:
            # An expired session during an HTMX poll: send the whole page to the login form.
            return make_response("", 401, redirect=url_for("auth.login"))
        if not accounts.owner_exists(db.session):
            # A fresh install: there is nobody to sign in yet, so straight to creating the owner.
            return redirect(url_for("auth.setup"))
        return redirect(url_for("auth.login", next=request.full_path.rstrip("?")))

    https = str(app.config.get("BASE_URL", "")).lower().startswith("https://")

    @app.after_request
    def security_headers(response: Response) -> Response:
        response.headers.setdefault("Content-Security-Policy", policy_of_this_response())
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        if https:
            # Served over https: browsers keep to it for a year. Not for subdomains, which may
            # be other sites of the owner's.
            response.headers.setdefault("Strict-Transport-Security", HSTS)
        return response
