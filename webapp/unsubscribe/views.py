"""The public unsubscribe pages behind the link in every email: no login, no cookies, no JS.

- GET  /u/<token>               asks "Unsubscribe alice@example.com from Weekly Notes?"; changes
                                nothing (mail scanners and link previewers follow links).
- POST /u/<token>               the page's button, or a mail client's RFC 8058 one-click POST
                                (`List-Unsubscribe=One-Click`, no cookie, no CSRF token); answers
                                200 itself, never a redirect.
- POST /u/<token>/resubscribe   undo.
- GET/POST /u/<token>/preferences   every list this person is on: leave, rejoin, leave all.
- /u/<token>/data, /u/<token>/erase   their own data: download it, erase it
                                (`webapp/unsubscribe/personal_data.py`).

Once the person a link was made for is erased, every one of these answers "this address is no
longer on our lists" (404) rather than the broken-link page.

The signed token is the only credential. These pages use their own layout, which never calls
`csrf_token()`, so no session cookie is ever set here.
"""

from __future__ import annotations

import logging

from flask import Blueprint, current_app, make_response, render_template, request
from redis.exceptions import RedisError

from broadside.audience.unsubscribe import service
from broadside.core.errors import DomainError, ValidationError
from broadside.mail.unsubscribe_tokens import UnsubscribeClaim, read_token
from webapp import throttle
from webapp.extensions import csrf, db
from webapp.security import public

log = logging.getLogger("broadside.unsubscribe")

bp = Blueprint("unsubscribe", __name__)

# Per client IP and per minute. Valid links: generous, because a mail provider's one-click
# POSTs and link scanners come from a few shared IPs (a scanner fetching every link of a
# broadcast paced at 5 messages/s makes 300 GETs a minute). Bad links are few in real life,
# so a tight limit on them stops probing; a bad token never reaches the database anyway.
DEFAULT_IP_LIMIT = 600
DEFAULT_BAD_TOKEN_LIMIT = 20
WINDOW_SECONDS = 60

BAD_LINK = (
    "This unsubscribe link is incomplete or damaged. Copy the whole link from the email, "
    "or use the unsubscribe link at the bottom of a more recent email."
)


class BadLink(DomainError):
    status_code = 400


class TooManyRequests(DomainError):
    status_code = 429


def _within_limit(bucket: str, limit: int) -> bool:
    # Fail open: an unsubscribe must be honoured even while Redis is down.
    try:
        return throttle.hit(bucket, limit, WINDOW_SECONDS)
    except RedisError:
        log.warning("unsubscribe throttle unavailable (Redis error); allowing")
        return True


def _claim(token: str) -> UnsubscribeClaim:
    """Check the signature (no database) and count the request against this IP."""
    ip = throttle.client_key(request.remote_addr)
    claim = read_token(token, secret_key=current_app.config["SECRET_KEY"])
    if claim is None:
        limit = int(current_app.config.get("UNSUBSCRIBE_BAD_TOKEN_LIMIT", DEFAULT_BAD_TOKEN_LIMIT))
        if not _within_limit(f"unsubscribe:bad:{ip}", limit):
            raise TooManyRequests("Too many attempts from your network. Wait a minute, then retry.")
        raise BadLink(BAD_LINK)
    limit = int(current_app.config.get("UNSUBSCRIBE_IP_LIMIT", DEFAULT_IP_LIMIT))
    if not _within_limit(f"unsubscribe:ip:{ip}", limit):
        raise TooManyRequests("Too many requests from your network. Wait a minute and try again.")
    return claim


def _page(template: str, http_status: int = 200, **context):
    response = make_response(render_template(template, **context), http_status)
    # The page shows an address: never cache it, never index it.
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Robots-Tag"] = "noindex, nofollow"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@bp.errorhandler(DomainError)
def problem(exc: DomainError):
    db.session.rollback()
    if isinstance(exc, service.AddressGone):
        return _page("unsubscribe/erased.html", exc.status_code, email=None, message=exc.message)
    response = _page("unsubscribe/problem.html", exc.status_code, status=exc.status_code,
                     message=exc.message)
    if exc.status_code == 429:
        response.headers["Retry-After"] = str(WINDOW_SECONDS)
    return response


@bp.get("/u/<token>")
@public
def confirm(token: str):
    recipient = service.resolve(db.session, _claim(token))
    return _page("unsubscribe/confirm.html", recipient=recipient, token=token)


@bp.post("/u/<token>")
@public
def one_click(token: str):
    claim = _claim(token)
    one_click_body = request.form.get("List-Unsubscribe", "").strip().lower() == "one-click"
    change = service.unsubscribe(db.session, claim, "one-click" if one_click_body else "link")
    return _page("unsubscribe/done.html", recipient=change.recipient, token=token)


@bp.post("/u/<token>/resubscribe")
@public
def resubscribe(token: str):
    change = service.resubscribe(db.session, _claim(token), "link")
    return _page("unsubscribe/resubscribed.html", recipient=change.recipient, token=token)


def _list_id(raw: str | None) -> int | None:
    return int(raw) if raw and raw.isdigit() and len(raw) < 12 else None


@bp.route("/u/<token>/preferences", methods=["GET", "POST"])
@public
def preferences(token: str):
    claim = _claim(token)
    message, status = None, 200
    if request.method == "POST":
        try:
            message = service.change_preference(
                db.session, claim, request.form.get("action", ""),
                _list_id(request.form.get("list_id")),
            )
        except ValidationError as exc:
            db.session.rollback()
            message, status = exc.message, 422
    prefs = service.preferences(db.session, claim)
    return _page("unsubscribe/preferences.html", status, prefs=prefs, token=token,
                 message=message, is_error=status != 200)


# The token is the credential; a mail client's one-click POST carries no CSRF token.
for _view in (one_click, resubscribe, preferences):
    csrf.exempt(_view)


# Their own data (download, erase), on `bp`.
from webapp.unsubscribe import personal_data  # noqa: E402,F401
