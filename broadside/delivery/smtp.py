"""SMTP (plain, STARTTLS, implicit TLS) with one reused connection: a `FollowingTransport`
(broadside.delivery.transports).

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
- the rider's re-check is made before the previous body is written (jobs.riding): it is still
  the last read before that person's MAIL FROM, which follows it in the same write;
- the rider is never sent on a verdict that says stop: when `finish()` says so, or the worker
  holds, `abandon()` drops the connection without a final dot (an unterminated DATA is never
  delivered, RFC 5321 4.1.1.4), and the rider's row goes back to pending, not attempted;
- a refused body is not followed by RSET (the transaction is over; RSET would land behind the
  rider's envelope), except 421, which closes the connection and the rider with it.
Only `start` and `start_next` write a body, each only after a 354 that follows an accepted
MAIL and RCPT, so everything before a body stays provably not accepted (invariant 5).

An identity that signs with DKIM gives the transport a `signer`: each body is signed after its
pace's wait, once its DATA has its 354, just before the body is written (`_signed`), so the
signing never stands between the pace and MAIL FROM; a ridden message (paced before its
envelope rode out) is signed at its turn, in `start_next`.
"""

from __future__ import annotations

import smtplib
from typing import NoReturn
from urllib.parse import unquote, urlsplit

from broadside.delivery import smtp_wire
from broadside.delivery.smtp_connection import close_quietly, open_connection, text
from broadside.delivery.smtp_envelope import Offers, envelope_lines
from broadside.delivery.transports import (
    DeliveryError,
    OneByOne,
    Pace,
    Riding,
    SendResult,
    network_words,
)
from broadside.mail.dkim_signing import DkimSigner

# The pipelined group's replies, in order, and the codes that accept each step.
_PIPELINED = ("mail", "rcpt", "data-command")
_ACCEPTED = {"mail": (250,), "rcpt": (250, 251), "data-command": (354,)}


