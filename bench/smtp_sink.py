"""SMTP servers for the benchmarks, each in a process of its own (so neither shares a GIL
with the client being measured), steered by one-line commands on stdin.

Two kinds:

- `record`: aiosmtpd (the server the tests use), timing each conversation and keeping each
  message so the bare smtplib loop can replay exactly what the worker sent.
- `discard`: a minimal asyncio responder that answers 220/250/354/250/221 at once and keeps
  nothing but timings: the pipeline's own ceiling, with the server taken out of the way.

`record` and `discard` offer PIPELINING (RFC 2920) as real MTAs do; both read a pipelined
MAIL/RCPT/DATA group in order and answer each command (the discard loop takes every complete
line in its buffer; aiosmtpd 1.4 reads line by line). The smtplib peer never pipelines. The
`stamp` server (pacing) does not offer it: it needs each MAIL alone in its segment.

Times are `time.monotonic()`, which on Linux is one clock for every process on the machine,
so the parent can compare them with its own (a kill, a lease change).

Commands (one per line, answered with one JSON line): `count`, `stats`, `reset`,
`dump PATH` (pickle of [(mail_from, rcpt_tos, data)]), `quit`.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path


class Timings:
    """MAIL FROM arrival and end-of-DATA times, one pair per accepted message."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.mail_at: list[float] = []
            self.end_at: list[float] = []
            self.messages: list[tuple[str, list[str], bytes]] = []

    def record(self, mail_at: float, end_at: float, envelope: tuple | None = None) -> None:
        with self.lock:
            self.mail_at.append(mail_at)
            self.end_at.append(end_at)
            if self.keep and envelope is not None:
                self.messages.append(envelope)

    def summary(self) -> dict:
        with self.lock:
            return {"count": len(self.end_at), "mail_at": list(self.mail_at), "end_at": list(self.end_at)}


# ---------------------------------------------------------------- record: aiosmtpd

def serve_record(timings: Timings) -> tuple[int, object]:
    from aiosmtpd.controller import Controller

    class Handler:
        async def handle_EHLO(self, server, session, envelope, hostname, responses):
            # aiosmtpd reads pipelined commands in order but does not offer PIPELINING itself.
            session.host_name = hostname
            return [*responses[:-1], "250-PIPELINING", responses[-1]]

        async def handle_MAIL(self, server, session, envelope, address, mail_options):
            envelope.mail_from = address
            envelope.bench_mail_at = time.monotonic()
            return "250 OK"

        async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
            envelope.rcpt_tos.append(address)
            return "250 OK"

        async def handle_DATA(self, server, session, envelope):
            timings.record(envelope.bench_mail_at, time.monotonic(),
                           (envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
            return "250 OK queued"

    port = free_port()
    controller = Controller(Handler(), hostname="127.0.0.1", port=port, data_size_limit=0)
    controller.start()
    return port, controller.stop


# ---------------------------------------------------------------- discard: asyncio streams

async def _discard_session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           timings: Timings) -> None:
    """Line handling only: commands end at CRLF, a message ends at CRLF.CRLF."""
    writer.write(b"220 bench discard ESMTP\r\n")
    buffer = b""
    in_data = False
    at_data_start = False
    mail_at = 0.0
    try:
        while True:
            chunk = await reader.read(262144)
            if not chunk:
                return
            buffer += chunk
            while True:
                if in_data:
                    if at_data_start and buffer.startswith(b".\r\n"):
                        end = 0
                    else:
                        end = buffer.find(b"\r\n.\r\n")
                        if end < 0:
                            # Keep the tail: the terminator may straddle two reads.
                            if len(buffer) > 4:
                                buffer = buffer[-4:]
                                at_data_start = False
                            break
                        end += 2
                    buffer = buffer[end + 3:]
                    in_data = False
                    timings.record(mail_at, time.monotonic())
                    writer.write(b"250 OK discarded\r\n")
                    continue
                end = buffer.find(b"\r\n")
                if end < 0:
                    break
                line, buffer = buffer[:end], buffer[end + 2:]
                verb = line[:4].upper()
                if verb == b"MAIL":
                    mail_at = time.monotonic()
                    writer.write(b"250 OK\r\n")
                elif verb == b"DATA":
                    in_data, at_data_start = True, True
                    writer.write(b"354 go ahead\r\n")
                elif verb == b"EHLO":
                    writer.write(b"250-bench\r\n250-PIPELINING\r\n250 8BITMIME\r\n")
                elif verb == b"QUIT":
                    writer.write(b"221 bye\r\n")
                    await writer.drain()
                    return
                else:  # HELO, RCPT, RSET, NOOP and anything else
                    writer.write(b"250 OK\r\n")
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        writer.close()


def serve_discard(timings: Timings) -> tuple[int, object]:
    loop = asyncio.new_event_loop()
    port = free_port()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)

        async def start() -> None:
            await asyncio.start_server(lambda r, w: _discard_session(r, w, timings),
                                       "127.0.0.1", port, limit=1 << 20)
            ready.set()

        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    return port, lambda: loop.call_soon_threadsafe(loop.stop)


