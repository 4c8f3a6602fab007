"""Loopback stand-ins for the providers' HTTP APIs (Postmark, Resend, Amazon SES v2, Mailgun),
speaking the shapes of their documentation (see "Provider HTTP APIs" in the field notes), for
the transport tests, the worker end to end and the benches.

Each is a stdlib `ThreadingHTTPServer` on 127.0.0.1 (a free port; HTTP/1.1 keep-alive like the
real APIs; HTTPS when `server.tls` is an SSLContext before `start()`) that checks credentials
(SES: the SigV4 signature itself), records what it accepted, and misbehaves on request:

    with PostmarkServer() as server:                   # or server.start() ... server.stop()
        transport = make_transport(server.transport_url(), "", 5, allow_private=True)
        server.reject("gone@example.com")              # refuse this address, per message
        server.throttle(1, retry_after="2")            # the next request: 429 + Retry-After
        server.fail(1, status=503)                     # the next request: this error
        server.drop(1)                                 # read the next request, close, no answer
        server.drop(1, after_processing=True)          # ... after accepting its messages
        server.stall(1)                                # read it, answer only when stopped
        server.close_idle()                            # close the kept-alive connections now
        ... server.accepted[0].rcpt, .provider_id, .header("List-Unsubscribe"), .raw, .message
        ... server.accepted[0].files(): its attachments (name, type, bytes), whichever shape
        ... server.requests, server.sends() (each with `.at`, `.peer`), server.min_gap()

A request meets the knobs in this order: stall, drop, credentials (401/403 in the provider's
shape), throttle, fail, then the provider's own answer. `on_request(request)`, when set, runs
for each sending request before it is answered: something that happens while the provider
takes a message. `reset()` forgets the records and the knobs between tests.

Attachments are checked as each provider documents them: Postmark's `Attachments` ([{Name,
Content (base64), ContentType}], 10 MB a message, 50 MB a batch request), Resend's
`attachments` ([{filename, content (base64)}]) on `POST /emails` only (its batch endpoint
refuses them here, as its documentation says it does not take them), SES's and Mailgun's
inside the MIME message.
"""

from __future__ import annotations

import base64
import binascii
import email.policy
import hashlib
import hmac
import json
import math
import mimetypes
import re
import secrets
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import getaddresses
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, urlsplit

_MIME = BytesParser(policy=email.policy.default)
_SIGV4 = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]*)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                    r"SignedHeaders=([^,]+), Signature=([0-9a-f]+)")


@dataclass
class Request:
    method: str
    path: str  # without the query
    headers: dict[str, str]  # names lower-cased
    body: bytes
    at: float  # time.monotonic() when its headers had arrived
    peer: tuple  # the client's (host, port): which connection


@dataclass
class Reply:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, value: Any, **headers: str) -> Reply:
        return cls(status, json.dumps(value).encode(), {"Content-Type": "application/json", **headers})


