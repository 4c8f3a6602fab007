"""A deadline for a whole exchange over one socket: `Watchdog` shuts the socket down when the
deadline comes, whatever the exchange is waiting for. A socket timeout bounds each wait, not
their sum, so a peer dripping a byte at a time would otherwise hold an exchange for as long as
it likes. Used by the outgoing webhooks' POST and the feeds' GET."""

from __future__ import annotations

import socket
import threading


class Watchdog:
    """Started at once; `watch` the socket once it exists, `end` when the exchange is over."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self._ended = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            if self.fired:
                shut(sock)

    def _fire(self) -> None:
        with self._lock:
            if self._ended:
                return
            self.fired = True
            if self._sock is not None:
                shut(self._sock)

    def end(self) -> bool:
        """Stand down; returns whether it had fired (then what was read may be cut short
        without an error: http.client takes an end of stream for the end of the headers)."""
        self._timer.cancel()
        with self._lock:
            self._ended = True
            return self.fired


def shut(sock: socket.socket) -> None:
    """The plain socket's shutdown, on the descriptor: a TLS socket's own would drop its TLS
    state under the thread reading it. The blocked read then ends at once."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # not connected yet, or already closed
