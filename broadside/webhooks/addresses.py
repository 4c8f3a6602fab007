"""Which URLs an outgoing webhook may call: no SSRF into the owner's network.

Only `http://` and `https://` URLs without a user name or password, whose host resolves only to
public addresses (`broadside.core.public_addresses`: no range of IANA's special-purpose
registries, an IPv6 address wrapping an IPv4 one judged by the IPv4 inside) are accepted, unless
the owner sets `WEBHOOKS_ALLOW_PRIVATE=1`; link-local and cloud metadata addresses are refused
even then. The check runs when an endpoint is saved and again before each
POST (DNS can change in between), and the POST connects to the very address that was checked
(`delivery.py`), so a name that resolves differently a second later cannot slip past it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from broadside.core.errors import ValidationError
from broadside.core.i18n import _
from broadside.core.public_addresses import Unresolvable, first_refusal, refusal_words, resolve_host
from broadside.core.public_addresses import is_public as is_public

MAX_URL = 2000


class UnsafeAddress(ValidationError):
    """The URL's host resolves to an address Broadside will not call (or not at all)."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # as written (for the Host header and TLS)
    port: int
    path: str  # with the query
    addresses: tuple[str, ...]  # the checked IPs, tried in order (the resolver's)


def check_url(url: str) -> str:
    """The URL's shape (no DNS): http(s), a host, no credentials, a numeric port."""
    url = (url or "").strip()
    if not url:
        raise ValidationError(_("Enter the endpoint's URL, starting with https://."), field="url")
    if len(url) > MAX_URL:
        raise ValidationError(_("Keep the URL under %(max_url)s characters.", max_url=MAX_URL), field="url")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(_("The URL must start with https:// (or http://) and name a host."),
                              field="url")
    if parts.username is not None or parts.password is not None:
        raise ValidationError(_("Put no user name or password in the URL: the signature proves the request "
                                "comes from Broadside."), field="url")
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ValidationError(_("The URL's port is not a number from 1 to 65535."), field="url") from None
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ValidationError(_("The URL may not contain spaces or control characters."), field="url")
    return url


def resolve(url: str, *, allow_private: bool) -> Target:
    """Check the URL and resolve its host; raises `UnsafeAddress` (a `ValidationError`) with
    the reason in the owner's words. Every address the name resolves to must be public."""
    url = check_url(url)
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = resolve_host(host, port)
    except Unresolvable:
        raise UnsafeAddress(f"The host {host} does not resolve: no address could be found for "
                            "that name. Check the URL's spelling.", field="url") from None
    found = first_refusal(addresses, allow_private=allow_private)
    if found:
        raise UnsafeAddress("The host " + refusal_words(host, found, "WEBHOOKS_ALLOW_PRIVATE"),
                            field="url")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(parts.scheme, host, port, path, tuple(addresses))
