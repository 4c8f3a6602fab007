"""A Host header no URL can be built for is answered 400 before Flask sees the request.

Werkzeug binds the URL map to the request's host, IDNA-encoded; a label over 63 characters,
an empty one (`a..b`) or a character IDNA refuses makes that fail (BadHost). Flask then has
no URL adapter, and the error page, whose layout builds URLs, failed again: a 500 with two
tracebacks in the log for one header a stranger chose. This middleware runs the same encoding
first (inside webapp/proxies.py's rewrite, so a trusted proxy's X-Forwarded-Host is what it
judges) and answers a short plain-text 400, with one line in the log and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask
from werkzeug.wsgi import get_host

log = logging.getLogger("webapp")

BAD_HOST = (b"Bad Host header: a host name is made of dot-separated parts of 1 to 63 "
            b"characters each, in letters a name can hold.\n")


def host_is_usable(environ: dict[str, Any]) -> bool:
    """True when werkzeug can bind URLs to this request's host (what Map.bind does)."""
    name = get_host(environ).lower().partition(":")[0]
    try:
        name.encode("idna")
    except UnicodeError:
        return False
    return True


class HostCheck:
    def __init__(self, wsgi_app: Callable[..., Iterable[bytes]]) -> None:
        self.wsgi_app = wsgi_app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterable[bytes]:
        if host_is_usable(environ):
            return self.wsgi_app(environ, start_response)
        log.warning("refused %s %s: bad Host header %s", environ.get("REQUEST_METHOD"),
                    environ.get("PATH_INFO", "")[:200],
                    ascii(environ.get("HTTP_HOST", ""))[:300])
        start_response("400 Bad Request", [("Content-Type", "text/plain; charset=utf-8"),
                                           ("Content-Length", str(len(BAD_HOST))),
                                           ("Cache-Control", "no-store")])
        return [BAD_HOST]


def install_host_check(app: Flask) -> None:
    app.wsgi_app = HostCheck(app.wsgi_app)  # type: ignore[method-assign]
