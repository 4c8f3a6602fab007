"""Transports: SMTP (plain, STARTTLS, implicit TLS) with one reused connection, and the outbox.

The SMTP conversation is driven step by step (MAIL, RCPT, DATA, body, final reply) so that
every failure says *where* it happened: a failure before the body is on the wire proves the
message was not accepted; a failure after it is ambiguous (invariant 5).

When the server's EHLO offers PIPELINING (RFC 2920), MAIL, RCPT and DATA go in one write and
their three replies are read in order: one round trip instead of three before the body. The
replies still say where a failure happened (the first refused of mail | rcpt |
data-command), and the body is written only after a 354 that follows an accepted MAIL and
RCPT; so everything before the body stays provably not accepted, exactly as in lock-step.
A refused RCPT with the DATA already sent: the server answers DATA 503/554 (RFC 2920 3.1),
we send RSET and keep the connection. Should a server answer 354 anyway after a refused
MAIL or RCPT, the connection is dropped without a final dot: an unterminated DATA is never
delivered (RFC 5321 4.1.1.4), and no empty message goes out.

At full speed (no pace to keep) the worker also lets the next message's MAIL/RCPT/DATA ride
in the same write as the previous body, behind its final dot (RFC 2920 3.1: message content
may begin a group): `start(..., then=...)` writes them, `finish()` reads the body's verdict,
and `start_next()` reads the rider's three replies and writes its body. The server answers
the body and the next envelope together, so the one round trip left per message overlaps the
worker's own work instead of following it. What this moves, and why each is safe:
- the rider's re-check is made before the previous body is written (jobs.sending): it is still
  the last read before that person's MAIL FROM, which follows it in the same write;
- the rider is never sent on a verdict that says stop: when `finish()` says so, or the worker
  holds, `abandon()` drops the connection without a final dot (an unterminated DATA is never
  delivered, RFC 5321 4.1.1.4), and the rider's row goes back to pending, not attempted;
- a refused body is not followed by RSET (the transaction is over; RSET would land behind the
  rider's envelope), except 421, which closes the connection and the rider with it.
Only `start` and `start_next` write a body, each only after a 354 that follows an accepted
MAIL and RCPT, so everything before a body stays provably not accepted (invariant 5).
"""

from __future__ import annotations

import os
import re
import smtplib
import ssl
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn, Protocol
from urllib.parse import unquote, urlsplit

