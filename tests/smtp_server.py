"""A real SMTP server for tests: aiosmtpd on a free loopback port that records every message
and can answer chosen recipients with chosen replies.

It offers PIPELINING (RFC 2920) in its EHLO unless told not to, as real MTAs do (aiosmtpd
1.4 reads pipelined commands correctly but does not advertise the extension by itself), so
the worker's pipelined conversation is the one the suite exercises; `Received.pipelined`
says whether a message's RCPT and DATA had already arrived with its MAIL."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    data: bytes
    at: float  # time.monotonic() when the conversation for it began (MAIL FROM)
    peer: tuple = ()  # the client's (host, port): which connection, so which sender
    pipelined: bool = False  # its RCPT and DATA were already read in with its MAIL
    followed: bool = False  # the next MAIL had already arrived with its end of DATA (it rode)

    @property
    def message(self) -> EmailMessage:
        return message_from_bytes(self.data, policy=policy.default)  # type: ignore[return-value]


@dataclass
class Script:
    """What the server answers. Keys are lower-cased recipient addresses."""

    # rcpt -> list of replies to give to successive RCPT TOs for that address, then accept
    rcpt_replies: dict[str, list[str]] = field(default_factory=dict)
    # replies to give at the end of DATA, one per message, before accepting again
    data_replies: list[str] = field(default_factory=list)
    # recipients whose DATA is accepted and then the connection cut before the reply
    drop_after_data: set[str] = field(default_factory=set)
    # called at the start of DATA with the envelope (to slow the server down, say)
    on_data: Callable[[object], None] | None = None


class RecordingHandler:
    def __init__(self, server: SmtpServer) -> None:
        self.server = server

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        envelope.broadside_mail_at = time.monotonic()
        # What the client had written after MAIL, already buffered: RCPT and DATA when it
        # pipelines (asyncio's StreamReader keeps unread bytes in `_buffer`).
        pending = bytes(getattr(server._reader, "_buffer", b""))
        envelope.broadside_pipelined = b"RCPT TO" in pending and b"DATA" in pending
        return "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        replies = self.server.script.rcpt_replies.get(address.lower())
        if replies:
            reply = replies.pop(0)
            with self.server.lock:
                self.server.rcpt_rejections.append((address.lower(), reply))
            return reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        started = getattr(envelope, "broadside_mail_at", time.monotonic())
        script = self.server.script
        if script.on_data:
            script.on_data(envelope)
        if script.data_replies:
            return script.data_replies.pop(0)
        # The next message's envelope, written behind this body's final dot, is already in.
        followed = b"MAIL FROM" in bytes(getattr(server._reader, "_buffer", b"")).upper()
        record = Received(envelope.mail_from, list(envelope.rcpt_tos), envelope.content, started,
                          tuple(session.peer or ()),
                          getattr(envelope, "broadside_pipelined", False), followed)
        with self.server.lock:
            self.server.messages.append(record)
        if any(r.lower() in script.drop_after_data for r in envelope.rcpt_tos):
            # The message was taken, but the client never hears so: the ambiguous case.
            server.transport.abort()
            return "250 OK"
        return "250 OK queued"


class PipeliningHandler(RecordingHandler):
    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        session.host_name = hostname  # this hook's duty in aiosmtpd's "new" EHLO style
        return [*responses[:-1], "250-PIPELINING", responses[-1]]


def paired(gaps: list[float]) -> list[float]:
    """Each gap, or, when longer, its average with the gap before it. The server thread
    records a conversation when it gets round to its MAIL FROM: when this test process shares
    the machine's two cores with another (the suite runs in parallel), one arrival can be
    noted a scheduling stall late, which shortens the gap after it by exactly as much as it
    lengthened the one before (a paced worker begins its next send on time). A note is never
    early, so a gap shortened that way is made whole by the one before it, and only by that
    one: averaging it with the gap after (a sliding pair) does not cancel the stall. Unpaced
    sends still show as a few ms, since the gap before them is a pace, not two."""
    return [max(gap, (before + gap) / 2) if i else gap
            for i, (before, gap) in enumerate(zip([0.0, *gaps], gaps, strict=False))]


class SmtpServer:
    """Start with `start()`; `reset()` between tests; `messages` holds what was accepted."""

    def __init__(self, auth: tuple[str, str] | None = None, pipelining: bool = True,
                 smtputf8: bool = True) -> None:
        self.port = free_port()
        self.host = "127.0.0.1"
        self.lock = threading.Lock()
        self.messages: list[Received] = []
        self.rcpt_rejections: list[tuple[str, str]] = []
        self.script = Script()
        self.auth = auth
        kwargs: dict = {}
        if auth is not None:
            kwargs = {"authenticator": self._authenticate, "auth_require_tls": False,
                      "auth_required": True}
        # RFC 6531: UTF-8 addresses and headers. aiosmtpd's Controller offers it unless told
        # not to; `smtputf8=False` is a server without it.
        kwargs["enable_SMTPUTF8"] = smtputf8
        handler = PipeliningHandler(self) if pipelining else RecordingHandler(self)
        self.controller = Controller(handler, hostname=self.host, port=self.port, **kwargs)

    def _authenticate(self, server, session, envelope, mechanism, auth_data):
        ok = isinstance(auth_data, LoginPassword) and (
            auth_data.login.decode(), auth_data.password.decode()
        ) == self.auth
        # handled=False makes aiosmtpd answer a real 535 on failure.
        return AuthResult(success=ok, handled=False)

    @property
    def url(self) -> str:
        if self.auth:
            return f"smtp://{self.auth[0]}:{self.auth[1]}@{self.host}:{self.port}"
        return f"smtp://{self.host}:{self.port}"

    def start(self) -> SmtpServer:
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()

    def reset(self) -> None:
        with self.lock:
            self.messages.clear()
            self.rcpt_rejections.clear()
        self.script = Script()

    def gaps(self) -> list[float]:
        """Seconds between the starts of consecutive accepted conversations."""
        with self.lock:
            times = sorted(m.at for m in self.messages)
        return [b - a for a, b in zip(times, times[1:], strict=False)]

    def paired_gaps(self) -> list[float]:
        """The accepted conversations' gaps, averaged in consecutive pairs (see `paired`)."""
        return paired(self.gaps())

    def recipients(self) -> list[str]:
        with self.lock:
            return [r.lower() for m in self.messages for r in m.rcpt_tos]

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        """Wait until at least `count` messages arrived (a condition, not a sleep)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.messages) >= count:
                    return list(self.messages)
            time.sleep(0.02)
        raise AssertionError(f"expected {count} messages, got {len(self.messages)}")


class Scripted:
    """One connection at a time on a loopback socket; `answer(line)` gives the reply to each
    command line (None: close the connection). Records every line and body it read. `finals`:
    the replies to the next ends of DATA, in turn (None: close the connection), then 250."""

    def __init__(self, answer: Callable[[bytes], bytes | None], pipelining: bool = True) -> None:
        self.answer = answer
        self.pipelining = pipelining
        self.finals: list[bytes | None] = []
        self.connections = 0
        self.lines: list[bytes] = []
        self.bodies: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"smtp://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn, conn.makefile("rb") as reader:
                try:
                    self._session(reader, conn)
                except OSError:  # the client went (a dropped connection): its session is over
                    pass

    def _session(self, reader, conn: socket.socket) -> None:
        conn.sendall(b"220 scripted ESMTP\r\n")
        while line := reader.readline():
            line = line.rstrip(b"\r\n")
            self.lines.append(line)
            verb = line[:4].upper()
            if verb == b"EHLO":
                extra = b"250-PIPELINING\r\n" if self.pipelining else b""
                conn.sendall(b"250-scripted\r\n" + extra + b"250 8BITMIME\r\n")
                continue
            reply = self.answer(line)
            if reply is None:
                return
            conn.sendall(reply + b"\r\n")
            if reply.startswith(b"354"):
                body = b""
                while (part := reader.readline()) and part != b".\r\n":
                    body += part
                if not part:
                    return  # cut mid-DATA: nothing is kept
                self.bodies.append(body)
                final = self.finals.pop(0) if self.finals else b"250 OK"
                if final is None:
                    return
                conn.sendall(final + b"\r\n")

    def close(self) -> None:
        self.listener.close()


def default(line: bytes) -> bytes | None:
    return b"354 go ahead" if line.upper() == b"DATA" else b"250 OK"
