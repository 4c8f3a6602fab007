"""The reliability suite's fixtures: a private Redis that can be flushed and restarted, and an
SMTP server that can go away and come back on the same port. The checks every chaos test ends
with (nobody got two copies, every row is final, every `sent` row was received, the counters
agree with the rows) are in `tests.helpers`."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from redis import Redis
from redis.exceptions import RedisError

from tests.smtp_server import RecordingHandler, SmtpServer, free_port

# ---------------------------------------------------------------- a private Redis

class PrivateRedis:
    """A `redis-server` of our own on a free port: these tests flush and kill it, which the
    shared Redis on 6379 (other tests' queues and leases) must never suffer."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.folder = folder
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._log = None

    def start(self) -> PrivateRedis:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._log = open(self.folder / f"redis-{self.port}.log", "ab")  # closed in kill()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.folder)],
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        with self.client() as client:
            while True:
                try:
                    client.ping()
                    break
                except RedisError:
                    if time.monotonic() > deadline or self.proc.poll() is not None:
                        raise AssertionError("the private redis-server did not start") from None
                    time.sleep(0.02)
        return self

    def client(self) -> Redis:
        return Redis.from_url(self.url, socket_timeout=5)

    def flushall(self) -> None:
        with self.client() as client:
            client.flushall()

    def kill(self) -> None:
        """SIGKILL: everything in it is gone (no persistence), like a crashed Redis."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self) -> None:
        self.kill()
        self.start()


@pytest.fixture
def private_redis(tmp_path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path / "redis").start()
    yield server
    server.kill()


# ---------------------------------------------------------------- an SMTP server that can return

class _EveryAttemptHandler(RecordingHandler):
    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        self.server.mail_times.append(time.monotonic())
        return await super().handle_MAIL(server, session, envelope, address, mail_options)


class SmtpOnPort(SmtpServer):
    """The recording SMTP server, on a port of our choosing: stop() it and start a new one on
    the same port to make the mail server go away and come back (a Controller cannot restart).
    `mail_times` records the start (MAIL FROM) of every attempt, refused ones included."""

    def __init__(self, port: int | None = None, auth: tuple[str, str] | None = None) -> None:
        super().__init__(auth=auth)
        self.controller.loop.close()  # the parent's controller is replaced, never started
        self.mail_times: list[float] = []
        self.port = port or self.port
        kwargs: dict = {}
        if auth is not None:
            kwargs = {"authenticator": self._authenticate, "auth_require_tls": False,
                      "auth_required": True}
        self.controller = Controller(_EveryAttemptHandler(self), hostname=self.host, port=self.port,
                                     **kwargs)

    def attempt_gaps(self) -> list[float]:
        """Seconds between the starts of consecutive attempts, accepted or refused."""
        times = sorted(self.mail_times)
        return [b - a for a, b in zip(times, times[1:], strict=False)]


@pytest.fixture
def own_smtp() -> Iterator:
    """Make SMTP servers for one test (`own_smtp(port=..., auth=...)`); all stopped at the end."""
    servers: list[SmtpOnPort] = []

    def make(port: int | None = None, auth: tuple[str, str] | None = None) -> SmtpOnPort:
        server = SmtpOnPort(port, auth).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        try:
            server.stop()
        except (AssertionError, RuntimeError):
            pass  # already stopped by the test