CRLF = b"\r\n"


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

    phase, for SMTP: connect | tls | auth | mail | rcpt | data-command | data-body | data-end;
    for a provider's HTTP API: `request` (the request could not be sent: refused, DNS, TLS,
    a timeout while connecting; provably not accepted), `response` (the request was sent and
    no answer came: ambiguous, like data-body), `api` (the provider answered with an error:
    `code` is the HTTP status, `provider_code` the provider's own code or exception name).
    network: True when the connection failed (refused, reset, timed out) rather than replied.
    provider: the transport's scheme for HTTP APIs (ses, postmark, resend, mailgun).
    retry_after: seconds the provider asked us to wait (a 429's Retry-After), if it said.
    The transport only reports; jobs.classify decides what each answer means (invariant 6).
    """

    def __init__(self, phase: str, code: int | None, reply: str, *, network: bool = False,
                 provider: str | None = None, provider_code: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(f"{phase}: {code or ''} {reply}".strip())
        self.phase = phase
        self.code = code
        self.reply = reply
        self.network = network
        self.provider = provider
        self.provider_code = provider_code
        self.retry_after = retry_after


class Transport(Protocol):
    """What the worker asks of a transport (`broadside.delivery.providers.make_transport` returns one).

    A broadcast sends in two halves, `start` then `finish`, so the next message can be prepared
    while the server processes this one; a transactional message uses `send`, both at once.
    Each raises `DeliveryError` when the message was not (provably or possibly) accepted.
    """

    @property
    def description(self) -> str:
        """Where mail goes, for the worker's log (never a password)."""
        ...

    # Messages per request: 1 for SMTP, the outbox, SES and Mailgun (start/finish/send);
    # more for providers with a batch endpoint (Postmark 500, Resend 100: send_batch).
    batch_limit: int

    def check(self) -> str:
        """Connect and authenticate as configured, send nothing (for `doctor`); raises
        DeliveryError when that fails, returns a one-line description when it works."""
        ...

    def wire(self, message: bytes) -> bytes:
        """The bytes `start` writes for `message` (for SMTP: dot-stuffed, ending the DATA)."""
        ...

    def start(
        self, mail_from: str, rcpt: str, wire: bytes, pace: Callable[[], object] = ...
    ) -> None:
        """Hand one message (`wire` comes from `wire()`) over; `pace()` runs right before."""
        ...

    def finish(self) -> SendResult:
        """The verdict on the message the last `start` handed over."""
        ...

    def send(
        self, mail_from: str, rcpt: str, message: bytes, pace: Callable[[], object] = ...
    ) -> SendResult:
        """One whole message: `start(wire(message))`, then `finish()`."""
        ...

    def close(self) -> None:
        """Let go of any connection; the next `start` opens a new one."""
        ...


class BatchTransport(Transport, Protocol):
    """A transport whose provider takes many messages in one request (batch_limit > 1)."""

    def send_batch(self, items: Sequence[Outgoing], idempotency_key: str,
                   pace: Callable[[], object] = ...) -> list[SendResult | DeliveryError]:
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
    PIPELINING; see this module's docstring). The worker asks `follows()` before each batch."""

    def follows(self) -> bool:
        """Whether an envelope may ride behind a body (the server pipelines, or is not known
        yet not to); `start` writes none to a server that turns out not to."""
        ...

    @property
    def following(self) -> bool:
        """Whether an envelope is riding behind the last body, its replies unread."""
        ...

    def start(self, mail_from: str, rcpt: str, wire: bytes, pace: Callable[[], object] = ...,
              then: tuple[str, str] | None = None) -> None:
        """`Transport.start`, with `then`'s (mail_from, rcpt) envelope riding behind the body."""
        ...

    def start_next(self, wire: bytes, then: tuple[str, str] | None = None,
                   pace: Callable[[], object] = ...) -> None:
        """The rider's turn, after `finish()`: read its replies, then write its body (and
        `then`'s envelope behind it); raises `DeliveryError` as `start` does."""
        ...

    def abandon(self) -> None:
        """Give up the rider without sending it (drops the connection)."""
        ...


def _text(reply: bytes | str) -> str:
    return reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)


def _envelope(mail_from: str, rcpt: str) -> bytes:
    """MAIL, RCPT and DATA as one pipelined group; an address that cannot be written raises
    (phase mail or rcpt) before anything is."""
    _plain_address(mail_from, "mail")
    _plain_address(rcpt, "rcpt")
    return f"MAIL FROM:<{mail_from}>\r\nRCPT TO:<{rcpt}>\r\nDATA\r\n".encode("ascii")


def _plain_address(address: str, verb: str) -> None:
    """Refused before anything is sent, as a server without SMTPUTF8 would refuse it."""
    if "\r" in address or "\n" in address or not address.isascii():
        raise DeliveryError(
            verb, 553, "5.1.3 address not deliverable by this sender (line break or non-ASCII characters)"
        )


_LINE_STARTING_WITH_DOT = re.compile(rb"\n\.")

# The pipelined group's replies, in order, and the codes that accept each step.
_PIPELINED = ("mail", "rcpt", "data-command")
_ACCEPTED = {"mail": (250,), "rcpt": (250, 251), "data-command": (354,)}


class SmtpTransport:
    batch_limit = 1

    def __init__(self, url: str, timeout: float = 30.0, local_hostname: str | None = None,
                 pipelining: bool = True) -> None:
        parts = urlsplit(url)
        self.scheme = parts.scheme
        self.host = parts.hostname or "localhost"
        default_port = {"smtp": 25, "smtp+starttls": 587, "smtps": 465}[self.scheme]
        self.port = parts.port or default_port
        self.username = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password) if parts.password else None
        self.timeout = timeout
        self.local_hostname = local_hostname
        self.conn: smtplib.SMTP | None = None
        self._awaiting = False  # a message's final reply is still to be read
        self._following = False  # an envelope rides behind that body, its replies unread
        self._rider_refused: DeliveryError | None = None  # its addresses could not be written
        self.pipelining = pipelining  # used when the server offers it (False: never)

    @property
    def description(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def _connect(self) -> smtplib.SMTP:
        # Made only where TLS is used: loading the system's certificates is a few ms.
        context = ssl.create_default_context() if self.scheme != "smtp" else None
        try:
            if self.scheme == "smtps":
                conn: smtplib.SMTP = smtplib.SMTP_SSL(
                    self.host,
                    self.port,
                    timeout=self.timeout,
                    context=context,
                    local_hostname=self.local_hostname,
                )
            else:
                conn = smtplib.SMTP(
                    self.host, self.port, timeout=self.timeout, local_hostname=self.local_hostname
                )
        except ssl.SSLError as exc:
            raise DeliveryError("tls", None, f"TLS handshake failed: {exc}") from None
        except smtplib.SMTPConnectError as exc:
            raise DeliveryError("connect", exc.smtp_code, _text(exc.smtp_error), network=True) from None
        except (OSError, smtplib.SMTPException) as exc:
            raise DeliveryError(
                "connect", None, f"could not connect to {self.description}: {exc}", network=True
            ) from None
        try:
            conn.ehlo_or_helo_if_needed()
            if self.scheme == "smtp+starttls":
                if not conn.has_extn("starttls"):
                    raise DeliveryError("tls", None, "the server does not offer STARTTLS")
                conn.starttls(context=context)
                conn.ehlo()
            if self.username is not None:
                conn.login(self.username, self.password or "")
        except DeliveryError:
            self._close(conn)
            raise
        except smtplib.SMTPAuthenticationError as exc:
            self._close(conn)
            raise DeliveryError("auth", exc.smtp_code, _text(exc.smtp_error)) from None
        except smtplib.SMTPNotSupportedError as exc:
            self._close(conn)
            raise DeliveryError("auth", None, f"the server does not support this: {exc}") from None
        except ssl.SSLError as exc:
            self._close(conn)
            raise DeliveryError("tls", None, f"TLS failed: {exc}") from None
        except smtplib.SMTPResponseException as exc:
            self._close(conn)
            raise DeliveryError("connect", exc.smtp_code, _text(exc.smtp_error)) from None
        except (OSError, smtplib.SMTPException) as exc:
            self._close(conn)
            raise DeliveryError(
                "connect", None, f"connection lost while greeting: {exc}", network=True
            ) from None
        return conn

    @staticmethod
    def _close(conn: smtplib.SMTP | None) -> None:
        if conn is None:
            return
        try:
            conn.close()
        except Exception:  # closing a broken socket may fail in any way
            pass

    def close(self) -> None:
        if self._following:
            self._drop()  # a QUIT behind a rider's DATA would be read as message text
        if self.conn is not None:
            try:
                self.conn.quit()
            except Exception:
                pass
            self._close(self.conn)
            self.conn = None

    def _drop(self) -> None:
        self._close(self.conn)
        self.conn = None
        self._awaiting = False
        self._following = False
        self._rider_refused = None

    def follows(self) -> bool:
        """Whether an envelope may ride behind a body: pipelining not turned off here, and the
        server offers it; before a connection is open that is not known yet, and assumed
        (`start` asks again once connected, and writes no rider to a server without it)."""
        return self.pipelining and (self.conn is None or self.conn.has_extn("pipelining"))

    @property
    def following(self) -> bool:
        return self._following or self._rider_refused is not None

    def abandon(self) -> None:
        """Give up the envelope riding behind the last body, after that body's `finish()`: its
        DATA may already have its 354, and a DATA never ended by a dot is never delivered
        (RFC 5321 4.1.1.4), so the connection goes; the next `start` opens a new one."""
        self._rider_refused = None
        if self._following:
            self._drop()

    def _reset(self) -> None:
        """RSET after a refused step so the reused connection starts clean."""
        try:
            assert self.conn is not None
            self.conn.rset()
        except Exception:
            self._drop()

    def _step(self, phase: str, command) -> tuple[int, str]:
        try:
            code, reply = command()
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            self._drop()
            raise DeliveryError(phase, None, f"connection lost: {exc}", network=True) from None
        return code, _text(reply)

    @staticmethod
    def wire(message: bytes) -> bytes:
        """The DATA payload: dot-stuffed, ending with CRLF "." CRLF (RFC 5321 4.5.2).
        (A one-line pattern, not a multi-line regex: ~150 µs for 14 KB. The regex engine
        finds "\n." in ~5 µs where `bytes.replace` takes ~13 to find none and ~28 with one:
        it searches for its two-byte needle at about a nanosecond a byte.)"""
        body = _LINE_STARTING_WITH_DOT.sub(b"\n..", message)
        if body.startswith(b"."):
            body = b"." + body
        if not body.endswith(CRLF):
            body += CRLF
        return body + b"." + CRLF

    def send(
        self, mail_from: str, rcpt: str, message: bytes, pace: Callable[[], object] = lambda: None
    ) -> SendResult:
        """One whole mail transaction (`start`, then `finish`)."""
        self.start(mail_from, rcpt, self.wire(message), pace)
        return self.finish()

    def start(
        self, mail_from: str, rcpt: str, wire: bytes, pace: Callable[[], object] = lambda: None,
        then: tuple[str, str] | None = None,
    ) -> None:
        """MAIL, RCPT, DATA and the body through its final dot (`wire` comes from `wire()`);
        the server's verdict is read by `finish()`, so the caller can prepare the next message
        while the server processes this one. `pace()` runs right before MAIL FROM, after any
        (re)connect, so the spacing the pacer promises is the spacing the server sees.
        `then` (mail_from, rcpt): the next message's envelope rides behind the body in the
        same write (only when `follows()`); its turn is `start_next`."""
        if self._awaiting or self._following:
            # The previous message's reply (or its rider's) was never read (its caller failed
            # in between): the stream is out of step, so start on a fresh connection.
            self._drop()
        self._rider_refused = None  # a rider never written, given up
        reused = self.conn is not None
        if self.conn is None:
            try:
                self.conn = self._connect()
            finally:
                pace()  # a failed connection attempt is paced like any other attempt
        else:
            pace()
        if self.pipelining and self.conn.has_extn("pipelining"):
            self._envelope_pipelined(mail_from, rcpt, reused, pace)
        else:
            self._envelope_lockstep(mail_from, rcpt, reused, pace)
        self._body(wire, then, pace)

    def start_next(self, wire: bytes, then: tuple[str, str] | None = None,
                   pace: Callable[[], object] = lambda: None) -> None:
        """The turn of the message whose envelope rode behind the previous body, after that
        body's `finish()`: read its three replies (a refusal raises, as in `start`: nothing
        of it was sent), then write its body, with `then`'s envelope riding behind."""
        assert not self._awaiting, "start_next() before finish()"
        refused, self._rider_refused = self._rider_refused, None
        if refused is not None:
            raise refused
        if not self._following or self.conn is None:
            raise DeliveryError("mail", None, "connection lost before this message's turn", network=True)
        self._following = False
        self._accept(self._replies())
        self._body(wire, then, pace)

    def _body(self, wire: bytes, then: tuple[str, str] | None, pace: Callable[[], object]) -> None:
        """Write the body after its 354, and `then`'s envelope behind it in the same write."""
        assert self.conn is not None
        rider = b""
        if then is not None and self.follows():  # else it waits for a `start` of its own
            try:
                rider = _envelope(*then)
            except DeliveryError as refusal:  # an address that cannot be written: kept for its turn
                self._rider_refused = refusal
            else:
                try:
                    pace()  # right before the rider's MAIL FROM goes out (the lease: invariant 1)
                except BaseException:
                    self._drop()  # nothing more goes out: this DATA, never ended, delivers nothing
                    raise
        # From here the message is on the wire: a lost connection is ambiguous (invariant 5).
        try:
            self.conn.send(wire + rider if rider else wire)
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            self._lost_after_data(exc)
        self._awaiting = True
        self._following = bool(rider)

    def _envelope_lockstep(self, mail_from: str, rcpt: str, reused: bool,
                           pace: Callable[[], object]) -> None:
        """MAIL, RCPT, DATA, each waiting for its reply (a server without PIPELINING). Both
        addresses are checked before MAIL, so a refused one never leaves a transaction open."""
        _plain_address(mail_from, "mail")
        _plain_address(rcpt, "rcpt")
        try:
            code, reply = self._step("mail", lambda: self._command(f"FROM:<{mail_from}>", "mail"))
        except DeliveryError:
            if not reused:
                raise
            # The idle connection was closed by the server; nothing was sent: reconnect once.
            self.conn = self._connect()
            pace()
            code, reply = self._step("mail", lambda: self._command(f"FROM:<{mail_from}>", "mail"))
        if code != 250:
            self._after_refusal(code)
            raise DeliveryError("mail", code, reply)
        code, reply = self._step("rcpt", lambda: self._command(f"TO:<{rcpt}>", "rcpt"))
        if code not in (250, 251):
            self._after_refusal(code)
            raise DeliveryError("rcpt", code, reply)
        conn = self.conn
        assert conn is not None
        code, reply = self._step("data-command", lambda: conn.docmd("data"))
        if code != 354:
            self._after_refusal(code)
            raise DeliveryError("data-command", code, reply)

    def _envelope_pipelined(self, mail_from: str, rcpt: str, reused: bool,
                            pace: Callable[[], object]) -> None:
        """MAIL, RCPT and DATA in one write (RFC 2920), then their three replies in order.
        Returns only after a 354 that follows an accepted MAIL and RCPT: the body may go."""
        group = _envelope(mail_from, rcpt)  # an address is refused before anything is written
        try:
            replies = self._group(group)
        except DeliveryError as error:
            if not reused or error.code is not None or error.phase != "mail":
                raise
            # No reply at all on a reused connection: the server closed it while idle and
            # took nothing (no 354, no body). Reconnect once, paced like any attempt.
            self.conn = self._connect()
            pace()
            replies = self._group(group)
        self._accept(replies)

    def _accept(self, replies: list[tuple[str, int, str]]) -> None:
        """Return when MAIL and RCPT were accepted and DATA answered 354: the body may go.
        Otherwise raise the first refusal, the connection kept clean (RSET) or dropped."""
        refusal = next((DeliveryError(phase, code, reply) for phase, code, reply in replies
                        if code not in _ACCEPTED[phase]), None)
        if refusal is None:
            return
        if replies[-1][1] == 354 or any(code == 421 for _, code, _ in replies):
            # A 354 after a refused MAIL or RCPT: no body may follow, and an unterminated DATA
            # is never delivered, so the connection goes. 421: the server is closing it.
            self._drop()
        else:
            self._reset()
        raise refusal

    def _group(self, group: bytes) -> list[tuple[str, int, str]]:
        """Write MAIL/RCPT/DATA at once; read the three replies in order."""
        assert self.conn is not None
        try:
            self.conn.send(group)
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            self._drop()
            raise DeliveryError("mail", None, f"connection lost: {exc}", network=True) from None
        return self._replies()

    def _replies(self) -> list[tuple[str, int, str]]:
        """The three replies to a MAIL/RCPT/DATA group, in order. A lost connection raises the
        first refusal read before it, else the phase whose reply was awaited (network):
        nothing of the body was sent, so each proves the message not accepted."""
        assert self.conn is not None
        replies: list[tuple[str, int, str]] = []
        try:
            for phase in _PIPELINED:
                code, raw = self.conn.getreply()
                replies.append((phase, code, _text(raw)))
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            self._drop()
            for phase, code, reply in replies:
                if code not in _ACCEPTED[phase]:  # refused before the connection went
                    raise DeliveryError(phase, code, reply) from None
            phase = _PIPELINED[len(replies)]
            raise DeliveryError(phase, None, f"connection lost: {exc}", network=True) from None
        return replies

    def finish(self) -> SendResult:
        """The server's reply to the end of DATA of the message `start` wrote."""
        assert self._awaiting and self.conn is not None, "finish() without start()"
        self._awaiting = False
        try:
            code, raw = self.conn.getreply()
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            self._lost_after_data(exc)
        reply = _text(raw)
        if code != 250:
            if code == 421 or not self._following:
                self._after_refusal(code)
            # else: the transaction is over, and an RSET now would land behind the rider
            raise DeliveryError("data-end", code, reply)
        return SendResult(code, reply)

    def _lost_after_data(self, exc: Exception) -> NoReturn:
        self._drop()
        raise DeliveryError("data-body", None, f"connection lost after DATA: {exc}", network=True) from None

    def _command(self, argument: str, verb: str) -> tuple[int, bytes]:
        """MAIL/RCPT with addresses we validated ourselves (smtplib's own quoting re-parses
        each address, a noticeable cost per message)."""
        _plain_address(argument, verb)
        assert self.conn is not None
        self.conn.putcmd(verb, argument)
        return self.conn.getreply()

    def _after_refusal(self, code: int) -> None:
        if code == 421:
            self._drop()  # the server is closing the channel
        else:
            self._reset()

    def check(self) -> str:
        """Connect, EHLO, STARTTLS/TLS and AUTH as configured, send nothing (for `doctor`)."""
        conn = self._connect()
        try:
            name = _text(conn.ehlo_resp or b"").splitlines()[0] if conn.ehlo_resp else self.host
        finally:
            try:
                conn.quit()
            except Exception:
                pass
            self._close(conn)
        return name


class OutboxTransport:
    """No SMTP configured: each message becomes an .eml file under instance/outbox/.

    A file's name starts with the moment it was written, from one clock reading to the
    nanosecond (`20261201T100203-123456789-<rcpt>.eml`), so sorting the names gives the order
    they were written in: the System page lists the newest by name. A clock that repeats or
    steps back never reorders or overwrites: each name is at least a nanosecond after this
    transport's previous one, and a name already taken (another identity's worker process,
    the same person, the same nanosecond) moves on by one more.
    """

    description = "outbox"
    batch_limit = 1

    def __init__(self, folder: Path, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self.folder = Path(folder)
        self._clock_ns = clock_ns
        self._last_ns = 0
        self._result: SendResult | None = None

    @staticmethod
    def wire(message: bytes) -> bytes:
        return message  # a file, not an SMTP stream: nothing to stuff

    def start(
        self, mail_from: str, rcpt: str, wire: bytes, pace: Callable[[], object] = lambda: None
    ) -> None:
        self._result = self.send(mail_from, rcpt, wire, pace)

    def finish(self) -> SendResult:
        assert self._result is not None, "finish() without start()"
        result, self._result = self._result, None
        return result

    @staticmethod
    def _name(ns: int, safe_rcpt: str) -> str:
        seconds, fraction = divmod(ns, 10**9)
        return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(seconds))}-{fraction:09d}-{safe_rcpt}.eml"

    def send(
        self, mail_from: str, rcpt: str, message: bytes, pace: Callable[[], object] = lambda: None
    ) -> SendResult:
        pace()
        self.folder.mkdir(parents=True, exist_ok=True)
        safe_rcpt = re.sub(r"[^A-Za-z0-9@._-]", "_", rcpt)[:80]
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(message)
        ns = max(self._clock_ns(), self._last_ns + 1)  # one reading: the date and the fraction
        while (final := self.folder / self._name(ns, safe_rcpt)).exists():
            ns += 1  # another worker process wrote to this person in the same nanosecond
        os.replace(tmp, final)  # atomic: a reader never sees half a message
        self._last_ns = ns
        return SendResult(250, f"written to {final.name}")

    def close(self) -> None:
        pass

    def check(self) -> str:
        self.folder.mkdir(parents=True, exist_ok=True)
        return f"outbox at {self.folder}"
