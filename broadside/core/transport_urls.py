"""Transport URLs: validated with a message an owner can act on, and shown without secrets.

    smtp://USER:PASSWORD@HOST:PORT, smtp+starttls://…, smtps://…   SMTP, as SMTP_URL always was
    ses://ACCESS_KEY_ID:SECRET@REGION                             Amazon SES v2 (raw MIME)
    postmark://SERVER_TOKEN@                                      Postmark (/email/batch)
    resend://API_KEY@                                             Resend (/emails/batch)
    mailgun://API_KEY@DOMAIN                                      Mailgun (messages.mime)
    outbox://  (or empty)                                         .eml files under instance/outbox

Each provider URL takes `?endpoint=URL` (another base URL: an EU endpoint, an API-compatible
relay, a test server on loopback); Postmark also takes `?stream=NAME` (its message stream).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

SMTP_SCHEMES = ("smtp", "smtp+starttls", "smtps")
PROVIDER_SCHEMES = ("ses", "postmark", "resend", "mailgun")
SCHEMES = (*SMTP_SCHEMES, *PROVIDER_SCHEMES, "outbox")
MAX_URL = 2000
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$", re.I)
_OPTIONS = {"ses": {"endpoint"}, "postmark": {"endpoint", "stream"}, "resend": {"endpoint"},
            "mailgun": {"endpoint"}}

EXAMPLES = {
    "smtp": "smtp+starttls://user:password@smtp.example.com:587",
    "ses": "ses://ACCESS_KEY_ID:SECRET@eu-west-1",
    "postmark": "postmark://SERVER_TOKEN@",
    "resend": "resend://API_KEY@",
    "mailgun": "mailgun://API_KEY@mg.example.com",
}


class TransportUrlError(ValueError):
    """The URL cannot be used; the message says why and what a right one looks like."""


def scheme_of(url: str) -> str:
    return urlsplit(url).scheme.lower() if url else "outbox"


def options(url: str) -> dict[str, str]:
    """The query options (`endpoint`, `stream`), one value each."""
    return {key: values[-1] for key, values in parse_qs(urlsplit(url).query).items()}


def check_transport_url(value: str) -> str:
    """The URL, stripped, or TransportUrlError naming the problem."""
    url = (value or "").strip()
    if not url or url == "outbox://":
        return url
    if len(url) > MAX_URL:
        raise TransportUrlError(f"The transport URL is longer than {MAX_URL} characters.")
    if any(ch.isspace() for ch in url):
        raise TransportUrlError("The transport URL must not contain spaces or line breaks.")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        known = ", ".join(s + "://" for s in SCHEMES)
        shown = scheme + "://" if scheme else url
        raise TransportUrlError(f"Unknown transport {shown!r}: use one of {known}.")
    try:
        port = parts.port
    except ValueError:
        raise TransportUrlError("The port in the transport URL is not a number.") from None
    if scheme in SMTP_SCHEMES:
        if not parts.hostname:
            raise TransportUrlError(f"An SMTP URL needs a host, like {EXAMPLES['smtp']}.")
        if parts.query:
            raise TransportUrlError("An SMTP URL takes no ?options.")
        return url
    if scheme == "outbox":
        raise TransportUrlError("The outbox URL is just outbox:// (or leave it empty).")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - _OPTIONS[scheme])
    if unknown:
        raise TransportUrlError(
            f"Unknown option {unknown[0]!r} for {scheme}://; it takes "
            + " and ".join(f"?{o}=" for o in sorted(_OPTIONS[scheme])) + "."
        )
    if "endpoint" in query:
        endpoint = query["endpoint"][-1]
        ep = urlsplit(endpoint)
        if ep.scheme not in ("http", "https") or not ep.hostname:
            raise TransportUrlError(
                f"?endpoint= must be an http:// or https:// base URL, got {endpoint!r}.")
    user = unquote(parts.username) if parts.username else ""
    secret = unquote(parts.password) if parts.password else ""
    host = parts.hostname or ""
    example = EXAMPLES[scheme]
    if scheme == "ses":
        if not user or not secret:
            raise TransportUrlError(f"An SES URL needs an access key id and its secret, like {example}.")
        if not _REGION.match(host):
            raise TransportUrlError(
                f"{host or '(none)'!r} is not an AWS region; an SES URL looks like {example}.")
    elif scheme in ("postmark", "resend"):
        if not user:
            what = "server token" if scheme == "postmark" else "API key"
            raise TransportUrlError(f"A {scheme} URL needs its {what} before the @, like {example}.")
        if host or port or secret:
            raise TransportUrlError(f"A {scheme} URL has only its key before the @, like {example}.")
    elif scheme == "mailgun":
        if not user:
            raise TransportUrlError(f"A Mailgun URL needs its API key before the @, like {example}.")
        if not _DOMAIN.match(host):
            raise TransportUrlError(
                f"A Mailgun URL names its sending domain after the @, like {example}.")
    return url


def describe(url: str) -> str:
    """The URL with every secret masked: safe for pages, logs and the API."""
    if not url:
        return "outbox://"
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    if scheme in SMTP_SCHEMES:
        user = f"{unquote(parts.username)}:•••@" if parts.username else ""
    elif parts.username:
        key = unquote(parts.username)
        shown = key[:4] + "…" if len(key) > 8 else "•••"
        user = f"{shown}:•••@" if parts.password else f"{shown}@"
    else:
        user = ""
    return urlunsplit((scheme, user + host, parts.path, parts.query, ""))