@dataclass
class Accepted:
    """One message the provider took."""

    rcpt: str
    provider_id: str
    fields: dict[str, Any]  # the JSON message (Postmark, Resend) or the other parameters (SES, Mailgun)
    headers: dict[str, str] = field(default_factory=dict)  # JSON APIs' custom headers, names lower-cased
    raw: bytes | None = None  # the MIME bytes as received (SES, Mailgun)
    # The files of a JSON API's message, decoded from its documented shape: (name, type, bytes).
    attachments: list[tuple[str, str, bytes]] = field(default_factory=list)

    def files(self) -> list[tuple[str, str, bytes]]:
        """The message's attachments as the reader gets them, whichever way they travelled:
        (file name, content type, bytes), in order."""
        if self.raw is None:
            return list(self.attachments)
        return [(str(part.get_filename()), part.get_content_type(), part.get_payload(decode=True))
                for part in self.message.iter_attachments()]

    def header(self, name: str) -> str | None:
        """A header of the message, whichever way it travelled (decoded, unfolded)."""
        if self.raw is None:
            return self.headers.get(name.lower())
        value = self.message.get(name)  # parsed only when asked: benches send many
        return None if value is None else str(value)

    @property
    def message(self) -> EmailMessage:
        """The MIME message as received (SES, Mailgun)."""
        assert self.raw is not None, "a JSON API's message has no MIME form"
        parsed = _MIME.parsebytes(self.raw)
        assert isinstance(parsed, EmailMessage)
        return parsed


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle kept-alive connection is let go after this
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.owner.lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.owner.lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def do_GET(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = Request(self.command, urlsplit(self.path).path,
                          {k.lower(): v for k, v in self.headers.items()}, b"", time.monotonic(),
                          self.client_address)
        request.body = self.rfile.read(length) if length else b""
        reply = self.server.owner.handle(request)
        if reply is None:  # drop: read, then close without a word
            self.close_connection = True
            return
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    do_POST = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ProviderServer
    connections: set[socket.socket]


class ProviderServer:
    """What the four servers share: life, knobs, records. A knob counts requests of any kind
    (`check()`'s GET included); each subclass says its credentials, error shape and endpoints."""

    scheme = ""
    send_path = ""  # the path (a regex) of the sending endpoint
    reject_code: str | None = None  # the provider's code for a refused address, by default

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[Request] = []
        self.accepted: list[Accepted] = []
        self.rejects: dict[str, tuple[str | None, str | None]] = {}
        self.on_request: Callable[[Request], None] | None = None
        self._counts = {"stall": 0, "drop": 0, "drop_after": 0, "throttle": 0, "fail": 0}
        self._retry_after = "1"
        self._failure: tuple[int, str | None, str | None] = (503, None, None)
        self._released = threading.Event()
        self._http: _Server | None = None
        self.tls: ssl.SSLContext | None = None  # set before start() to serve HTTPS

    # ------------------------------------------------------------------ life

    def start(self) -> ProviderServer:
        self._released.clear()
        self._http = _Server(("127.0.0.1", 0), _Handler)
        if self.tls is not None:
            self._http.socket = self.tls.wrap_socket(self._http.socket, server_side=True)
        self._http.owner = self
        self._http.connections = set()
        threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()
        return self

    def stop(self) -> None:
        self._released.set()
        if self._http is None:
            return
        self._http.shutdown()
        self.close_idle()
        self._http.server_close()
        self._http = None

    def close_idle(self) -> None:
        """Close every open connection, as a provider's load balancer closes idle ones."""
        assert self._http is not None, "not started"
        with self.lock:
            for conn in list(self._http.connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def __enter__(self) -> ProviderServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._http is not None, "not started"
        return self._http.server_address[1]

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def transport_url(self, key: str | None = None) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------------ knobs

    def reject(self, address: str, code: str | None = None, message: str | None = None) -> None:
        """Refuse messages to `address` with the provider's per-message answer."""
        with self.lock:
            self.rejects[address.lower()] = (code or self.reject_code, message)

    def throttle(self, n: int = 1, retry_after: str = "1") -> None:
        """Answer the next `n` requests 429, with this Retry-After."""
        self._retry_after = retry_after
        self._arm("throttle", n)

    def fail(self, n: int = 1, status: int = 503, code: str | None = None,
             message: str | None = None) -> None:
        """Answer the next `n` requests with this error, in the provider's shape."""
        self._failure = (status, code, message)
        self._arm("fail", n)

    def drop(self, n: int = 1, after_processing: bool = False) -> None:
        """Close the next `n` connections after reading the request, without answering; with
        `after_processing`, only after taking its messages (the answer lost on the way back)."""
        self._arm("drop_after" if after_processing else "drop", n)

    def stall(self, n: int = 1) -> None:
        """Read the next `n` requests and answer them only when the server stops."""
        self._arm("stall", n)

    def _arm(self, knob: str, n: int) -> None:
        with self.lock:
            self._counts[knob] += n

    def reset(self) -> None:
        """Forget what was recorded and every knob (a Resend server keeps its idempotency keys)."""
        with self.lock:
            self.requests.clear()
            self.accepted.clear()
            self.rejects.clear()
            self._counts = dict.fromkeys(self._counts, 0)

    # ------------------------------------------------------------------ records

    def sends(self) -> list[Request]:
        """The requests to the sending endpoint, in arrival order."""
        with self.lock:
            return [r for r in self.requests if r.method == "POST" and self.is_send(r)]

    def min_gap(self) -> float:
        """The shortest time between the arrivals of two consecutive sending requests."""
        times = [r.at for r in self.sends()]
        return min((b - a for a, b in zip(times, times[1:], strict=False)), default=float("inf"))

    def min_paired_gap(self, over: int = 2) -> float:
        """The shortest average of `over` consecutive gaps. With two servers' threads in one
        process, one can record a request a scheduling stall late, which shortens the gap after
        it by as much as it lengthened the one before; the average over a pair is immune to
        one such stall (over three, to two in a row), and unpaced requests still show as a few
        ms (see tests/smtp_server.py:paired)."""
        times = [r.at for r in self.sends()]
        return min(((c - a) / over for a, c in zip(times, times[over:], strict=False)),
                   default=float("inf"))

    # ------------------------------------------------------------------ answering

    def _take(self, knob: str) -> bool:
        with self.lock:
            if self._counts[knob] > 0:
                self._counts[knob] -= 1
                return True
            return False

    def handle(self, request: Request) -> Reply | None:
        with self.lock:
            self.requests.append(request)
        if self._take("stall"):
            self._released.wait()
            return None
        if self._take("drop"):
            return None
        dropped_after = self._take("drop_after")
        refusal = self.refuse(request)
        if refusal is not None:
            return None if dropped_after else refusal
        if self._take("throttle"):
            reply = self.error(429, None, None)
            reply.headers["Retry-After"] = self._retry_after
        elif self._take("fail"):
            reply = self.error(*self._failure)
        else:
            if self.on_request is not None and self.is_send(request):
                self.on_request(request)
            reply = self.answer(request)
        return None if dropped_after else reply

    def is_send(self, request: Request) -> bool:
        return re.fullmatch(self.send_path, request.path) is not None

    def refused(self, address: str) -> tuple[str | None, str | None] | None:
        with self.lock:
            return self.rejects.get(address.lower())

    def record(self, accepted: Accepted) -> None:
        with self.lock:
            self.accepted.append(accepted)

    # Each provider: its credentials check, its error shape and its endpoints.
    def refuse(self, request: Request) -> Reply | None:
        raise NotImplementedError

    def error(self, status: int, code: str | None, message: str | None) -> Reply:
        raise NotImplementedError

    def answer(self, request: Request) -> Reply:
        raise NotImplementedError


def _addresses(value: str | list[str]) -> list[str]:
    values = value if isinstance(value, list) else [value]
    return [address for _, address in getaddresses(values)]


class PostmarkServer(ProviderServer):
    """`POST /email/batch` (at most 500), `GET /server`; token in X-Postmark-Server-Token."""

    scheme, send_path, reject_code = "postmark", "/email/batch", "406"
    limit = 500

    def __init__(self, token: str = "postmark-test-token", server_name: str = "Broadside test") -> None:
        super().__init__()
        self.token, self.server_name = token, server_name

    def transport_url(self, key: str | None = None, stream: str | None = None) -> str:
        extra = f"&stream={stream}" if stream else ""
        return f"postmark://{quote(key or self.token, safe='')}@?endpoint={self.base_url}{extra}"

    def refuse(self, request: Request) -> Reply | None:
        if request.headers.get("x-postmark-server-token") != self.token:
            return self.error(401, "10", "Request does not contain a valid Server token.")
        return None

    def error(self, status: int, code: str | None, message: str | None) -> Reply:
        return Reply.json(status, {"ErrorCode": int(code or (429 if status == 429 else 0)),
                                   "Message": message or f"Postmark says {status}"})

    def answer(self, request: Request) -> Reply:
        if request.method == "GET" and request.path == "/server":
            return Reply.json(200, {"ID": 1, "Name": self.server_name, "ApiTokens": [self.token]})
        if request.method != "POST" or request.path != "/email/batch":
            return self.error(404, "0", "Not found")
        if len(request.body) > POSTMARK_BATCH_BYTES:
            return self.error(422, "300", "The batch request is over 50 MB.")
        messages = json.loads(request.body)
        if len(messages) > self.limit:
            return self.error(422, "300", f"Batch too large: {len(messages)} messages, at most {self.limit}.")
        return Reply.json(200, [self._one(message) for message in messages])

    def _one(self, message: dict[str, Any]) -> dict[str, Any]:
        rcpt = _addresses(message.get("To", ""))[0]
        files, problem = _postmark_attachments(message)
        if problem is not None:
            return {"ErrorCode": 300, "To": message.get("To"), "Message": problem}
        refused = self.refused(rcpt)
        if refused is not None:
            code, said = refused
            return {"ErrorCode": int(code or 406), "To": message["To"],
                    "Message": said or f"You tried to send to recipient(s) that have been marked as "
                                        f"inactive. Found inactive addresses: {rcpt}."}
        message_id = str(uuid.uuid4())
        headers = {h["Name"].lower(): h["Value"] for h in message.get("Headers", [])}
        self.record(Accepted(rcpt, message_id, message, headers, attachments=files))
        return {"ErrorCode": 0, "Message": "OK", "MessageID": message_id, "To": message["To"],
                "SubmittedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


class ResendServer(ProviderServer):
    """`POST /emails/batch` (at most 100; Idempotency-Key; x-batch-validation), `GET /domains`;
    key in `Authorization: Bearer`. `sending_only`: the key may not list domains."""

    scheme, send_path, reject_code = "resend", "/emails(/batch)?", "validation_error"
    limit = 100

    def __init__(self, key: str = "re_test_key", domain: str = "example.com",
                 sending_only: bool = False) -> None:
        super().__init__()
        self.key, self.domain, self.sending_only = key, domain, sending_only
        self.idempotency: dict[str, tuple[str, Reply]] = {}  # key -> (payload digest, first answer)
        # Resend's rate limit (requests per second per team; 2 by default at Resend): when set,
        # every answer carries the IETF draft headers Resend documents (`ratelimit-limit`,
        # `ratelimit-remaining`, `ratelimit-reset` in seconds), and a request past the limit
        # in the current second is a 429 `rate_limit_exceeded` with `retry-after`.
        self.rate_limit: int | None = None
        self.over_limit = 0  # requests answered 429 by the rate limit
        self._window_end = 0.0
        self._used = 0

    def handle(self, request: Request) -> Reply | None:
        if self.rate_limit is None:
            return super().handle(request)
        with self.lock:
            now = time.monotonic()
            if now >= self._window_end:
                self._window_end, self._used = now + 1.0, 0
            self._used += 1
            used, reset = self._used, max(1, math.ceil(self._window_end - now))
        counted = {"ratelimit-limit": str(self.rate_limit),
                   "ratelimit-remaining": str(max(0, self.rate_limit - used)),
                   "ratelimit-reset": str(reset)}
        if used > self.rate_limit:
            with self.lock:
                self.requests.append(request)
                self.over_limit += 1
            reply = self.error(429, None, "Too many requests. You can only make 2 requests per second.")
            reply.headers.update(counted, **{"retry-after": str(reset)})
            return reply
        reply = super().handle(request)
        if reply is not None:
            reply.headers.update(counted)
        return reply

    def transport_url(self, key: str | None = None) -> str:
        return f"resend://{quote(key or self.key, safe='')}@?endpoint={self.base_url}"

    def refuse(self, request: Request) -> Reply | None:
        given = request.headers.get("authorization", "")
        if not given.startswith("Bearer "):
            return self.error(401, "missing_api_key", "Missing API key in the authorization header")
        if given != f"Bearer {self.key}":
            return self.error(403, "invalid_api_key", "API key is invalid")
        return None

    def error(self, status: int, code: str | None, message: str | None) -> Reply:
        name = code or {429: "rate_limit_exceeded", 422: "validation_error"}.get(
            status, "internal_server_error")
        return Reply.json(status, {"statusCode": status, "name": name,
                                   "message": message or f"Resend says {status}"})

    def answer(self, request: Request) -> Reply:
        if request.method == "GET" and request.path == "/domains":
            if self.sending_only:
                return self.error(401, "restricted_api_key", "This API key is restricted to only send emails")
            return Reply.json(200, {"object": "list", "data": [
                {"id": str(uuid.uuid4()), "name": self.domain, "status": "verified", "region": "us-east-1"}]})
        if request.method != "POST" or request.path not in ("/emails/batch", "/emails"):
            return self.error(404, "not_found", "Not found")
        send = self._batch if request.path == "/emails/batch" else self._email
        key = request.headers.get("idempotency-key")
        if key is None:
            return send(request)
        if len(key) > 256:
            return self.error(400, "invalid_idempotency_key", "The key must be 1-256 characters long.")
        digest = hashlib.sha256(request.body).hexdigest()
        with self.lock:
            seen = self.idempotency.get(key)
        if seen is not None:
            if seen[0] != digest:
                return self.error(409, "invalid_idempotent_request",
                                  "Same idempotency key used with a different request payload.")
            return seen[1]
        reply = send(request)
        if reply.status == 200:
            with self.lock:
                self.idempotency[key] = (digest, reply)
        return reply

    def _email(self, request: Request) -> Reply:
        """`POST /emails`: one message, attachments allowed ([{filename, content: base64}],
        40 MB in all once encoded)."""
        if len(request.body) > RESEND_EMAIL_BYTES:
            return self.error(422, "validation_error", "The email is over 40 MB.")
        message = json.loads(request.body)
        files, problem = _resend_attachments(message)
        if problem is not None:
            return self.error(422, "validation_error", problem)
        rcpt = _addresses(message.get("to", []))[0]
        refused = self.refused(rcpt)
        if refused is not None:
            return self.error(422, "validation_error", refused[1] or "Invalid `to` field.")
        message_id = str(uuid.uuid4())
        headers = {k.lower(): v for k, v in message.get("headers", {}).items()}
        self.record(Accepted(rcpt, message_id, message, headers, attachments=files))
        return Reply.json(200, {"id": message_id})

    def _batch(self, request: Request) -> Reply:
        messages = json.loads(request.body)
        if len(messages) > self.limit:
            return self.error(422, "validation_error", f"Too many emails: {len(messages)}, max {self.limit}")
        if any("attachments" in message for message in messages):
            # Resend's documentation: "The attachments field is not supported yet" on batches.
            return self.error(422, "validation_error",
                              "Attachments are not supported on the batch endpoint.")
        permissive = request.headers.get("x-batch-validation") == "permissive"
        errors: list[dict[str, Any]] = []
        for index, message in enumerate(messages):
            refused = self.refused(_addresses(message.get("to", []))[0])
            if refused is not None:
                errors.append({"index": index, "message": refused[1] or "Invalid `to` field."})
        if errors and not permissive:
            return self.error(422, "validation_error", errors[0]["message"])
        refused_at = {e["index"] for e in errors}
        data = []
        for index, message in enumerate(messages):
            if index not in refused_at:
                message_id = str(uuid.uuid4())
                headers = {k.lower(): v for k, v in message.get("headers", {}).items()}
                self.record(Accepted(_addresses(message["to"])[0], message_id, message, headers))
                data.append({"id": message_id})
        return Reply.json(200, {"data": data, "errors": errors} if permissive else {"data": data})


class SesServer(ProviderServer):
    """SES v2 as botocore speaks it (REST-JSON, SigV4): `POST /v2/email/outbound-emails`
    (SendEmail, Content.Raw) and `GET /v2/email/account` (GetAccount)."""

    scheme, send_path, reject_code = "ses", "/v2/email/outbound-emails", "MessageRejected"

    def __init__(self, access_key: str = "AKIDBROADSIDETEST", secret: str = "broadside/test+secret",
                 region: str = "eu-west-1") -> None:
        super().__init__()
        self.access_key, self.secret, self.region = access_key, secret, region
        self.max_send_rate = 14.0  # GetAccount's SendQuota.MaxSendRate (SES sends no rate headers)

    def transport_url(self, key: str | None = None, access_key: str | None = None) -> str:
        """`key` replaces the secret access key."""
        user = f"{quote(access_key or self.access_key, safe='')}:{quote(key or self.secret, safe='')}"
        return f"ses://{user}@{self.region}?endpoint={self.base_url}"

    def refuse(self, request: Request) -> Reply | None:
        match = _SIGV4.fullmatch(request.headers.get("authorization", ""))
        if match is None or match[1] != self.access_key:
            return self.error(403, "UnrecognizedClientException",
                              "The security token included in the request is invalid.")
        if not hmac.compare_digest(match[6], self._signature(request, *match.group(2, 3, 4, 5))):
            return self.error(403, "InvalidSignatureException", "The request signature we calculated "
                              "does not match the signature you provided.")
        return None

    def _signature(self, request: Request, day: str, region: str, service: str, signed: str) -> str:
        """SigV4, computed again from what arrived (no query strings in SES v2's two calls)."""
        headers = "".join(f"{name}:{' '.join(request.headers.get(name, '').split())}\n"
                          for name in signed.split(";"))
        canonical = "\n".join([request.method, quote(request.path, safe="/~"), "", headers, signed,
                               hashlib.sha256(request.body).hexdigest()])
        scope = f"{day}/{region}/{service}/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", request.headers.get("x-amz-date", ""), scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        key = ("AWS4" + self.secret).encode()
        for part in (day, region, service, "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()

    def error(self, status: int, code: str | None, message: str | None) -> Reply:
        name = code or ("TooManyRequestsException" if status == 429 else
                        "InternalFailure" if status >= 500 else "BadRequestException")
        return Reply.json(status, {"message": message or f"SES says {status}"},
                          **{"x-amzn-ErrorType": name, "x-amzn-RequestId": str(uuid.uuid4())})

    def answer(self, request: Request) -> Reply:
        if request.method == "GET" and request.path == "/v2/email/account":
            return Reply.json(200, {"SendingEnabled": True, "ProductionAccessEnabled": True,
                                    "EnforcementStatus": "HEALTHY", "DedicatedIpAutoWarmupEnabled": False,
                                    "SendQuota": {"Max24HourSend": 50000.0, "MaxSendRate": self.max_send_rate,
                                                  "SentLast24Hours": float(len(self.accepted))}})
        if request.method != "POST" or request.path != self.send_path:
            return self.error(404, "NotFoundException", "Not found")
        params = json.loads(request.body)
        try:
            raw = base64.b64decode(params["Content"]["Raw"]["Data"], validate=True)
        except (KeyError, TypeError, binascii.Error):
            return self.error(400, "BadRequestException", "Content.Raw.Data must be base64")
        recipients = params.get("Destination", {}).get("ToAddresses") or _addresses(
            str(_MIME.parsebytes(raw).get("To", "")))
        for rcpt in recipients:
            refused = self.refused(rcpt)
            if refused is not None:
                said = ("Email address is not verified. The following identities failed the check "
                        f"in region {self.region.upper()}: {rcpt}")
                return self.error(400, refused[0], refused[1] or said)
        message_id = f"0102{secrets.token_hex(6)}-{uuid.uuid4()}-000000"
        fields = {k: v for k, v in params.items() if k != "Content"}
        for rcpt in recipients:
            self.record(Accepted(rcpt, message_id, fields, raw=raw))
        return Reply.json(200, {"MessageId": message_id}, **{"x-amzn-RequestId": str(uuid.uuid4())})


class MailgunServer(ProviderServer):
    """`POST /v3/{domain}/messages.mime` (multipart: `to`, `message`), `GET /v3/domains/{domain}`;
    HTTP Basic `api:KEY`."""

    scheme, send_path = "mailgun", r"/v3/[^/]+/messages\.mime"

    def __init__(self, key: str = "key-broadside-test", domain: str = "mg.example.com") -> None:
        super().__init__()
        self.key, self.domain = key, domain

    def transport_url(self, key: str | None = None, domain: str | None = None) -> str:
        key = quote(key or self.key, safe="")
        return f"mailgun://{key}@{domain or self.domain}?endpoint={self.base_url}"

    def refuse(self, request: Request) -> Reply | None:
        expected = "Basic " + base64.b64encode(f"api:{self.key}".encode()).decode()
        if request.headers.get("authorization") != expected:
            return Reply(401, b"Forbidden", {"Content-Type": "text/plain"})
        return None

    def error(self, status: int, code: str | None, message: str | None) -> Reply:
        return Reply.json(status, {"message": message or f"Mailgun says {status}"})

    def answer(self, request: Request) -> Reply:
        if request.method == "GET" and request.path == f"/v3/domains/{self.domain}":
            return Reply.json(200, {"domain": {"name": self.domain, "state": "active"},
                                    "receiving_dns_records": [], "sending_dns_records": []})
        match = re.fullmatch(self.send_path.replace("[^/]+", "([^/]+)"), request.path)
        if request.method != "POST" or match is None:
            return self.error(404, None, "Not found")
        if match[1] != self.domain:
            return self.error(404, None, f"Domain not found: {match[1]}")
        form = parse_multipart(request.headers.get("content-type", ""), request.body)
        recipients, raw = form.get("to", []), (form.get("message") or [b""])[0]
        if not recipients or not raw:
            return self.error(400, None, f"'{'message' if recipients else 'to'}' parameter is missing")
        rcpts = _addresses([value.decode() for value in recipients])
        for rcpt in rcpts:
            refused = self.refused(rcpt)
            if refused is not None:
                return self.error(400, None, refused[1] or f"'to' parameter is not a valid address: {rcpt}")
        message_id = f"{time.strftime('%Y%m%d%H%M%S')}.{secrets.token_hex(8)}@{self.domain}"
        for rcpt in rcpts:
            self.record(Accepted(rcpt, message_id, {"to": rcpts}, raw=raw))
        return Reply.json(200, {"id": f"<{message_id}>", "message": "Queued. Thank you."})


POSTMARK_BATCH_BYTES = 50 * 1024 * 1024  # Postmark: a batch request is at most 50 MB
POSTMARK_MESSAGE_BYTES = 10 * 1024 * 1024  # and one message, attachments included, 10 MB
RESEND_EMAIL_BYTES = 40 * 1024 * 1024  # Resend: an email is at most 40 MB once encoded


def _base64(value: Any) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        return None


def _postmark_attachments(message: dict[str, Any]) -> tuple[list[tuple[str, str, bytes]], str | None]:
    """Postmark's `Attachments`: [{"Name", "Content" (base64), "ContentType"}], each of the
    three required; the message (bodies and files) at most 10 MB."""
    files: list[tuple[str, str, bytes]] = []
    given = message.get("Attachments", [])
    if not isinstance(given, list):
        return [], "Attachments must be a list."
    for item in given:
        if not isinstance(item, dict) or set(item) - {"Name", "Content", "ContentType", "ContentID"}:
            return [], "Each attachment is {Name, Content, ContentType}."
        data = _base64(item.get("Content"))
        name, kind = item.get("Name"), item.get("ContentType")
        if not isinstance(name, str) or not name or data is None or not isinstance(kind, str) \
                or "/" not in kind:
            return [], "An attachment needs a Name, base64 Content and a ContentType."
        files.append((name, kind, data))
    size = sum(len(data) for _, _, data in files) + sum(
        len(str(message.get(key, "")).encode()) for key in ("HtmlBody", "TextBody"))
    if size > POSTMARK_MESSAGE_BYTES:
        return [], "Message size limit exceeded: at most 10 MB, attachments included."
    return files, None


def _resend_attachments(message: dict[str, Any]) -> tuple[list[tuple[str, str, bytes]], str | None]:
    """Resend's `attachments`: [{"filename", "content" (base64)}] (a `path` URL instead of
    content is the other documented way, not ours); the type follows the name."""
    files: list[tuple[str, str, bytes]] = []
    given = message.get("attachments", [])
    if not isinstance(given, list):
        return [], "attachments must be an array."
    for item in given:
        if not isinstance(item, dict) or set(item) - {"filename", "content", "content_type"}:
            return [], "Each attachment is {filename, content}."
        data, name = _base64(item.get("content")), item.get("filename")
        if not isinstance(name, str) or not name or data is None:
            return [], "An attachment needs a filename and base64 content."
        kind = item.get("content_type") or mimetypes.guess_type(name)[0] or "application/octet-stream"
        files.append((name, kind, data))
    return files, None


def parse_multipart(content_type: str, body: bytes) -> dict[str, list[bytes]]:
    """multipart/form-data -> {name: [value bytes, …]}, each value exactly as sent."""
    boundary = re.search(r'boundary="?([^";]+)"?', content_type)
    if boundary is None:
        return {}
    form: dict[str, list[bytes]] = {}
    for chunk in body.split(b"--" + boundary[1].encode())[1:-1]:
        head, _, value = chunk.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]*)"', head)
        if name is not None:
            form.setdefault(name[1].decode(), []).append(value.removesuffix(b"\r\n"))
    return form
