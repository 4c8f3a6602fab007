"""Which sending identities cannot reach an address whose local part is outside ASCII (it
needs SMTPUTF8, RFC 6531): the warning sign-up, import and the API give when such an address
arrives.

An SMTP identity reaches it when its server offered SMTPUTF8 at its last connection check
(`record`, written by the doctor's checks, kept in Redis per transport URL under a keyed
fingerprint: the URL holds secrets); never checked is said as "not checked yet". A provider
identity reaches it when its documentation says it takes SMTPUTF8
(broadside.delivery.providers.addressing). The outbox (no transport) writes files: it reaches
everyone.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

from redis import Redis
from redis.exceptions import RedisError

from broadside.core.addresses import needs_smtputf8
from broadside.core.transport_urls import SMTP_SCHEMES, scheme_of
from broadside.delivery.identities.service import SendingIdentity
from broadside.delivery.providers.addressing import takes_smtputf8
from broadside.delivery.transports import PROVIDER_NAMES

KEY = "smtputf8"


def fingerprint(secret_key: str, url: str) -> str:
    """A transport URL's keyed fingerprint (the URL itself is a secret)."""
    return hmac.new(secret_key.encode(), url.encode(), hashlib.sha256).hexdigest()[:24]


def _key(namespace: str, secret_key: str, url: str) -> str:
    return f"{namespace}:{KEY}:{fingerprint(secret_key, url)}"


def record(redis: Redis, namespace: str, secret_key: str, url: str, offered: bool) -> None:
    """What an SMTP server's EHLO said of SMTPUTF8 at a connection check."""
    redis.set(_key(namespace, secret_key, url), "1" if offered else "0")


def _why_not(redis: Redis, namespace: str, secret_key: str,
             identity: SendingIdentity) -> str | None:
    url = identity.transport_url
    if not url:
        return None  # the outbox: files, no server
    scheme = scheme_of(url)
    if scheme in SMTP_SCHEMES:
        try:
            said = redis.get(_key(namespace, secret_key, url))
        except RedisError:
            said = None
        if said is None:
            return "not checked yet"
        return None if said in (b"1", "1") else "its server did not offer SMTPUTF8 at its last check"
    if takes_smtputf8(scheme):
        return None
    return f"{PROVIDER_NAMES.get(scheme, scheme)} does not take it"


def unreachable_by(redis: Redis, namespace: str, secret_key: str, address: str,
                   identities: Sequence[SendingIdentity]) -> list[str]:
    """Each identity that cannot (or may not) reach `address`, named with why; [] when the
    address needs no SMTPUTF8 or every identity reaches it."""
    if not needs_smtputf8(address):
        return []
    return without_smtputf8(redis, namespace, secret_key, identities)


def without_smtputf8(redis: Redis, namespace: str, secret_key: str,
                     identities: Sequence[SendingIdentity]) -> list[str]:
    """Each identity that cannot (or may not) reach an address that needs SMTPUTF8."""
    found = []
    for identity in identities:
        why = _why_not(redis, namespace, secret_key, identity)
        if why is not None:
            found.append(f"{identity.name} ({why})")
    return found


def warning(address: str, unreachable: Sequence[str]) -> str:
    """The owner's words for an address some identities cannot reach."""
    return (f"{address} has characters outside ASCII before the @, so it needs SMTPUTF8; "
            f"these sending identities cannot reach it: {'; '.join(unreachable)}.")
