"""A webhook receiver on loopback for the outgoing webhook tests: a stdlib
`ThreadingHTTPServer` on 127.0.0.1 that records every request (headers lower-cased, the raw
body) and answers 200, or the statuses queued with `fail(n, status)`.

    with Receiver() as receiver:       # Receiver(tls=context, host="localhost"): HTTPS
        receiver.fail(1, 500)          # the next request gets a 500
        ... receiver.requests[0].body, .header("broadside-signature"), .json()
        receiver.url                   # http://127.0.0.1:<port>/hook
"""

from __future__ import annotations

import json
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    answered: int

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    def __init__(self, tls: ssl.SSLContext | None = None, host: str = "127.0.0.1") -> None:
        self.requests: list[Received] = []
        self._failures: list[int] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver._lock:
                    status = receiver._failures.pop(0) if receiver._failures else 200
                    receiver.requests.append(Received(
                        self.path, {k.lower(): v for k, v in self.headers.items()}, body, status))
                reply = b'{"ok": true}' if status < 300 else b"receiver is unhappy"
                self.send_response(status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self.url = f"{'https' if tls else 'http'}://{host}:{self.port}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def fail(self, times: int, status: int = 500) -> None:
        with self._lock:
            self._failures.extend([status] * times)

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
