"""Which URLs an outgoing webhook may call: no SSRF into the owner's network.

Only `http://` and `https://` URLs without a user name or password, whose host resolves only to
public addresses (not loopback, private, link-local, shared, reserved, multicast or
unspecified; an IPv4 address written as IPv6 is judged as IPv4) are accepted, unless the owner
sets `WEBHOOKS_ALLOW_PRIVATE=1`. The check runs when an endpoint is saved and again before each
POST (DNS can change in between), and the POST connects to the very address that was checked
(`delivery.py`), so a name that resolves differently a second later cannot slip past it.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from broadside.core.errors import ValidationError

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
        raise ValidationError("Enter the endpoint's URL, starting with https://.", field="url")
    if len(url) > MAX_URL:
        raise ValidationError(f"Keep the URL under {MAX_URL} characters.", field="url")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError("The URL must start with https:// (or http://) and name a host.", field="url")
    if parts.username is not None or parts.password is not None:
        raise ValidationError("Put no user name or password in the URL: the signature "
                              "proves the request comes from Broadside.", field="url")
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ValidationError("The URL's port is not a number from 1 to 65535.", field="url") from None
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ValidationError("The URL may not contain spaces or control characters.", field="url")
    return url


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def resolve(url: str, *, allow_private: bool) -> Target:
    """Check the URL and resolve its host; raises `UnsafeAddress` (a `ValidationError`) with
    the reason in the owner's words. Every address the name resolves to must be public."""
    url = check_url(url)
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, ValueError):  # ValueError: UnicodeError, a name too long
        raise UnsafeAddress(f"The host {host} does not resolve: no address could be found for "
                            "that name. Check the URL's spelling.", field="url") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise UnsafeAddress(f"The host {host} does not resolve.", field="url")
    if not allow_private:
        private = [a for a in addresses if not is_public(a)]
        if private:
            raise UnsafeAddress(
                f"The host {host} resolves to {private[0]}, a private, loopback or link-local "
                "address: Broadside only calls public addresses (set WEBHOOKS_ALLOW_PRIVATE=1 "
                "to allow your own network).", field="url")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(parts.scheme, host, port, path, tuple(addresses))
