"""Behind reverse proxies: which X-Forwarded-For/-Proto/-Host to believe, and the client's address.

Two settings, which combine (each one a restriction):

- `TRUSTED_PROXIES` (addresses and networks): the headers are believed only when the peer that
  connected is listed; from any other peer they are ignored (the peer is the client). The
  client is then the right-most X-Forwarded-For address that is not listed: a chain of listed
  proxies is walked through, one hop per listed address, and an address a client wrote itself
  (left of what the first proxy appended) is never reached unless every hop is listed.
- `TRUSTED_PROXY_COUNT` alone: every peer is believed, for exactly that many hops (werkzeug's
  ProxyFix rule: the n-th value from the right of each header, when there are n). With
  `TRUSTED_PROXIES` too, it caps the hops walked through.

X-Forwarded-Proto and -Host are taken from the same hop as the address (the n-th value from
the right when the header holds n values; otherwise they are not believed). The address
replaces REMOTE_ADDR before Flask sees the request, so everything that reads
`request.remote_addr` (per-client throttles, the audit trail, a session's network, /metrics'
loopback check, the analytics' reader filter) reads the client's. An entry that is not an IP
address leaves the peer as the client. `FORWARDED_BY` in the environ holds the peer whose
headers were believed (what /metrics asks: a loopback peer forwarding for someone else that
nobody trusted is not local).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask

from broadside.core.proxy_networks import Network, address_of, is_listed, parse_networks

FORWARDED_BY = "broadside.forwarded_by"


def _values(header: str | None) -> list[str]:
    return [value.strip() for value in (header or "").split(",") if value.strip()]


def _nth_from_right(values: list[str], hops: int) -> str | None:
    return values[-hops] if hops and len(values) >= hops else None


class ProxyHeaders:
    """The WSGI middleware: rewrites REMOTE_ADDR, wsgi.url_scheme and HTTP_HOST of a request
    that came through proxies it trusts; leaves every other request as it came."""

    def __init__(self, wsgi_app: Callable[..., Iterable[bytes]], networks: tuple[Network, ...],
                 count: int) -> None:
        self.wsgi_app = wsgi_app
        self.networks = networks
        self.count = count

    def hops(self, peer: str | None, forwarded_for: list[str]) -> int:
        """How many proxies' word is taken for this request: 0 when none."""
        if not self.networks:
            return self.count
        if not is_listed(address_of(peer), self.networks):
            return 0
        hops = 1
        while (hops < len(forwarded_for) and (not self.count or hops < self.count)
               and is_listed(address_of(forwarded_for[-hops]), self.networks)):
            hops += 1
        return hops

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        peer = environ.get("REMOTE_ADDR")
        forwarded_for = _values(environ.get("HTTP_X_FORWARDED_FOR"))
        hops = self.hops(peer, forwarded_for)
        if hops:
            environ[FORWARDED_BY] = peer
            client = address_of(_nth_from_right(forwarded_for, hops))
            if client is not None:
                environ["REMOTE_ADDR"] = str(client)
            proto = _nth_from_right(_values(environ.get("HTTP_X_FORWARDED_PROTO")), hops)
            if proto in ("http", "https"):
                environ["wsgi.url_scheme"] = proto
            host = _nth_from_right(_values(environ.get("HTTP_X_FORWARDED_HOST")), hops)
            if host:
                environ["HTTP_HOST"] = environ["SERVER_NAME"] = host
                if ":" in host and not host.endswith("]"):  # "]": IPv6 without a port
                    environ["SERVER_NAME"], environ["SERVER_PORT"] = host.rsplit(":", 1)
        return self.wsgi_app(environ, start_response)


def install_proxy_headers(app: Flask) -> None:
    """Wrap the app when TRUSTED_PROXIES or TRUSTED_PROXY_COUNT is set (validated at start)."""
    networks = parse_networks(app.config.get("TRUSTED_PROXIES") or "")
    count = int(app.config.get("TRUSTED_PROXY_COUNT") or 0)
    if networks or count:
        app.wsgi_app = ProxyHeaders(app.wsgi_app, networks, count)  # type: ignore[method-assign]


def forwarded_by(environ: dict[str, Any]) -> str | None:
    """The peer whose forwarding headers this request was taken on; None when nobody's were."""
    return environ.get(FORWARDED_BY)
