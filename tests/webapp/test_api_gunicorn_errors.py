"""What gunicorn answers itself, before the app sees a request, is in the API's error shape:
an over-long request line is a 414 and over-large headers a 431, each `{"error": ...}` as
JSON (it was gunicorn's HTML page). Through the Procfile's web process, as deployed."""

from __future__ import annotations

import json
import socket

import pytest

from tests.procfile import serving, web_env


def exchange(port: int, request: bytes) -> tuple[str, dict[str, str], bytes]:
    """(status line, headers, body) of the answer to `request`, read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, _, value in (line.partition(": ") for line in lines)}
    return status, headers, body


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)  # gunicorn's, not the database's
def test_gunicorn_refusals_are_json_errors(app_config, tmp_path):
    with serving(web_env(app_config), tmp_path / "gunicorn.log") as port:
        long_line = b"GET /api/subscribers?q=" + b"a" * 5000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        status, headers, body = exchange(port, long_line)
        assert status == "HTTP/1.1 414 URI Too Long"
        assert headers["content-type"] == "application/json"
        assert json.loads(body) == {"error": "The request line is longer than this server "
                                             "accepts (4094 bytes): shorten the address."}

        big_header = (b"GET /api/whoami HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"b" * 9000
                      + b"\r\n\r\n")
        status, headers, body = exchange(port, big_header)
        assert status == "HTTP/1.1 431 Request Header Fields Too Large"
        assert headers["content-type"] == "application/json"
        assert set(json.loads(body)) == {"error"}

        # A request within the limits is the app's, as before (401: no token).
        status, headers, body = exchange(
            port, b"GET /api/whoami HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert status.startswith("HTTP/1.1 401") and set(json.loads(body)) == {"error"}
