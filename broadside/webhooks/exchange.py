"""One HTTP exchange with an outgoing webhook's receiver, bounded in time and in memory:
`post`.

The whole exchange (connect, TLS, the request, the answer's status line, headers and body)
ends within the deadline (`WEBHOOKS_TIMEOUT_SECONDS`, 10 s by default) however slowly the
receiver's bytes come: a socket timeout bounds each wait, not their sum, so a watchdog timer
shuts the socket down at the deadline and the attempt fails as `Overtime`. The request asks
for no compression (`Accept-Encoding: identity`); of the answer's body at most MAX_ANSWER
bytes are read, as they came (http.client never decompresses), and the rest is left unread:
a compressed answer is never expanded, so a small gzip "bomb" costs no memory. The status
line and headers are bounded by http.client (a line of 64 KB, 100 headers).

It connects to the very address `addresses.resolve` checked (never a name resolved again);
TLS verifies the URL's host name, not the address.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from dataclasses import dataclass

from broadside.core.watchdog import Watchdog
from broadside.webhooks.addresses import Target

MAX_ANSWER = 4096  # bytes of the answer's body read; the rest is ignored


class Overtime(TimeoutError):
    """The whole exchange (connect, TLS, request, answer) did not end within the deadline."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes  # at most MAX_ANSWER bytes, as they came
    compressed: bool  # a Content-Encoding other than identity: the body is not text to show


def post(target: Target, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    """One POST to the checked address, all of it (connect, TLS, the request, the answer's
    status, headers and first MAX_ANSWER bytes) within `timeout` seconds however slowly the
    bytes come; raises Overtime past it, OSError or HTTPException when no answer came. The
    answer's body is read raw (never decompressed) and the rest of it is not read at all."""
    deadline = time.monotonic() + timeout
    watchdog = Watchdog(timeout)
    conn: http.client.HTTPConnection | None = None
    try:
        conn = http.client.HTTPConnection(target.host, target.port)
        conn.sock = _connect(target, deadline, watchdog)  # never a name resolved again
        conn.request("POST", target.path, body=body, headers={
            **headers, "Host": _host_header(target), "Accept-Encoding": "identity",
            "Connection": "close"})
        response = conn.getresponse()
        data = response.read(MAX_ANSWER)
        encoding = (response.getheader("Content-Encoding") or "identity").strip().lower()
    except (OSError, http.client.HTTPException) as exc:
        if watchdog.end() or time.monotonic() >= deadline:  # the watchdog, or a wait's timeout
            raise Overtime(f"no whole answer within {timeout:g} s") from exc
        raise
    finally:
        watchdog.end()
        if conn is not None:
            conn.close()
    if watchdog.fired:  # an answer cut at the deadline can look whole (see `end`): it is not
        raise Overtime(f"no whole answer within {timeout:g} s")
    return Answer(response.status, data, encoding != "identity")


def _host_header(target: Target) -> str:
    default_port = 443 if target.scheme == "https" else 80
    host = f"[{target.host}]" if ":" in target.host else target.host
    return host if target.port == default_port else f"{host}:{target.port}"


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the deadline passed")
    return left


def _connect(target: Target, deadline: float, watchdog: Watchdog) -> socket.socket:
    """A connection to the first of the checked addresses that answers (never to a name
    resolved again: the address that was checked is the one called), within the deadline.
    TLS verifies the URL's host name, not the address."""
    failure: Exception | None = None
    for address in target.addresses:
        try:
            sock = socket.create_connection((address, target.port), timeout=_remaining(deadline))
        except OSError as exc:
            failure = exc
            continue
        try:
            watchdog.watch(sock)
            if target.scheme == "https":
                sock = ssl.create_default_context().wrap_socket(
                    sock, server_hostname=target.host, do_handshake_on_connect=False)
                watchdog.watch(sock)
                sock.settimeout(_remaining(deadline))
                sock.do_handshake()
            sock.settimeout(_remaining(deadline))  # each later wait too; the watchdog, their sum
            return sock
        except OSError as exc:  # ssl.SSLError included: the next address, as for a refusal
            sock.close()
            if watchdog.fired:
                raise
            failure = exc
        except BaseException:
            sock.close()
            raise
    assert failure is not None  # resolve() never returns no address
    raise failure
