"""What the provider transports share: one HTTP connection per transport that never retries and
always says where a failure happened, the mapping of answers to `DeliveryError`, the MIME ->
JSON fields of the JSON APIs, and the transports' base class (`start`/`finish`/`send` as a
batch of one).

Guarantees, and why:

- **No retry, ever.** Nothing here, in urllib3 or in the transports, sends a request twice: a
  second POST can be a second copy of a newsletter. Retrying is the worker's decision
  (`jobs/classify.py`, invariant 6).
- **The phase says whether the request could have been accepted** (invariant 5), and it comes
  from *where* the failure happened, not from the exception's type. Connecting (DNS, refused,
  TLS handshake, connect timeout) fails with phase `request`: nothing was written, so the
  provider provably has nothing. Anything after the connection is up (writing the request,
  waiting for or reading the answer) fails with phase `response`: the provider may have
  accepted it. That is why `HttpClient` drives one urllib3 `HTTPConnection` step by step
  (connect, then request) instead of a `PoolManager`, which connects inside `urlopen` and
  raises the same `SSLError` for a failed handshake and for a TLS failure after the request.
- **`pace()` runs once per request, right before it is written**: after any (re)connect and
  also when the connect fails (invariant 2), so the pacer's spacing is the provider's.
- An idle kept-alive connection the provider closed is noticed (its socket reads as closed)
  and replaced before the request: never reported as `response`.
- **Only a checked address is called.** Before each (re)connect the host is resolved and every
  address it has is judged (`broadside.core.public_addresses`): a private or loopback one is
  refused unless `PROVIDER_ENDPOINTS_ALLOW_PRIVATE=1` (`allow_private`), link-local and cloud
  metadata ones always, as phase `request` with `ours` (nothing was sent; our sentence names
  the address and the flag). The connection then goes to a checked address, the Host header
  and the TLS name staying the URL's, so a name that resolves differently a moment later
  cannot slip past the check.
- Replies are the provider's own words: only its message field (`api_error`'s `reply`), cut to
  `MAX_ERROR_WORDS` characters, never its whole body (an error page or a JSON document may
  carry anything); no secret is ever put in a reply or a description.
"""

from __future__ import annotations

import email.policy
import email.utils
import http.client
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import HTTPError

from broadside.core.public_addresses import Unresolvable, first_refusal, refusal_words, resolve_host
from broadside.core.transport_urls import endpoint_shown

# Re-exported: the provider modules read a message's fields through http.
from broadside.delivery.providers.mime_fields import fields_of as fields_of
from broadside.delivery.providers.mime_fields import mime_fields as mime_fields
from broadside.delivery.transports import (
    DeliveryError,
    OneByOne,
    Outgoing,
    SendResult,
    Shape,
    network_words,
)

MAX_REPLY = 300
MAX_ERROR_WORDS = 200  # a provider's error message, as shown to the owner
ENDPOINT_FLAG = "PROVIDER_ENDPOINTS_ALLOW_PRIVATE"
MAX_CONNECT_TIMEOUT = 10.0
USER_AGENT = "broadside"

Pace = Callable[[], object]
Heard = Callable[[Mapping[str, str]], object]  # told each answer's headers (a provider's budget)


def no_pace() -> None:
    pass


def clip(text: str, limit: int = MAX_REPLY) -> str:
    """One line of at most `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def checked_addresses(provider: str, host: str, port: int, *, allow_private: bool,
                      where: str) -> tuple[str, ...]:
    """Every address `host` resolves to, each judged; raises `DeliveryError` (phase `request`,
    nothing sent) when it does not resolve or one of them may not be called."""
    try:
        addresses = resolve_host(host, port)
    except Unresolvable:
        raise DeliveryError("request", None, clip(f"could not connect to {where}: the host {host} "
                                                 "does not resolve"),
                            network=True, provider=provider) from None
    found = first_refusal(addresses, allow_private=allow_private)
    if found:
        raise DeliveryError("request", None, "Not sent: the endpoint host "
                            + refusal_words(host, found, ENDPOINT_FLAG), provider=provider,
                            ours=True)
    return addresses


def parse_retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date (RFC 9110 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


def check_batch_size(items: Sequence[Outgoing], limit: int) -> None:
    if len(items) > limit:
        raise ValueError(f"{len(items)} messages in one request; this provider takes at most {limit}")


@dataclass(frozen=True)
class Answer:
    """A provider's HTTP answer, read whole."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None


