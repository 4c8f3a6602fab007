"""The seam between the worker and whatever carries mail: what a transport promises, in types.

Three kinds of transport, each a Protocol, and a transport says which one it is by its
`shape()` (never by an attribute the worker probes for):

- `Transport`: one message at a time, in two halves (`start`, then `finish`, so the worker
  prepares the next message while the server takes this one) or whole (`send`). The outbox
  (broadside.delivery.eml_folder), SES and Mailgun.
- `BatchTransport`: a provider taking many messages in one request (`send_batch`), outcomes
  by position. Postmark and Resend (broadside.delivery.providers).
- `FollowingTransport`: SMTP with PIPELINING (broadside.delivery.smtp), which can let the next
  message's MAIL/RCPT/DATA ride in the same write as the previous body (`start(then=)`,
  `start_next`, `abandon`).

`shape()` returns `OneByOne`, `InBatches` or `Riding`, each holding the transport typed as
what it is, so the worker picks its way of sending once per slice with a `match`, checked by
mypy. Every failure is a `DeliveryError` saying *where* it happened: before anything of the
message could be accepted, or after (ambiguous, invariant 5); the transport only reports, and
jobs.classify decides what each answer means (invariant 6). Every transport calls `pace()`
right before the side effect (MAIL FROM, the HTTP request, the file's write: invariant 2).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from broadside.core.connection_words import connection_words
from broadside.mail.mime import MailAttachment

Pace = Callable[[], object]
log = logging.getLogger("broadside.worker")

# A provider's name as the owner knows it, by its transport scheme (`DeliveryError.provider`).
PROVIDER_NAMES = {"ses": "Amazon SES", "postmark": "Postmark", "resend": "Resend",
                  "mailgun": "Mailgun"}


@dataclass(frozen=True)
class SendResult:
    code: int
    reply: str
    provider_id: str | None = None  # the provider's own id for this message (HTTP APIs)


@dataclass(frozen=True)
class MessageFields:
    """What a JSON API (Postmark, Resend) needs of a message: the worker hands these over as
    it built them, so a batch of 500 is not parsed back from MIME (~3 ms a message)."""

    sender: str  # the From header
    to: str  # the To header when it names the envelope recipient alone, else the recipient
    subject: str
    text: str | None
    html: str | None
    reply_to: str | None
    # Carried over as custom headers: List-Unsubscribe, List-Unsubscribe-Post, Message-ID, X-*…
    headers: list[tuple[str, str]] = field(default_factory=list)
    # The files it carries (the revision's, shared by every copy; each encodes itself once).
    attachments: tuple[MailAttachment, ...] = ()


@dataclass(frozen=True)
class Outgoing:
    """One message of a batch request: the envelope, the whole MIME message, and (when the
    worker has them) the same message's fields for a JSON API."""

    mail_from: str
    rcpt: str
    message: bytes
    fields: MessageFields | None = None


class DeliveryError(Exception):
    """A send that did not (provably or possibly) succeed.

    phase, for SMTP: connect | tls | auth | mail | rcpt | data-command | data-body | data-end,
    and dkim (the identity's DKIM key could not sign: Broadside's own refusal, `ours`);
    for a provider's HTTP API: `request` (the request could not be sent: refused, DNS, TLS,
    a timeout while connecting; provably not accepted), `response` (the request was sent and
    no answer came: ambiguous, like data-body), `api` (the provider answered with an error:
    `code` is the HTTP status, `provider_code` the provider's own code or exception name).
    network: True when the connection failed (refused, reset, timed out) rather than replied.
    ours: True when Broadside itself refused before anything was sent (an address it cannot
    write): `reply` is then our own sentence, never a server's.
    provider: the transport's scheme for HTTP APIs (ses, postmark, resend, mailgun).
    retry_after: seconds the provider asked us to wait (a 429's Retry-After), if it said.
    The transport only reports; jobs.classify decides what each answer means (invariant 6).
    `reply` is shown to the owner: a server's or provider's own words, or ours (never a
    Python exception's text: `network_words`).
    """

    def __init__(self, phase: str, code: int | None, reply: str, *, network: bool = False,
                 provider: str | None = None, provider_code: str | None = None,
                 retry_after: float | None = None, ours: bool = False) -> None:
        super().__init__(f"{phase}: {code or ''} {reply}".strip())
        self.phase = phase
        self.code = code
        self.reply = reply
        self.network = network
        self.provider = provider
        self.provider_code = provider_code
        self.retry_after = retry_after
        self.ours = ours


