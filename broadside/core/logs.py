"""Logging: one line per meaningful event, plain by default or JSON with LOG_FORMAT=json.

Worker lines carry the RQ job id and the broadcast id, set in `log_context` by the pipeline.
No line may carry a password, an API token, an unsubscribe token or a message body: the code
never logs them, and `RedactFilter` is the safety net on every handler we install (ours, the
Flask app's, werkzeug's and RQ's loggers, and gunicorn's through `webapp.logs.GunicornLogger`).
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

from broadside.core.transport_urls import SCHEMES as TRANSPORT_SCHEMES
from broadside.core.transport_urls import secrets_in_url

_context: contextvars.ContextVar[dict[str, object] | None] = contextvars.ContextVar(
    "broadside_log_context", default=None
)


@contextmanager
def log_context(**fields: object) -> Iterator[None]:
    token = _context.set({**(_context.get() or {}), **fields})
    try:
        yield
    finally:
        _context.reset(token)


class ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        context = _context.get() or {}
        record.job_id = context.get("job_id", "-")
        record.broadcast_id = context.get("broadcast_id", "-")
        return True


# ---------------------------------------------------------------- redaction

REDACTED = "[redacted]"
# Every quantifier is bounded: these run over request data (paths, User-Agent, Referer), and an
# unbounded one that can start at many positions (`[a-z][a-z0-9+.-]*://` over "a.a.a...")
# costs time quadratic in the header's length. With bounds, each start position reads at most
# a few hundred characters, so redaction stays linear.
_PATTERNS = (
    # API tokens (broadside.core.accounts.TOKEN_PREFIX + token_urlsafe(32)).
    (re.compile(r"\bbs_[A-Za-z0-9_-]{16,128}"), "bs_" + REDACTED),
    # Unsubscribe links: /u/<signed token>[/preferences...] (tokens are at most 512 characters)
    (re.compile(r"/u/[A-Za-z0-9_.~%-]{8,600}"), "/u/" + REDACTED),
    # A reader's tracking pixel and links: /t/o/<token>.gif, /t/c/<token> (webapp/analytics;
    # a click token holds its link's address, so it is as long as a request line may be)
    (re.compile(r"/t/([oc])/[A-Za-z0-9_.~%-]{8,8192}"), r"/t/\1/" + REDACTED),
    # Double opt-in links: /join/confirm/<signed token>
    (re.compile(r"/join/confirm/[A-Za-z0-9_.~%-]{8,600}"), "/join/confirm/" + REDACTED),
    # Password reset links: /password/reset/<signed token> (broadside.mail.password_reset)
    (re.compile(r"/password/reset/[A-Za-z0-9_.~%-]{8,600}"), "/password/reset/" + REDACTED),
    # Invitation links: /invitation/<token> (broadside.core.invitations): they join with a role
    (re.compile(r"/invitation/[A-Za-z0-9_.~%-]{8,600}"), "/invitation/" + REDACTED),
    # "View in your browser" links: /view/<signed token> (broadside.campaigns.archive.links)
    (re.compile(r"/view/[A-Za-z0-9_.~%-]{8,600}"), "/view/" + REDACTED),
    # A single-use code in the API's path is spendable: /api/codes/<code>[/redeem]
    (re.compile(r"/api/codes/[A-Za-z0-9_.~%-]{1,200}"), "/api/codes/" + REDACTED),
    # A password inside any URL: scheme://user:password@host
    (re.compile(r"(\b[a-z][a-z0-9+.-]{0,31}://[^\s:/@]{0,256}:)[^\s@/]{1,256}@", re.IGNORECASE),
     r"\1****@"),
    # ... or in its query string: ?password=... (libpq and redis-py both accept one)
    (_QUERY_PASSWORD := re.compile(r"((?:^|[?&])(?:password|passwd|pass|pwd)=)[^&\s#]{1,512}",
                                   re.IGNORECASE), r"\1****"),
    # Authorization headers
    (re.compile(r"\b(Bearer|Basic)\s{1,8}[A-Za-z0-9._~+/=-]{6,4096}", re.IGNORECASE),
     r"\1 " + REDACTED),
)


def mask_query_passwords(text: str) -> str:
    """`password=...` parameters (in a URL or a query string alone) with their value masked."""
    return _QUERY_PASSWORD.sub(r"\1****", text)


SECRET_SETTINGS = ("SECRET_KEY", "METRICS_TOKEN", "WEBHOOK_SECRET")
URL_SETTINGS = ("SMTP_URL", "DATABASE_URL", "REDIS_URL", "BOUNCE_MAILBOX_URL")
MIN_SECRET_LENGTH = 6


def secrets_in(config: Mapping[str, Any]) -> set[str]:
    """The secret values in a configuration (or an environment): keys, tokens, URL passwords."""
    found = {str(config.get(name) or "") for name in SECRET_SETTINGS}
    for name in URL_SETTINGS:
        found.update(url_passwords(str(config.get(name) or "")))
    return {s for s in found if len(s) >= MIN_SECRET_LENGTH}


# Transport URLs whose user part is itself a key (postmark://TOKEN@, resend://KEY@, …).
KEY_IN_USER_SCHEMES = ("ses", "postmark", "resend", "mailgun")


def url_passwords(url: str) -> set[str]:
    """The passwords in a URL, `user:password@` and any `?password=` parameter (and a
    transport URL's user name, a key or a token-like login, and its `?endpoint=`'s
    credentials: `transport_urls.secrets_in_url`), each as written and decoded."""
    try:
        parts = urlsplit(url)
        candidates = [parts.password or ""]
        if parts.scheme.lower() in KEY_IN_USER_SCHEMES:
            candidates.append(parts.username or "")
    except ValueError:
        return set()
    candidates += re.findall(r"(?:^|&)(?:password|passwd|pass|pwd)=([^&#]{1,512})", parts.query, re.I)
    found = {value for candidate in candidates if candidate for value in (candidate, unquote(candidate))}
    return found | secrets_in_url(url) if parts.scheme.lower() in TRANSPORT_SCHEMES else found


class RedactFilter(logging.Filter):
    """Rewrites a record's message (and traceback) with secrets and tokens replaced."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets: list[str] = []
        self.add_secrets(secrets)

    def add_secrets(self, secrets: Iterable[str]) -> None:
        merged = set(self.secrets) | {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}
        self.secrets = sorted(merged, key=len, reverse=True)  # longest first: no partial leaks

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is logging's problem to report
            return True
        clean = self.redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