class SmtpTransport:

    def __init__(self, url: str, timeout: float = 30.0, local_hostname: str | None = None,
                 pipelining: bool = True, signer: DkimSigner | None = None) -> None:
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
        self.signer = signer  # DKIM: each body signed after its pace, before it is written
        self.offered_smtputf8: bool | None = None  # what the last `check()` was told

    @property
    def description(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def shape(self) -> Riding | OneByOne:
        """Riding unless pipelining is turned off here (whether the server offers it is asked
        before each batch: `follows()`)."""
        return Riding(self) if self.pipelining else OneByOne(self)

    def _connect(self) -> smtplib.SMTP:
        return open_connection(self.scheme, self.host, self.port, self.username, self.password,
                               timeout=self.timeout, local_hostname=self.local_hostname)

    @staticmethod
    def _close(conn: smtplib.SMTP | None) -> None:
        close_quietly(conn)

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
            raise DeliveryError(phase, None, self._lost(exc), network=True) from None
        return code, text(reply)

    @staticmethod
    def wire(message: bytes) -> bytes:
        """The DATA payload (broadside.delivery.smtp_wire), unsigned: it is signed in `start`
        or `start_next`, after the pace's wait."""
        return smtp_wire.wire(message)

    def send(
        self, mail_from: str, rcpt: str, message: bytes, pace: Pace = lambda: None
    ) -> SendResult:
        """One whole mail transaction (`start`, then `finish`)."""
        self.start(mail_from, rcpt, self.wire(message), pace)
        return self.finish()

    def start(
        self, mail_from: str, rcpt: str, wire: bytes, pace: Pace = lambda: None,
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
        self._body(self._signed(wire), then, pace)

    def start_next(self, wire: bytes, then: tuple[str, str] | None = None,
                   pace: Pace = lambda: None) -> None:
        """The turn of the message whose envelope rode behind the previous body, after that
        body's `finish()`: read its three replies (a refusal raises, as in `start`: nothing
        of it was sent), then write its body, with `then`'s envelope riding behind."""
        assert not self._awaiting, "start_next() before finish()"
        refused, self._rider_refused = self._rider_refused, None
        if refused is not None:
            raise refused
        if not self._following or self.conn is None:
            raise DeliveryError("mail", None, "the connection to the mail server was lost "
                                "before this message's turn", network=True)
        self._following = False
        self._accept(self._replies())
        self._body(self._signed(wire), then, pace)  # paced before its MAIL FROM rode out

    def _signed(self, wire: bytes) -> bytes:
        """DKIM, after the pace's wait and the 354, before the body: signing never stands
        between the pace and MAIL FROM, so the spacing the server sees stays the pace's. A key
        that cannot sign drops the connection (the DATA, never ended by a dot, delivers
        nothing) and raises Broadside's own channel-wide refusal."""
        try:
            return smtp_wire.signed(self.signer, wire)
        except DeliveryError:
            self._drop()
            raise

    def _body(self, wire: bytes, then: tuple[str, str] | None, pace: Pace) -> None:
        """Write the body after its 354, and `then`'s envelope behind it in the same write."""
        assert self.conn is not None
        rider = b""
        if then is not None and self.follows():  # else it waits for a `start` of its own
            try:
                rider = self._envelope(*then)
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
                           pace: Pace) -> None:
        """MAIL, RCPT, DATA, each waiting for its reply (a server without PIPELINING). Both
        addresses are checked before MAIL, so a refused one never leaves a transaction open."""
        assert self.conn is not None
        mail, to = envelope_lines(mail_from, rcpt, self._offers())
        try:
            code, reply = self._step("mail", lambda: self._command(mail))
        except DeliveryError:
            if not reused:
                raise
            # The idle connection was closed by the server; nothing was sent: reconnect once.
            self.conn = self._connect()
            pace()
            code, reply = self._step("mail", lambda: self._command(mail))
        if code != 250:
            self._after_refusal(code)
            raise DeliveryError("mail", code, reply)
        code, reply = self._step("rcpt", lambda: self._command(to))
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
                            pace: Pace) -> None:
        """MAIL, RCPT and DATA in one write (RFC 2920), then their three replies in order.
        Returns only after a 354 that follows an accepted MAIL and RCPT: the body may go."""
        group = self._envelope(mail_from, rcpt)  # an address is refused before anything is written
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
            raise DeliveryError("mail", None, self._lost(exc), network=True) from None
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
                replies.append((phase, code, text(raw)))
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            self._drop()
            for phase, code, reply in replies:
                if code not in _ACCEPTED[phase]:  # refused before the connection went
                    raise DeliveryError(phase, code, reply) from None
            phase = _PIPELINED[len(replies)]
            raise DeliveryError(phase, None, self._lost(exc), network=True) from None
        return replies

    def finish(self) -> SendResult:
        """The server's reply to the end of DATA of the message `start` wrote."""
        assert self._awaiting and self.conn is not None, "finish() without start()"
        self._awaiting = False
        try:
            code, raw = self.conn.getreply()
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            self._lost_after_data(exc)
        reply = text(raw)
        if code != 250:
            if code == 421 or not self._following:
                self._after_refusal(code)
            # else: the transaction is over, and an RSET now would land behind the rider
            raise DeliveryError("data-end", code, reply)
        return SendResult(code, reply)

    def _lost_after_data(self, exc: Exception) -> NoReturn:
        self._drop()
        raise DeliveryError("data-body", None, "the connection to the mail server was lost after "
                            f"the message was handed over ({network_words(exc, self.description)})",
                            network=True) from None

    def _lost(self, exc: Exception) -> str:  # before the body: nothing was accepted
        return ("the connection to the mail server was lost before the message was sent "
                f"({network_words(exc, self.description)})")

    def _command(self, line: bytes) -> tuple[int, bytes]:
        """MAIL/RCPT as `envelope_lines` wrote them (smtplib's own quoting re-parses each
        address, a noticeable cost per message, and writes ASCII only)."""
        assert self.conn is not None
        self.conn.send(line)
        return self.conn.getreply()

    def _offers(self) -> Offers:
        assert self.conn is not None
        return Offers(self.conn.has_extn("smtputf8"), self.conn.has_extn("8bitmime"),
                      f"the mail server {self.description}")

    def _envelope(self, mail_from: str, rcpt: str) -> bytes:
        """MAIL, RCPT and DATA as one pipelined group; an address that cannot be written to
        this server raises (phase mail or rcpt) before anything is."""
        mail, to = envelope_lines(mail_from, rcpt, self._offers())
        return mail + to + b"DATA\r\n"

    def _after_refusal(self, code: int) -> None:
        if code == 421:
            self._drop()  # the server is closing the channel
        else:
            self._reset()

    def check(self) -> str:
        """Connect, EHLO, STARTTLS/TLS and AUTH as configured, send nothing (for `doctor`)."""
        conn = self._connect()
        self.offered_smtputf8 = conn.has_extn("smtputf8")  # for broadside.delivery.identities.international
        try:
            name = text(conn.ehlo_resp or b"").splitlines()[0] if conn.ehlo_resp else self.host
        finally:
            try:
                conn.quit()
            except Exception:
                pass
            self._close(conn)
        return name