class HttpClient:
    """One provider's base URL over one kept-alive connection (a transport sends one request at a
    time, from one thread). `request` returns every answer, error statuses included; it raises
    `DeliveryError` only when no answer came (phase `request` or `response`)."""

    def __init__(self, provider: str, base_url: str, timeout: float, headers: Mapping[str, str],
                 *, allow_private: bool = False) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) base URL: {base_url!r}")
        self.provider = provider
        self.base_url = endpoint_shown(base_url.rstrip("/"))  # shown in errors: no credentials
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._allow_private = allow_private
        self._prefix = parts.path.rstrip("/")
        self._connect_timeout = min(timeout, MAX_CONNECT_TIMEOUT)
        self._read_timeout = timeout
        default_port = 443 if self._https else 80
        name = f"[{self._host}]" if ":" in self._host else self._host
        self._headers = {"User-Agent": USER_AGENT, **headers,
                         "Host": name if self._port == default_port else f"{name}:{self._port}"}
        self._conn: HTTPConnection | None = None
        self.heard: Heard | None = None

    def request(self, method: str, path: str, *, body: bytes | None = None,
                headers: Mapping[str, str] | None = None, pace: Pace = no_pace) -> Answer:
        try:
            conn = self._connected()
        except (HTTPError, OSError) as exc:
            # Nothing was written: provably not accepted.
            self.close()
            raise DeliveryError("request", None, clip(f"could not connect to {self.base_url}: "
                                                    f"{network_words(exc, self.base_url)}"),
                                network=True, provider=self.provider) from None
        finally:
            pace()  # a failed connect is paced like any other attempt
        try:
            conn.request(method, self._prefix + path, body=body, headers={**self._headers, **(headers or {})})
            response = conn.getresponse()  # reads the whole body (preload_content)
            data = response.data
        except (HTTPError, OSError, http.client.HTTPException) as exc:
            # The request may have been written in full: the provider may have accepted it.
            self.close()
            raise DeliveryError("response", None, clip(f"no answer from {self.base_url}: "
                                                    f"{network_words(exc, self.base_url)}"),
                                network=True, provider=self.provider) from None
        if self.heard is not None:  # a provider's remaining budget, for the account's ceiling
            self.heard(response.headers)
        return Answer(response.status, response.headers, data)

    def _connected(self) -> HTTPConnection:
        kept = self._conn
        if kept is not None and kept.is_connected:
            return kept
        # Never connected, or the provider closed the idle connection (its socket reads as
        # closed): a new one, connected here so that a failure is known to be before the request.
        self.close()
        addresses = checked_addresses(self.provider, self._host, self._port,
                                      allow_private=self._allow_private, where=self.base_url)
        failure: Exception | None = None
        for address in addresses:  # the first checked address that answers, never the name again
            conn: HTTPConnection
            if self._https:
                conn = HTTPSConnection(address, self._port, timeout=self._connect_timeout,
                                       server_hostname=self._host, assert_hostname=self._host)
            else:
                conn = HTTPConnection(address, self._port, timeout=self._connect_timeout)
            try:
                conn.connect()
            except (HTTPError, OSError) as exc:
                conn.close()
                failure = exc
                continue
            self._conn = conn
            conn.timeout = self._read_timeout  # for writing the request and reading the answer
            return conn
        assert failure is not None  # resolve_host never returns no address
        raise failure

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def api_error(provider: str, answer: Answer, reply: str | None = None,
              provider_code: str | None = None) -> DeliveryError:
    """The provider answered with an error status: `code` is the HTTP status, `reply` its message
    field cut to MAX_ERROR_WORDS (just "HTTP 502" when it gave none: the body itself, an error
    page or a JSON document that may carry anything, is never shown), `retry_after` from a
    Retry-After header."""
    text = reply.strip() if reply else ""
    text = clip(text, MAX_ERROR_WORDS) if text else f"HTTP {answer.status}"
    return DeliveryError("api", answer.status, text, provider=provider,
                         provider_code=provider_code,
                         retry_after=parse_retry_after(answer.header("Retry-After")))


