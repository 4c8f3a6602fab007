"""What every page behind a signed unsubscribe link shares: the `unsubscribe` blueprint, the
token check with its per-IP limits (`claim_of`), the answer that is never cached nor indexed
(`page`), and the error page a refused link gets. The routes are in `views.py` (unsubscribe,
resubscribe, preferences) and `personal_data.py` (download, erase); `webapp.create_app`
imports both.
"""

from __future__ import annotations

import logging

from flask import Blueprint, current_app, make_response, render_template, request
from redis.exceptions import RedisError

from broadside.audience.unsubscribe import service
from broadside.core.errors import DomainError
from broadside.core.i18n import _
from broadside.mail.unsubscribe_tokens import UnsubscribeClaim, read_token
from webapp import throttle
from webapp.extensions import db
from webapp.signup.language import lang_arg, page_language

log = logging.getLogger("broadside.unsubscribe")

bp = Blueprint("unsubscribe", __name__)

# Per client IP and per minute. Valid links: generous, because a mail provider's one-click
# POSTs and link scanners come from a few shared IPs (a scanner fetching every link of a
# broadcast paced at 5 messages/s makes 300 GETs a minute). Bad links are few in real life,
# so a tight limit on them stops probing; a bad token never reaches the database anyway.
DEFAULT_IP_LIMIT = 600
DEFAULT_BAD_TOKEN_LIMIT = 20
WINDOW_SECONDS = 60



def N_(message: str) -> str:
    return message


BAD_LINK = N_(
    "This unsubscribe link is incomplete or damaged. Copy the whole link from the email, "
    "or use the unsubscribe link at the bottom of a more recent email."
)


class BadLink(DomainError):
    status_code = 400


class TooManyRequests(DomainError):
    status_code = 429


def within_limit(bucket: str, limit: int) -> bool:
    # Fail open: an unsubscribe must be honoured even while Redis is down.
    try:
        return throttle.hit(bucket, limit, WINDOW_SECONDS)
    except RedisError:
        log.warning("unsubscribe throttle unavailable (Redis error); allowing")
        return True


def claim_of(token: str) -> UnsubscribeClaim:
    """Check the signature (no database) and count the request against this IP."""
    ip = throttle.client_key(request.remote_addr)
    claim = read_token(token, secret_key=current_app.config["SECRET_KEY"])
    if claim is None:
        limit = int(current_app.config.get("UNSUBSCRIBE_BAD_TOKEN_LIMIT", DEFAULT_BAD_TOKEN_LIMIT))
        if not within_limit(f"unsubscribe:bad:{ip}", limit):
            raise TooManyRequests(_("Too many attempts from your network. Wait a minute, then "
                                    "retry."))
        raise BadLink(_(BAD_LINK))
    limit = int(current_app.config.get("UNSUBSCRIBE_IP_LIMIT", DEFAULT_IP_LIMIT))
    if not within_limit(f"unsubscribe:ip:{ip}", limit):
        raise TooManyRequests(_("Too many requests from your network. Wait a minute and try "
                                "again."))
    return claim


def speak_to(recipient: service.Recipient) -> service.Recipient:
    """Speak the reader's language on their pages (webapp.signup.language: `?lang=`, else
    theirs, else the browser's, else their list's, else Settings'), before any word is
    written."""
    page_language(recipient.list_language, recipient.locale)
    return recipient


def reader_of(claim: UnsubscribeClaim) -> service.Recipient:
    """The token's reader, their language spoken from here on."""
    return speak_to(service.resolve(db.session, claim))


def page(template: str, http_status: int = 200, **context):
    context.setdefault("lang_arg", lang_arg())
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
        return page("unsubscribe/erased.html", exc.status_code, email=None, message=exc.message)
    response = page("unsubscribe/problem.html", exc.status_code, status=exc.status_code,
                     message=exc.message)
    if exc.status_code == 429:
        response.headers["Retry-After"] = str(WINDOW_SECONDS)
    return response
