"""What the DNS checks read of a sending identity (`DnsSubject`), and where its result is kept.

The identity's columns for bounces and DKIM (`verp_domain`, `bounce_mailbox_url`,
`dkim_selector`, `dkim_private_key`) are read here and nowhere else in the checks; the default
identity (the environment) has none of them. The VERP domain is `verp_domain`, else the bounce
mailbox host's domain (its host without the first label: imap.example.com -> example.com).

A result is kept in Redis for `FRESH_S` (a resolver that did not answer: `RETRY_S`), so a page
view does not ask DNS ten times; it is kept under a keyed fingerprint of what it was asked
about (the key and the mailbox URL are secrets: neither they nor a plain hash of them is
stored), and a result for another From, transport, selector, key or resolver is not shown.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import astuple, dataclass
from urllib.parse import urlsplit

from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from broadside.core.models import Identity
from broadside.core.transport_urls import scheme_of
from broadside.delivery.dns_checks.checks import DnsSubject, run
from broadside.delivery.dns_checks.records import STATES, DnsCheck
from broadside.delivery.identities.service import SendingIdentity

FRESH_S = 600
RETRY_S = 60
KEY = "dns_check"


def _domain(text: str) -> str:
    host = text.strip().rstrip(".").lower()
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def _host(url: str) -> str:
    try:
        return _domain(urlsplit(url).hostname or "")
    except ValueError:
        return ""


def subject_of(session: Session, identity: SendingIdentity) -> DnsSubject:
    row = session.get(Identity, identity.id) if identity.id is not None else None
    url = identity.transport_url
    scheme = scheme_of(url)
    mailbox_host = _host(row.bounce_mailbox_url) if row is not None and row.bounce_mailbox_url else ""
    verp = _domain(row.verp_domain) if row is not None and row.verp_domain else ""
    if not verp and mailbox_host.count(".") >= 2:
        verp = mailbox_host.split(".", 1)[1]
    return DnsSubject(
        from_domain=_domain(identity.from_email.rpartition("@")[2]),
        scheme=scheme,
        smtp_host=_host(url) if scheme.startswith("smtp") else "",
        url_domain=_host(url) if scheme == "mailgun" else "",
        verp_domain=verp,
        mailbox_host=mailbox_host,
        dkim_selector=(row.dkim_selector or "").strip().lower() if row is not None else "",
        dkim_private_key=row.dkim_private_key or "" if row is not None else "",
    )


@dataclass(frozen=True)
class DnsResult:
    at: float  # epoch seconds
    checks: list[DnsCheck]

    @property
    def all_ok(self) -> bool:
        return all(c.state == "ok" for c in self.checks)


def _fingerprint(secret: str, subject: DnsSubject, resolver: str) -> str:
    text = json.dumps([*astuple(subject), resolver])
    return hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()[:24]


def key(namespace: str, identity: SendingIdentity) -> str:
    return f"{namespace}:{KEY}:{identity.key}"


def kept(redis: Redis, namespace: str, secret: str, identity: SendingIdentity,
         subject: DnsSubject, resolver: str) -> DnsResult | None:
    """The result kept for this identity, if it was asked about what it is now."""
    try:
        raw = redis.get(key(namespace, identity))
    except RedisError:
        return None
    if not raw:
        return None
    try:
        data = json.loads(raw)
        if not hmac.compare_digest(str(data["fingerprint"]), _fingerprint(secret, subject, resolver)):
            return None
        checks = [DnsCheck(**{k: str(c[k]) for k in ("kind", "name", "state", "sentence", "record")})
                  for c in data["checks"]]
        if any(c.state not in STATES for c in checks):
            return None
        return DnsResult(float(data["at"]), checks)
    except (ValueError, KeyError, TypeError):
        return None


def check(redis: Redis, namespace: str, secret: str, identity: SendingIdentity,
          subject: DnsSubject, resolver: str, *, again: bool = False) -> DnsResult:
    """The kept result, or (none kept, or `again`) a new one, asked now and kept."""
    if not again:
        found = kept(redis, namespace, secret, identity, subject, resolver)
        if found is not None:
            return found
    result = DnsResult(time.time(), run(subject, resolver))
    ttl = RETRY_S if any(c.state == "could_not_ask" for c in result.checks) else FRESH_S
    try:
        redis.set(key(namespace, identity), json.dumps({
            "at": result.at, "fingerprint": _fingerprint(secret, subject, resolver),
            "checks": [c.as_dict() for c in result.checks]}), ex=ttl)
    except RedisError:
        pass  # the result is shown all the same; the System page says Redis is down
    return result
