"""A feed's bytes, fetched for the owner within bounds: `fetch`.

- **Public addresses only**, as for outgoing webhooks: the URL's host is resolved and every
  address judged (`broadside.core.public_addresses`); a private, loopback or special-purpose
  one is refused unless the owner sets `FEEDS_ALLOW_PRIVATE=1`, link-local and cloud metadata
  always. The connection goes to the very address that was checked (TLS still verifies the
  URL's host name), and each redirect (at most `MAX_REDIRECTS`) is checked the same way.
- **Bounded in time**: the whole exchange, redirects included, ends within `TIMEOUT_S`
  however slowly the bytes come (a watchdog shuts the socket at the deadline; a socket
  timeout alone bounds each wait, not their sum), so a poll never holds its stream for long.
- **Bounded in size**: at most `MAX_BYTES` of the answer are read, and a gzip answer is
  expanded to at most as many bytes (never a "bomb"); past it the feed is "too big".
- **Conditional GET**: the last answer's `ETag` and `Last-Modified` are sent back
  (`If-None-Match`, `If-Modified-Since`); 304 means nothing new.

Every failure is a `FeedProblem` whose message is in the owner's words (what the automation's
page shows); the exception itself goes to the log only.
"""

from __future__ import annotations

import http.client
import logging
import socket
import ssl
import time
import zlib
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from broadside.core.connection_words import connection_words
from broadside.core.public_addresses import Unresolvable, first_refusal, refusal_words, resolve_host
from broadside.core.watchdog import Watchdog

log = logging.getLogger("broadside.feeds")

MAX_BYTES = 5 * 1024 * 1024
TIMEOUT_S = 10.0
MAX_REDIRECTS = 3
FLAG = "FEEDS_ALLOW_PRIVATE"
USER_AGENT = "Broadside feed reader"
ACCEPT = "application/rss+xml, application/atom+xml, application/xml;q=0.9, text/xml;q=0.9, */*;q=0.5"
_REDIRECTS = (301, 302, 303, 307, 308)


class FeedProblem(Exception):
    """A poll that failed; `message` is what the owner reads on the automation's page."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Fetched:
    status: int  # 200, or 304: nothing new since the validators sent
    body: bytes
    etag: str | None
    last_modified: str | None


def fetch(url: str, *, etag: str | None = None, last_modified: str | None = None,
          allow_private: bool = False, timeout: float = TIMEOUT_S,
          max_bytes: int = MAX_BYTES) -> Fetched:
    """GET the feed at `url` (following at most MAX_REDIRECTS redirects), conditionally when
    validators are given; raises FeedProblem in the owner's words."""
    deadline = time.monotonic() + timeout
    watchdog = Watchdog(timeout)
    try:
        for _hop in range(MAX_REDIRECTS + 1):
            status, headers, body = _get(url, etag, last_modified, allow_private, deadline,
                                         watchdog, max_bytes)
            if status in _REDIRECTS and headers.get("location"):
                url = urljoin(url, headers["location"])
                if urlsplit(url).scheme not in ("http", "https"):
                    raise FeedProblem("The feed's server redirected to an address that is not "
                                      "http:// or https://.")
                continue
            if status == 304:
                return Fetched(304, b"", etag, last_modified)
            if not 200 <= status < 300:
                reason = http.client.responses.get(status, "")
                raise FeedProblem(f"The feed's server answered HTTP {status}"
                                  + (f" ({reason})" if reason else "") + " instead of the feed.")
            return Fetched(status, _decoded(body, headers.get("content-encoding", ""), max_bytes),
                           headers.get("etag"), headers.get("last-modified"))
        raise FeedProblem(f"The feed's server redirected more than {MAX_REDIRECTS} times.")
    finally:
        watchdog.end()


def _get(url: str, etag: str | None, last_modified: str | None, allow_private: bool,
         deadline: float, watchdog: Watchdog, max_bytes: int
         ) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    host = parts.hostname or ""
    https = parts.scheme == "https"
    try:
        port = parts.port or (443 if https else 80)
    except ValueError:
        raise FeedProblem("The feed's address has a port that is not a number.") from None
    try:
        addresses = resolve_host(host, port)
    except Unresolvable:
        raise FeedProblem(f"The host {host} does not resolve: no address could be found for "
                          "that name. Check the feed's address.") from None
    found = first_refusal(addresses, allow_private=allow_private)
    if found:
        raise FeedProblem("Not fetched: the host " + refusal_words(host, found, FLAG))
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    default_port = 443 if https else 80
    name = f"[{host}]" if ":" in host else host
    headers = {"Host": name if port == default_port else f"{name}:{port}",
               "User-Agent": USER_AGENT, "Accept": ACCEPT, "Accept-Encoding": "gzip",
               "Connection": "close"}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    conn = http.client.HTTPConnection(host, port)
    try:
        conn.sock = _connect(host, https, port, addresses, deadline, watchdog)
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        answer = {k.lower(): v for k, v in response.getheaders()}
        length = answer.get("content-length", "")
        if length.isdigit() and int(length) > max_bytes:
            raise FeedProblem(_too_big(max_bytes))
        body = response.read(max_bytes + 1)
        if len(body) > max_bytes:
            raise FeedProblem(_too_big(max_bytes))
    except FeedProblem:
        raise
    except (OSError, http.client.HTTPException) as exc:
        if watchdog.fired or time.monotonic() >= deadline:
            raise FeedProblem(_overtime(watchdog)) from None
        raise FeedProblem("Could not fetch the feed: "
                          + connection_words(exc, host, log) + ".") from None
    finally:
        conn.close()
    if watchdog.fired:
        raise FeedProblem(_overtime(watchdog))
    return response.status, answer, body


def _connect(host: str, https: bool, port: int, addresses: tuple[str, ...], deadline: float,
             watchdog: Watchdog) -> socket.socket:
    """A connection to the first checked address that answers, never the name again."""
    failure: Exception | None = None
    for address in addresses:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        try:
            sock = socket.create_connection((address, port), timeout=left)
        except OSError as exc:
            failure = exc
            continue
        try:
            watchdog.watch(sock)
            if https:
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
                watchdog.watch(sock)
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            return sock
        except OSError as exc:
            sock.close()
            failure = exc
    assert failure is not None  # resolve_host never returns no address
    raise failure


def _decoded(body: bytes, encoding: str, max_bytes: int) -> bytes:
    """The body as sent, or gunzipped to at most max_bytes (never further)."""
    if encoding.strip().lower() not in ("gzip", "x-gzip"):
        return body
    inflate = zlib.decompressobj(wbits=47)  # gzip or zlib header
    try:
        data = inflate.decompress(body, max_bytes + 1)
    except zlib.error:
        raise FeedProblem("The feed's server sent a compressed answer that cannot be "
                          "read.") from None
    if len(data) > max_bytes or inflate.unconsumed_tail:
        raise FeedProblem(_too_big(max_bytes))
    return data


def _overtime(watchdog: Watchdog) -> str:
    return f"The feed's server sent no whole answer within {watchdog.seconds:g} seconds."


def _too_big(max_bytes: int) -> str:
    return (f"The feed is larger than {max_bytes // (1024 * 1024)} MB, more than Broadside "
            "reads.")
