"""Transport URLs: validated with a message an owner can act on, and shown without secrets.

    smtp://USER:PASSWORD@HOST:PORT, smtp+starttls://…, smtps://…   SMTP, as SMTP_URL always was
    ses://ACCESS_KEY_ID:SECRET@REGION                             Amazon SES v2 (raw MIME)
    postmark://SERVER_TOKEN@                                      Postmark (/email/batch)
    resend://API_KEY@                                             Resend (/emails/batch)
    mailgun://API_KEY@DOMAIN                                      Mailgun (messages.mime)
    outbox://  (or empty)                                         .eml files under instance/outbox

Each provider URL takes `?endpoint=URL` (another base URL: an EU endpoint, an API-compatible
relay, a test server on loopback); Postmark also takes `?stream=NAME` (its message stream).
An endpoint must be a public address (`check_endpoint`, when an identity is saved; the
transports check again before each connection) unless `PROVIDER_ENDPOINTS_ALLOW_PRIVATE=1`;
link-local and cloud metadata addresses are refused even then.

`describe` shows a URL without its secrets: passwords and keys masked, a user name (Postmark's
SMTP login is its server token) shown by its first 4 characters, and an endpoint's own
`user:password@` and key- or token-like query values masked. `secrets_in_url` lists them all,
for the log redaction and for cleaning a library's error text.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, parse_qsl, unquote, urlsplit, urlunsplit

from broadside.core.i18n import _
from broadside.core.public_addresses import Unresolvable, first_refusal, refusal_words, resolve_host

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


ENDPOINT_FLAG = "PROVIDER_ENDPOINTS_ALLOW_PRIVATE"
# Query parameters of an endpoint whose value is a credential, by name...
_SECRET_NAME = re.compile(r"key|token|secret|pass|pwd|auth|sig|credential|session|code", re.I)
# ... or by looks: a long run of letters and digits (both), like an API key.
_TOKEN_LIKE = re.compile(r"^(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9_.~+/=-]{16,}$")
MASK = "•••"


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
        raise TransportUrlError(_("The transport URL is longer than %(max_url)s characters.",
                                  max_url=MAX_URL))
    if any(ch.isspace() for ch in url):
        raise TransportUrlError(_("The transport URL must not contain spaces or line breaks."))
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        known = ", ".join(s + "://" for s in SCHEMES)
        shown = scheme + "://" if scheme else url
        raise TransportUrlError(_("Unknown transport %(shown)s: use one of %(known)s.",
                                  shown=repr(shown), known=known))
    try:
        port = parts.port
    except ValueError:
        raise TransportUrlError(_("The port in the transport URL is not a number.")) from None
    if scheme in SMTP_SCHEMES:
        if not parts.hostname:
            raise TransportUrlError(_("An SMTP URL needs a host, like %(value)s.",
                                      value=EXAMPLES['smtp']))
        if parts.query:
            raise TransportUrlError(_("An SMTP URL takes no ?options."))
        return url
    if scheme == "outbox":
        raise TransportUrlError(_("The outbox URL is just outbox:// (or leave it empty)."))
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
                _("?endpoint= must be an http:// or https:// base URL, got %(endpoint)s.",
                  endpoint=repr(endpoint)))
    user = unquote(parts.username) if parts.username else ""
    secret = unquote(parts.password) if parts.password else ""
    host = parts.hostname or ""
    example = EXAMPLES[scheme]
    if scheme == "ses":
        if not user or not secret:
            raise TransportUrlError(_("An SES URL needs an access key id and its secret, like %(example)s.",
                                      example=example))
        if not _REGION.match(host):
            raise TransportUrlError(
                _("%(value)s is not an AWS region; an SES URL looks like %(example)s.",
                  value=repr(host or '(none)'), example=example))
    elif scheme in ("postmark", "resend"):
        if not user:
            what = "server token" if scheme == "postmark" else "API key"
            raise TransportUrlError(_("A %(scheme)s URL needs its %(what)s before the @, like %(example)s.",
                                      scheme=scheme, what=what, example=example))
        if host or port or secret:
            raise TransportUrlError(_("A %(scheme)s URL has only its key before the @, like %(example)s.",
                                      scheme=scheme, example=example))
    elif scheme == "mailgun":
        if not user:
            raise TransportUrlError(_("A Mailgun URL needs its API key before the @, like %(example)s.",
                                      example=example))
        if not _DOMAIN.match(host):
            raise TransportUrlError(
                _("A Mailgun URL names its sending domain after the @, like %(example)s.",
                  example=example))
    return url


def endpoint_of(url: str) -> str | None:
    """The provider URL's `?endpoint=` (None for the provider's own API, or an SMTP URL)."""
    if scheme_of(url) not in PROVIDER_SCHEMES:
        return None
    return options(url).get("endpoint") or None


def check_endpoint(url: str, *, allow_private: bool) -> None:
    """A provider URL's `?endpoint=` must resolve only to public addresses (every one of them),
    unless `allow_private`; link-local and metadata addresses never. Resolves the name (DNS):
    call it when an identity is saved, not when the configuration is read."""
    endpoint = endpoint_of(url)
    if endpoint is None:
        return
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = resolve_host(host, port)
    except (Unresolvable, ValueError):
        raise TransportUrlError(_("The ?endpoint= host %(host)s does not resolve: no address could be "
                                  "found for that name. Check its spelling.", host=host)) from None
    found = first_refusal(addresses, allow_private=allow_private)
    if found:
        raise TransportUrlError("The ?endpoint= host " + refusal_words(host, found, ENDPOINT_FLAG))


def _masked(value: str) -> str:
    """A user name or key by its first 4 characters (when it has more than 8), else a mask."""
    return value[:4] + "…" if len(value) > 8 else MASK


def _is_secret_param(name: str, value: str) -> bool:
    return bool(_SECRET_NAME.search(name) or _TOKEN_LIKE.match(value))


def endpoint_shown(endpoint: str) -> str:
    """An endpoint URL as it may be shown: its own user name by 4 characters, its password and
    key- or token-like query values masked."""
    parts = urlsplit(endpoint)
    netloc = parts.netloc.rpartition("@")[2]
    if parts.username is not None:
        password = f":{MASK}" if parts.password is not None else ""
        netloc = f"{_masked(unquote(parts.username))}{password}@{netloc}"
    query = "&".join(f"{name}={MASK if _is_secret_param(name, value) else value}"
                     for name, value in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _shown_option(name: str, value: str) -> str:
    if name != "endpoint":
        return value
    # Its own query stays inside it: & and # escaped as they must be written.
    return endpoint_shown(value).replace("&", "%26").replace("#", "%23")


def describe(url: str) -> str:
    """The URL with every secret masked: safe for pages, logs and the API. A user name (SMTP's
    too: Postmark's SMTP login is its server token) shows its first 4 characters at most."""
    if not url:
        return "outbox://"
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = ""
    if parts.username:
        shown = _masked(unquote(parts.username))
        user = f"{shown}:{MASK}@" if parts.password or scheme in SMTP_SCHEMES else f"{shown}@"
    query = "&".join(f"{name}={_shown_option(name, value)}"
                     for name, value in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((scheme, user + host, parts.path, query, ""))


def secrets_in_url(url: str) -> set[str]:
    """Every secret a transport URL holds, as written and decoded: its password, its user name
    (a provider's key, or an SMTP login that looks like a token), and its endpoint's user name,
    password and credential-like query values."""
    found: set[str] = set()
    try:
        parts = urlsplit(url)
        found.add(parts.password or "")
        user = parts.username or ""
        # An SMTP login is a secret when it looks like one (Postmark's is its server token);
        # a plain one ("mailer", an address) would blank every log line that names it.
        if parts.scheme.lower() not in SMTP_SCHEMES or _TOKEN_LIKE.match(unquote(user)):
            found.add(user)
        endpoint = options(url).get("endpoint") if parts.query else None
        if endpoint:
            inner = urlsplit(endpoint)
            found.update(v for v in (inner.username, inner.password) if v)
            found.update(value for name, value in parse_qsl(inner.query)
                         if value and _is_secret_param(name, value))
    except ValueError:
        return set()
    return {form for value in found if value for form in (value, unquote(value))}


def account_of(url: str) -> tuple[str, ...] | None:
    """The provider account a transport URL sends through, as the provider counts its limit
    (None: the outbox, which has none). SMTP: the host and user name (any port or TLS form);
    SES: the access key id and region; Postmark: the server token; Resend and Mailgun: the
    API key (a Mailgun key is its account's, whatever the sending domain). Holds secrets:
    compare it, key it through an HMAC (broadside.delivery.account_limit), never show it."""
    scheme = scheme_of(url)
    if scheme == "outbox" or not url or url == "outbox://":
        return None
    parts = urlsplit(url)
    user = unquote(parts.username or "")
    host = (parts.hostname or "").lower()
    if scheme in SMTP_SCHEMES:
        return ("smtp", host, user)
    if scheme == "ses":
        return ("ses", user, host)
    return (scheme, user)


def account_label(url: str) -> str:
    """The account of `account_of`, as it may be shown: its user name or key by 4 characters."""
    account = account_of(url)
    if account is None:
        return _("the outbox (no provider)")
    kind = account[0]
    if kind == "smtp":
        if account[2]:
            return _("SMTP %(host)s as %(user)s", host=account[1], user=_masked(account[2]))
        return f"SMTP {account[1]}"
    if kind == "ses":
        return _("Amazon SES %(key)s in %(region)s", key=_masked(account[1]), region=account[2])
    return _("%(provider)s key %(key)s", provider=kind.capitalize(), key=_masked(account[1]))
