"""A provider transport's `?endpoint=` calls only what the owner may call, checked before each
connection (PROVIDER_ENDPOINTS_ALLOW_PRIVATE lets loopback and private addresses through, never
link-local or metadata ones), and a provider's error body reaches the owner only as its message
field, cut short. Real loopback servers (tests/provider_servers.py and a raw one here)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote

import pytest

from broadside.core.transport_urls import check_transport_url
from broadside.delivery.providers.factory import make_transport
from broadside.delivery.providers.http import MAX_ERROR_WORDS
from broadside.delivery.transports import DeliveryError
from tests.broadside.delivery.test_transports import SENDER, SERVERS, message
from tests.provider_servers import ProviderServer
from tests.smtp_server import free_port

SECRET = "INTERNAL-TRACE-c0ffee"  # what a provider's error body may carry beyond its message


@pytest.fixture(params=list(SERVERS))
def server(request) -> Iterator[ProviderServer]:
    with SERVERS[request.param]() as running:
        yield running


def refused(transport) -> DeliveryError:
    with pytest.raises(DeliveryError) as caught:
        transport.send(SENDER, "ann@example.com", message("ann@example.com"))
    return caught.value


def test_an_endpoint_on_loopback_is_refused_at_send_without_the_flag(server):
    transport = make_transport(check_transport_url(server.transport_url()), "", 5)
    error = refused(transport)
    assert (error.phase, error.ours, error.code) == ("request", True, None)
    assert "127.0.0.1" in error.reply and "PROVIDER_ENDPOINTS_ALLOW_PRIVATE=1" in error.reply
    with pytest.raises(DeliveryError, match="loopback"):
        transport.check()  # the identity's "Check connection" too
    transport.close()
    assert server.requests == []  # nothing left
    allowed = make_transport(server.transport_url(), "", 5, allow_private=True)
    assert allowed.send(SENDER, "ann@example.com", message("ann@example.com")).code == 200
    allowed.close()


def test_a_name_that_resolves_inside_is_judged_by_its_addresses(server):
    url = server.transport_url().replace("//127.0.0.1:", "//localhost:")
    error = refused(make_transport(url, "", 5))
    assert error.ours and "localhost resolves to" in error.reply
    assert server.requests == []
    with_flag = make_transport(url, "", 5, allow_private=True)
    assert with_flag.send(SENDER, "ann@example.com", message("ann@example.com")).code == 200
    with_flag.close()


@pytest.mark.parametrize("scheme", list(SERVERS))
@pytest.mark.parametrize("endpoint", ["http://169.254.169.254", "http://[::ffff:169.254.169.254]",
                                      "http://[fd00:ec2::254]", "http://[fe80::1]:8080"])
def test_metadata_and_link_local_endpoints_are_refused_even_with_the_flag(scheme, endpoint):
    with SERVERS[scheme]() as server:
        url = server.transport_url().replace(server.base_url, endpoint)
        error = refused(make_transport(url, "", 1, allow_private=True))
    assert error.ours and "not even with PROVIDER_ENDPOINTS_ALLOW_PRIVATE=1" in error.reply


def test_a_long_error_message_is_cut_and_the_rest_of_the_body_never_shown(server):
    transport = make_transport(server.transport_url(), "", 5, allow_private=True)
    server.fail(1, status=400, message="The sender is refused. " + "x" * 5000 + SECRET)
    error = refused(transport)
    transport.close()
    assert error.phase == "api" and error.code == 400
    assert error.reply.startswith("The sender is refused.") and len(error.reply) <= MAX_ERROR_WORDS
    assert SECRET not in error.reply


class RawProvider(ThreadingHTTPServer):
    """Answers every request with one status and body, as a proxy or a broken provider might."""

    def __init__(self, status: int, body: bytes, content_type: str) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_any(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(outer.status)
                self.send_header("Content-Type", outer.content_type)
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            do_GET = do_POST = do_any

            def log_message(self, *args: object) -> None:
                pass

        self.status, self.body, self.content_type = status, body, content_type
        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def url(self, scheme: str) -> str:
        base = f"http://127.0.0.1:{self.server_address[1]}"
        return {"postmark": f"postmark://tok@?endpoint={base}", "resend": f"resend://re_key@?endpoint={base}",
                "mailgun": f"mailgun://key-1@mg.example.com?endpoint={base}",
                "ses": f"ses://AKIDEXAMPLE:secret@eu-west-1?endpoint={base}"}[scheme]


BODIES = {
    "html": (b"<html><body><h1>502 Bad Gateway</h1><pre>" + SECRET.encode() * 200 + b"</pre></body></html>",
             "text/html"),
    "json without a message": (json.dumps({"detail": SECRET * 200, "trace": [SECRET] * 50}).encode(),
                               "application/json"),
}


def refused_by(raw: RawProvider, scheme: str) -> DeliveryError:
    """What a transport of `scheme` pointed at `raw` says when its answer is refused."""
    try:
        transport = make_transport(raw.url(scheme), "", 5, allow_private=True)
        error = refused(transport)
        transport.close()
    finally:
        raw.shutdown()
        raw.server_close()
    return error


@pytest.mark.parametrize("scheme", ["postmark", "resend", "mailgun", "ses"])
@pytest.mark.parametrize("body", list(BODIES))
def test_an_error_body_without_a_message_field_is_not_echoed(scheme, body):
    error = refused_by(RawProvider(502, *BODIES[body]), scheme)
    assert error.phase == "api" and error.code == 502
    assert SECRET not in error.reply and len(error.reply) <= MAX_ERROR_WORDS


@pytest.mark.parametrize("scheme", ["postmark", "resend", "mailgun"])
def test_an_unreadable_success_answer_is_not_echoed(scheme):
    error = refused_by(RawProvider(200, json.dumps({"unexpected": SECRET * 100}).encode(),
                                   "application/json"), scheme)
    assert error.phase == "response" and SECRET not in error.reply


@pytest.mark.parametrize("scheme", list(SERVERS))
def test_an_endpoints_credentials_stay_out_of_errors_and_descriptions(scheme):
    with SERVERS[scheme]() as server:
        closed = f"http://relay-user-5d1e:relay-pass-9c2b7a@127.0.0.1:{free_port()}/v1"
        url = server.transport_url().replace(server.base_url, quote(f"{closed}?api_key={SECRET}", safe=":/@"))
        transport = make_transport(url, "", 2, allow_private=True)
        error = refused(transport)
        transport.close()
    shown = f"{error.reply} {transport.description}"
    assert error.phase == "request" and "127.0.0.1" in shown
    for secret in ("relay-user-5d1e", "relay-pass-9c2b7a", SECRET):
        assert secret not in shown
