"""The Procfile's gunicorn worker: gunicorn's threaded worker, with the errors gunicorn answers
itself (before the app sees the request) in the app's JSON shape, `{"error": "..."}`.

A request line longer than gunicorn's `limit_request_line` (4094 bytes), or headers beyond
its limits, never reach Flask: gunicorn wrote its own HTML page, the one answer of the API
not in the shape its document promises. The line was not read, so its path is unknown: the
answer is JSON for every path (a browser shows it as text). Other parse errors keep
gunicorn's answer. Used by the Procfile: `--worker-class webapp.gunicorn_worker.ThreadWorker`.
"""

from __future__ import annotations

import json

from gunicorn import util
from gunicorn.http.errors import LimitRequestHeaders, LimitRequestLine
from gunicorn.workers import gthread


class ThreadWorker(gthread.ThreadWorker):
    def handle_error(self, req, client, addr, exc) -> None:
        if isinstance(exc, LimitRequestLine):
            status = "414 URI Too Long"
            message = (f"The request line is longer than this server accepts "
                       f"({self.cfg.limit_request_line} bytes): shorten the address.")
        elif isinstance(exc, LimitRequestHeaders):
            status = "431 Request Header Fields Too Large"
            message = "The request's headers are larger than this server accepts."
        else:
            super().handle_error(req, client, addr, exc)
            return
        self.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], exc)
        body = json.dumps({"error": message}).encode()
        head = (f"HTTP/1.1 {status}\r\nConnection: close\r\n"
                "Content-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1")
        try:
            util.write_nonblock(client, head + body)
        except OSError:
            self.log.debug("Failed to send error message.")