def network_words(exc: BaseException, where: str) -> str:
    """A failed connection in the owner's words, the exception itself in the worker's log
    (broadside.core.connection_words)."""
    return connection_words(exc, where, log)


class Transport(Protocol):
    """What the worker asks of any transport (`broadside.delivery.providers.factory.make_transport`
    returns one).

    A slice sends in two halves, `start` then `finish`, so the next message can be prepared
    while the server processes this one; `send` does both at once. Each raises
    `DeliveryError` when the message was not (provably or possibly) accepted.
    """

    @property
    def description(self) -> str:
        """Where mail goes, for the worker's log (never a password)."""
        ...

    def shape(self) -> Shape:
        """Which kind of transport this is, holding itself typed as that kind."""
        ...

    def check(self) -> str:
        """Connect and authenticate as configured, send nothing (for `doctor`); raises
        DeliveryError when that fails, returns a one-line description when it works."""
        ...

    def wire(self, message: bytes) -> bytes:
        """The bytes `start` writes for `message` (for SMTP: dot-stuffed, ending the DATA)."""
        ...

    def start(self, mail_from: str, rcpt: str, wire: bytes, pace: Pace = ...) -> None:
        """Hand one message (`wire` comes from `wire()`) over; `pace()` runs right before."""
        ...

    def finish(self) -> SendResult:
        """The verdict on the message the last `start` handed over."""
        ...

    def send(self, mail_from: str, rcpt: str, message: bytes, pace: Pace = ...) -> SendResult:
        """One whole message: `start(wire(message))`, then `finish()`."""
        ...

    def close(self) -> None:
        """Let go of any connection; the next `start` opens a new one."""
        ...


class BatchTransport(Transport, Protocol):
    """A transport whose provider takes many messages in one request."""

    @property
    def batch_limit(self) -> int:
        """Messages per request, at most (Postmark 500, Resend 100)."""
        ...

    @property
    def idempotent(self) -> bool:
        """Whether the provider honours `send_batch`'s idempotency key (Resend): a batch that
        got no answer may then be sent again with the same key and items, never twice."""
        ...

    def send_batch(self, items: Sequence[Outgoing], idempotency_key: str,
                   pace: Pace = ...) -> list[SendResult | DeliveryError]:
        """One request carrying every item (at most `batch_limit`); `pace()` runs right before
        it. Returns one result per item, in the items' order (a provider's per-position
        reject is a DeliveryError in its place). A failure of the whole request raises
        DeliveryError: phase `request` (not sent), `response` (sent, no answer: ambiguous)
        or `api` (answered with an error for all). `idempotency_key` is sent where the
        provider honours one (Resend): retrying the same items with the same key never
        sends twice."""
        ...


class FollowingTransport(Transport, Protocol):
    """A transport that can let the next message's envelope ride behind a body (SMTP with
    PIPELINING; see broadside.delivery.smtp). The worker asks `follows()` before each batch."""

    def follows(self) -> bool:
        """Whether an envelope may ride behind a body (the server pipelines, or is not known
        yet not to); `start` writes none to a server that turns out not to."""
        ...

    @property
    def following(self) -> bool:
        """Whether an envelope is riding behind the last body, its replies unread."""
        ...

    def start(self, mail_from: str, rcpt: str, wire: bytes, pace: Pace = ...,
              then: tuple[str, str] | None = None) -> None:
        """`Transport.start`, with `then`'s (mail_from, rcpt) envelope riding behind the body."""
        ...

    def start_next(self, wire: bytes, then: tuple[str, str] | None = None,
                   pace: Pace = ...) -> None:
        """The rider's turn, after `finish()`: read its replies, then write its body (and
        `then`'s envelope behind it); raises `DeliveryError` as `start` does."""
        ...

    def abandon(self) -> None:
        """Give up the rider without sending it (drops the connection)."""
        ...


@dataclass(frozen=True)
class OneByOne:
    """A transport that takes one message at a time."""

    transport: Transport


@dataclass(frozen=True)
class InBatches:
    """A provider that takes a batch of messages in one request."""

    transport: BatchTransport


@dataclass(frozen=True)
class Riding:
    """SMTP that may let the next envelope ride behind a body."""

    transport: FollowingTransport


Shape = OneByOne | InBatches | Riding