def unreadable(provider: str, answer: Answer, what: str) -> DeliveryError:
    """A success status with an answer we cannot map to the messages: they may all have been
    accepted, so this is as ambiguous as no answer at all."""
    return DeliveryError("response", answer.status, clip(f"unreadable answer ({what}; "
                                                         f"{len(answer.body)} bytes, not shown)"),
                         provider=provider)


def in_turns(groups: Sequence[Sequence[int]], send: Callable[[Sequence[int]], list[Any]],
             provider: str) -> list[SendResult | DeliveryError]:
    """One batch sent as several requests, one after the other (its attachments are more than
    one request may carry, or the provider takes them only one message a request), results
    in the items' order. The first request's failure raises, as one request's would (nothing
    of the batch went out); a later one's is the failure of each of its messages, and the
    requests after it are not made: theirs get a phase `request` error, provably not sent."""
    results: list[SendResult | DeliveryError] = []
    for number, group in enumerate(groups):
        try:
            results.extend(send(group))
        except DeliveryError as error:
            if number == 0:
                raise
            results.extend(error for _ in group)
            results.extend(DeliveryError("request", None, "not sent: the request before it in "
                                         "its batch failed", provider=provider)
                           for rest in groups[number + 1:] for _ in rest)
            break
    return results


# ------------------------------------------------------------------ the transports' base


class ProviderTransport:
    """The four provider transports' base: each says its `batch_limit`, `description`,
    `send_batch`, `check`, `close`; this gives `start`/`finish`/`send`/`wire` as a batch of one
    (the request in `start`, its verdict kept for `finish`). A single message has no
    idempotency key: the owner's "send again" must really send again."""

    batch_limit: int
    # True when the provider honours `send_batch`'s idempotency key (Resend): a batch that got
    # no answer may then be sent again with the same key and items without a second copy.
    idempotent = False
    _kept: SendResult | DeliveryError | None = None
    _answers: HttpClient | None = None  # None: it speaks through another client (SES)
    max_send_rate: float | None = None  # requests/s the account allows, once check() asked (SES)
    def listen(self, heard: Heard) -> None:  # `heard`: every answer's headers from now on
        if self._answers is not None:
            self._answers.heard = heard

    @property
    def description(self) -> str:
        raise NotImplementedError

    def shape(self) -> Shape:
        """One by one (SES, Mailgun: `batch_limit` 1); Postmark and Resend say `InBatches`."""
        return OneByOne(self)

    def send_batch(self, items: Sequence[Outgoing], idempotency_key: str,
                   pace: Pace = no_pace) -> list[SendResult | DeliveryError]:
        raise NotImplementedError

    def check(self) -> str:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    @staticmethod
    def wire(message: bytes) -> bytes:
        return message  # a request body, not an SMTP stream: nothing to stuff

    def start(self, mail_from: str, rcpt: str, wire: bytes, pace: Pace = no_pace) -> None:
        try:
            [outcome] = self.send_batch([Outgoing(mail_from, rcpt, wire)], "", pace)
        except DeliveryError as exc:
            outcome = exc
        self._kept = outcome

    def finish(self) -> SendResult:
        outcome, self._kept = self._kept, None
        assert outcome is not None, "finish() without start()"
        if isinstance(outcome, DeliveryError):
            raise outcome
        return outcome

    def send(self, mail_from: str, rcpt: str, message: bytes, pace: Pace = no_pace) -> SendResult:
        self.start(mail_from, rcpt, self.wire(message), pace)
        return self.finish()
