"""A real HTTP server on loopback serving an RSS feed the test changes as it goes: it answers
with an ETag (the SHA-256 of the XML) and Last-Modified, honours If-None-Match with 304, and
can be told to fail (a status, an HTML page, a body over the size cap). It records each
request's conditional headers, so a test sees the 304s it caused."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Post:
    guid: str
    title: str
    body: str = "<p>Some text.</p>"
    published: str = "Mon, 01 Jan 2024 10:00:00 +0000"


@dataclass
class FeedState:
    posts: list[Post] = field(default_factory=list)  # newest first, as feeds list them
    status: int = 200
    raw: bytes | None = None  # served instead of the feed (e.g. an HTML page)
    requests: list[dict[str, str | None]] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)

    def xml(self) -> bytes:
        if self.raw is not None:
            return self.raw
        items = "".join(
            f"<item><guid>{escape(p.guid)}</guid><title>{escape(p.title)}</title>"
            f"<link>https://blog.example.com/{escape(p.guid)}</link>"
            f"<pubDate>{p.published}</pubDate>"
            f"<description>{escape(p.body)}</description></item>" for p in self.posts)
        return ('<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel>'
                f"<title>The blog</title><link>https://blog.example.com/</link>{items}"
                "</channel></rss>").encode()


class FeedServer:
    def __init__(self) -> None:
        self.state = FeedState()
        state = self.state

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                state.requests.append({"If-None-Match": self.headers.get("If-None-Match"),
                                       "If-Modified-Since": self.headers.get("If-Modified-Since")})
                body = state.xml()
                etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
                if state.status != 200:
                    self._answer(state.status, b"<html>oops</html>", "text/html")
                elif self.headers.get("If-None-Match") == etag:
                    self._answer(304, b"", None, etag)
                else:
                    self._answer(200, body, "application/rss+xml", etag)

            def _answer(self, status: int, body: bytes, kind: str | None,
                        etag: str | None = None) -> None:
                state.answered.append(status)
                self.send_response(status)
                if kind:
                    self.send_header("Content-Type", kind)
                if etag:
                    self.send_header("ETag", etag)
                    self.send_header("Last-Modified", "Mon, 01 Jan 2024 10:00:00 GMT")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if status != 304:
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/feed.xml"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FeedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
