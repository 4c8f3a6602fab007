"""Bounce mailbox URLs: validated with a message an owner can act on, and shown without the
password.

    imaps://USER:PASSWORD@HOST:993/INBOX     IMAP over TLS (port 993 when none is given)
    imap://USER:PASSWORD@HOST:143/INBOX      IMAP upgraded with STARTTLS (port 143)
    imap://USER:PASSWORD@127.0.0.1:N/INBOX?tls=none   no TLS: loopback only (tests)

The folder is the path (INBOX when none); a USER that is an address is written with its @
as %40 (`bounces%40example.com`). The password is a secret like a transport URL's: never
rendered, logged or returned (`describe` masks it, `secrets_in_url` lists it for the log
redaction). `verp_parts` says what the VERP Return-Path of an identity using this mailbox
looks like (broadside.mail.verp).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from broadside.core.i18n import _

SCHEMES = ("imaps", "imap")
MAX_URL = 2000
MASK = "•••"
EXAMPLE = "imaps://bounces%40example.com:password@imap.example.com:993/INBOX"
_FOLDER = re.compile(r"^[A-Za-z0-9 ._/&+-]{1,200}$")
_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_DOMAIN = re.compile(rf"^(?=.{{1,253}}$)({_LABEL}\.)*{_LABEL}$", re.I)
_LOCAL = re.compile(r"^[A-Za-z0-9._-]{1,40}$")


class MailboxUrlError(ValueError):
    """The URL cannot be used; the message says why and what a right one looks like."""


@dataclass(frozen=True)
class Mailbox:
    """A checked mailbox URL, in parts."""

    tls: str  # "tls" (imaps), "starttls" (imap) or "none" (imap ?tls=none, loopback only)
    host: str
    port: int
    user: str
    password: str
    folder: str

    @property
    def key(self) -> str:
        """The mailbox's name for its lease and its rows: the same server, login and folder are
        one mailbox, whichever identities name it (no secret in it)."""
        who = f"{self.host.lower()}:{self.port}/{self.user.lower()}/{self.folder}"
        return hashlib.sha256(who.encode()).hexdigest()[:20]


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse(value: str) -> Mailbox:
    """The URL's parts, or MailboxUrlError naming the problem."""
    url = (value or "").strip()
    if len(url) > MAX_URL:
        raise MailboxUrlError(_("The mailbox URL is longer than %(max_url)s characters.",
                                max_url=MAX_URL))
    if any(ch.isspace() for ch in url):
        raise MailboxUrlError(_("The mailbox URL must not contain spaces or line breaks."))
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise MailboxUrlError(_("A bounce mailbox is an imaps:// or imap:// URL, like %(example)s.",
                                example=EXAMPLE))
    try:
        port = parts.port
    except ValueError:
        raise MailboxUrlError(_("The port in the mailbox URL is not a number from 1 to 65535.")) from None
    host = parts.hostname or ""
    if not host or not (_DOMAIN.match(host) or _is_ip(host)):
        raise MailboxUrlError(_("The mailbox URL needs the IMAP server's name, like %(example)s.",
                                example=EXAMPLE))
    user = unquote(parts.username or "")
    password = unquote(parts.password or "")
    if not user or not password:
        raise MailboxUrlError(_("The mailbox URL needs the login and its password before the @ (an @ in "
                                "the login written %%40), like %(example)s.", example=EXAMPLE))
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"tls"})
    if unknown:
        raise MailboxUrlError(_("Unknown option %(value)s: a mailbox URL takes only ?tls=none.",
                                value=repr(unknown[0])))
    tls = "tls" if scheme == "imaps" else "starttls"
    if "tls" in query:
        if query["tls"][-1] != "none" or scheme != "imap":
            raise MailboxUrlError(_("?tls=none is the one option, and only on imap://."))
        if not _loopback(host):
            raise MailboxUrlError(_("?tls=none (the password in clear) is allowed only for a server on "
                                    "this machine (127.0.0.1); use imaps:// for any other."))
        tls = "none"
    folder = unquote(parts.path.lstrip("/")) or "INBOX"
    if not _FOLDER.match(folder):
        raise MailboxUrlError(_("The folder after the / may hold letters, digits, spaces and . _ / & + - "
                                "(INBOX when none)."))
    if parts.fragment:
        raise MailboxUrlError(_("The mailbox URL takes no #fragment."))
    return Mailbox(tls, host, port or (993 if scheme == "imaps" else 143), user, password, folder)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def check_mailbox_url(value: str) -> str:
    """The URL, stripped (empty: no mailbox), or MailboxUrlError naming the problem."""
    url = (value or "").strip()
    if url:
        parse(url)
    return url


def describe(url: str) -> str:
    """The URL with its password masked and the login by its first 4 characters."""
    if not url:
        return ""
    parts = urlsplit(url)
    user = unquote(parts.username or "")
    shown = user[:4] + "…" if len(user) > 8 else MASK
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme.lower(), f"{shown}:{MASK}@{host}", parts.path, parts.query, ""))


def secrets_in_url(url: str) -> set[str]:
    """The password, as written and decoded, for the log redaction."""
    try:
        password = urlsplit(url).password or ""
    except ValueError:
        return set()
    return {form for form in (password, unquote(password)) if form}


def check_verp_domain(value: str) -> str:
    """A domain for the VERP Return-Path (lowercased; empty: the mailbox's), or MailboxUrlError."""
    domain = (value or "").strip().lower().rstrip(".")
    if domain and (not _DOMAIN.match(domain) or "." not in domain):
        raise MailboxUrlError(_("%(value)s is not a domain name, like bounces.example.com.",
                                value=repr(value.strip()[:80])))
    return domain


def verp_parts(url: str, verp_domain: str = "") -> tuple[str, str] | None:
    """(local part, domain) of the VERP Return-Path of an identity with this mailbox, or
    None when it has none: the login's local part when the login is an address (else
    `bounces`); the VERP domain when set, else the login's domain, else the IMAP host."""
    if not url:
        return None
    box = parse(url)
    local, at, domain = box.user.rpartition("@")
    if not at or not _LOCAL.match(local):
        local, domain = "bounces", "" if not at else domain
    return local, (verp_domain or domain or box.host).lower()