# ---------------------------------------------------------------- stamp: kernel arrival times

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def _stamp_session(conn: socket.socket, timings: Timings) -> None:
    """Like `discard`, but each MAIL FROM is timed by the kernel (SO_TIMESTAMPNS: when the
    segment arrived), so this server's own scheduling cannot shift the gaps it reports.
    The conversation is lock-step (smtplib waits for each reply), so a MAIL command arrives
    alone in its segment. Times are CLOCK_REALTIME; only differences are used."""
    import struct

    conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    conn.sendall(b"220 bench stamp ESMTP\r\n")
    buffer = b""
    in_data = at_data_start = False
    mail_at = 0.0
    with conn:
        while True:
            chunk, ancillary, _, _ = conn.recvmsg(262144, socket.CMSG_SPACE(16))
            if not chunk:
                return
            arrived = time.time()
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    seconds, nanoseconds = struct.unpack("qq", data[:16])
                    arrived = seconds + nanoseconds / 1e9
            buffer += chunk
            replies = []
            while True:
                if in_data:
                    if at_data_start and buffer.startswith(b".\r\n"):
                        end = 0
                    else:
                        end = buffer.find(b"\r\n.\r\n")
                        if end < 0:
                            if len(buffer) > 4:
                                buffer, at_data_start = buffer[-4:], False
                            break
                        end += 2
                    buffer, in_data = buffer[end + 3:], False
                    timings.record(mail_at, arrived)
                    replies.append(b"250 OK stamped\r\n")
                    continue
                end = buffer.find(b"\r\n")
                if end < 0:
                    break
                line, buffer = buffer[:end], buffer[end + 2:]
                verb = line[:4].upper()
                if verb == b"MAIL":
                    mail_at = arrived
                    replies.append(b"250 OK\r\n")
                elif verb == b"DATA":
                    in_data = at_data_start = True
                    replies.append(b"354 go ahead\r\n")
                elif verb == b"EHLO":
                    replies.append(b"250-bench\r\n250 8BITMIME\r\n")
                elif verb == b"QUIT":
                    conn.sendall(b"221 bye\r\n")
                    return
                else:
                    replies.append(b"250 OK\r\n")
            if replies:
                conn.sendall(b"".join(replies))


def serve_stamp(timings: Timings) -> tuple[int, object]:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=_stamp_session, args=(conn, timings), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1], listener.close


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child(kind: str) -> None:
    timings = Timings(keep=(kind == "record"))
    serve = {"record": serve_record, "discard": serve_discard, "stamp": serve_stamp}[kind]
    port, stop = serve(timings)
    print(json.dumps({"port": port}), flush=True)
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "count":
            answer: dict = {"count": len(timings.end_at)}
        elif command == "stats":
            answer = timings.summary()
        elif command == "reset":
            timings.reset()
            answer = {"ok": True}
        elif command == "dump":
            with timings.lock:
                messages = list(timings.messages)
            Path(argument).write_bytes(pickle.dumps(messages))
            answer = {"ok": True, "count": len(messages)}
        elif command == "quit":
            break
        else:
            answer = {"error": f"unknown command {command!r}"}
        print(json.dumps(answer), flush=True)
    stop()


# ---------------------------------------------------------------- the parent's handle

class Sink:
    """A server process and the commands to read it."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.proc = subprocess.Popen(
            [sys.executable, __file__, kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, bufsize=1,
        )
        first = self.proc.stdout.readline()
        if not first:
            raise RuntimeError(f"the {kind} SMTP server did not start")
        self.port = json.loads(first)["port"]
        self.url = f"smtp://127.0.0.1:{self.port}"

    def ask(self, command: str) -> dict:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def count(self) -> int:
        return self.ask("count")["count"]

    def stats(self) -> dict:
        return self.ask("stats")

    def reset(self) -> None:
        self.ask("reset")

    def dump(self, path: Path) -> list[tuple[str, list[str], bytes]]:
        self.ask(f"dump {path}")
        return pickle.loads(Path(path).read_bytes())

    def wait_for(self, count: int, timeout: float, alive=lambda: True) -> int:
        deadline = time.monotonic() + timeout
        seen = self.count()
        while seen < count and time.monotonic() < deadline and alive():
            time.sleep(0.05)
            seen = self.count()
        return seen

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(5)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


if __name__ == "__main__":
    child(sys.argv[1])
