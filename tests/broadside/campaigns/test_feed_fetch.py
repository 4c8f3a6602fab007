"""A feed's fetch within its bounds, against a real HTTP server on loopback: public addresses
only unless allowed, a whole-exchange deadline however slowly the bytes drip, a size cap (a
gzip "bomb" never expanded past it), redirects followed and checked, 304 for an unchanged
feed; and the parser's refusal of what is not a feed. Each failure in the owner's words."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from broadside.campaigns.feeds.fetch import FeedProblem, fetch
from broadside.campaigns.feeds.items import item_key, parse_feed
from tests.smtp_server import free_port

RSS = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>T</title>'
       b"<item><guid>a</guid><title>A {{ name }}</title><link>https://x.example/a</link>"
       b"<description>&lt;p onclick=\"x()\"&gt;Hi&lt;script&gt;bad()&lt;/script&gt;&lt;/p&gt;"
       b"</description></item>"
       b"<item><title>No id</title><link>https://x.example/b</link></item>"
       b"<item><title>Neither id nor link</title></item></channel></rss>")


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # http.server's name
        path = self.path
        if path == "/feed":
            if self.headers.get("If-None-Match") == '"v1"':
                self._send(304, b"")
            else:
                self._send(200, RSS, {"ETag": '"v1"'})
        elif path == "/moved":
            self._send(301, b"", {"Location": "/feed"})
        elif path == "/loop":
            self._send(302, b"", {"Location": "/loop"})
        elif path == "/big":
            self._send(200, b"x" * 3000)
        elif path == "/bomb":
            self._send(200, gzip.compress(b"<" * 100_000), {"Content-Encoding": "gzip"})
        elif path == "/gzip":
            self._send(200, gzip.compress(RSS), {"Content-Encoding": "gzip"})
        elif path == "/drip":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            for _ in range(1000):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.05)
        else:
            self._send(404, b"no")

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_loopback_is_refused_unless_allowed(server):
    with pytest.raises(FeedProblem, match="only calls public addresses.*FEEDS_ALLOW_PRIVATE"):
        fetch(server + "/feed")
    assert fetch(server + "/feed", allow_private=True).status == 200


def test_an_unchanged_feed_is_304_with_its_etag_and_a_redirect_is_followed(server):
    first = fetch(server + "/moved", allow_private=True)
    assert first.status == 200 and first.etag == '"v1"' and first.body == RSS
    assert fetch(server + "/feed", etag='"v1"', allow_private=True).status == 304
    with pytest.raises(FeedProblem, match="redirected more than 3 times"):
        fetch(server + "/loop", allow_private=True)


def test_an_answer_over_the_cap_is_too_big_and_a_gzip_bomb_is_never_expanded(server):
    with pytest.raises(FeedProblem, match="larger than"):
        fetch(server + "/big", allow_private=True, max_bytes=1024)
    with pytest.raises(FeedProblem, match="larger than"):
        fetch(server + "/bomb", allow_private=True, max_bytes=10_000)
    assert fetch(server + "/gzip", allow_private=True).body == RSS


def test_a_dripping_server_is_cut_at_the_deadline(server):
    started = time.monotonic()
    with pytest.raises(FeedProblem, match="no whole answer within 1 seconds"):
        fetch(server + "/drip", allow_private=True, timeout=1.0)
    assert time.monotonic() - started < 3


def test_an_http_error_and_a_closed_port_are_said_in_words(server):
    with pytest.raises(FeedProblem, match=r"HTTP 404 \(Not Found\)"):
        fetch(server + "/nothing", allow_private=True)
    with pytest.raises(FeedProblem, match="refused"):  # a port nothing listens on
        fetch(f"http://127.0.0.1:{free_port()}/", allow_private=True)


def test_items_are_keyed_by_id_else_link_and_their_html_sanitised():
    items = parse_feed(RSS)
    assert [i.key for i in items] == [item_key("a"), item_key("https://x.example/b")]
    first = items[0]
    assert first.title == "A {{ name }}" and first.link == "https://x.example/a"
    assert "script" not in first.summary_html and "onclick" not in first.summary_html
    assert "Hi" in first.summary_html
    with pytest.raises(FeedProblem, match="not with an RSS or Atom feed"):
        parse_feed(b"<html><body><p>A web page</p></body></html>")