# ---------------------------------------------------------------- formats


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "job_id": getattr(record, "job_id", "-"),
            "broadcast_id": getattr(record, "broadcast_id", "-"),
        }
        if record.exc_text:
            payload["exc"] = record.exc_text
        elif record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload)


PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s [job=%(job_id)s broadcast=%(broadcast_id)s] %(message)s"
# Loggers whose lines go through our handler: ours, the Flask app's (unhandled errors name the
# request path), werkzeug's (the development server logs every path) and RQ's.
HANDLED_LOGGERS = ("broadside", "webapp", "werkzeug", "rq")


def _handler() -> logging.Handler:
    existing = getattr(logging.getLogger("broadside"), "_broadside_handler", None)
    if existing is not None:
        return existing
    handler = logging.StreamHandler()
    handler.addFilter(ContextFilter())
    handler.addFilter(RedactFilter())
    logging.getLogger("broadside")._broadside_handler = handler  # type: ignore[attr-defined]
    return handler


def redact_filter(handler: logging.Handler) -> RedactFilter:
    return next(f for f in handler.filters if isinstance(f, RedactFilter))


def redact_also(secrets: Iterable[str]) -> None:
    """Add secrets learnt after start-up (an identity's transport keys, read from the
    database by the worker) to what every log line is cleaned of."""
    redact_filter(_handler()).add_secrets(secrets)


def configure_logging(config: Mapping[str, Any]) -> None:
    """One handler (stderr), shared by the loggers above; this configuration's secrets are
    redacted. Flask's own default handler is removed from the app's logger by `create_app`."""
    handler = _handler()
    redact_filter(handler).add_secrets(secrets_in(config))
    if config["LOG_FORMAT"] == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(PLAIN_FORMAT))
    for name in HANDLED_LOGGERS:
        logger = logging.getLogger(name)
        if handler not in logger.handlers:
            logger.addHandler(handler)
    broadside = logging.getLogger("broadside")
    broadside.setLevel(logging.INFO)
    broadside.propagate = True


def owner_action(action: str, *, broadcast_id: int | None = None, **details: object) -> None:
    """One web-side line when the owner acts, e.g. `owner_action("broadcast sent", broadcast_id=3,
    recipients=120)` -> `... [job=- broadcast=3] broadcast sent (recipients=120)`."""
    extra = ", ".join(f"{key}={value}" for key, value in details.items())
    with log_context(broadcast_id=broadcast_id if broadcast_id is not None else "-"):
        logging.getLogger("broadside.web").info("%s%s", action, f" ({extra})" if extra else "")
