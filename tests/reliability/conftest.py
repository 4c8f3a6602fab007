"""The reliability suite's tools: a private Redis that can be flushed and restarted, an SMTP
server that can go away and come back on the same port, and the checks every chaos test ends
with (nobody got two copies, every row is final, every `sent` row was received, the counters
agree with the rows)."""

from __future__ import annotations

import http.cookiejar
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.error import HTTPError

import pytest
from aiosmtpd.controller import Controller
from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import select

from broadside.models import Broadcast, Delivery, Subscriber
from tests.helpers import (
    counters,
    statuses,
)
from tests.smtp_server import RecordingHandler, SmtpServer, free_port
from webapp.extensions import db

TERMINAL = {"sent", "skipped", "failed", "unknown"}


# ---------------------------------------------------------------- checks

def broadcast_row(broadcast_id: int) -> Broadcast:
    db.session.expire_all()
    broadcast = db.session.get(Broadcast, broadcast_id)
    db.session.commit()
    return broadcast


def broadcast_status(broadcast_id: int) -> str:
    db.session.expire_all()
    status = db.session.scalar(select(Broadcast.status).where(Broadcast.id == broadcast_id))
    db.session.commit()
    return status


def emails_by_status(broadcast_id: int) -> dict[str, set[str]]:
    db.session.expire_all()
    rows = db.session.execute(
        select(Delivery.status, Subscriber.email)
        .join(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.broadcast_id == broadcast_id)
    ).all()
    db.session.commit()
    result: dict[str, set[str]] = {}
    for status, email in rows:
        result.setdefault(status, set()).add(email)
    return result


def assert_nobody_twice(received: list[str]) -> None:
    seen: set[str] = set()
    twice = sorted({r for r in received if r in seen or seen.add(r)})
    assert not twice, f"{len(twice)} addresses received two copies, e.g. {twice[:5]}"


def assert_ledger_consistent(broadcast_id: int, received: list[str]) -> dict[str, int]:
    """Every row final, every `sent` row really received, counters == GROUP BY of the rows."""
    result = statuses(broadcast_id)
    assert set(result) <= TERMINAL, f"rows not in a final state: {result}"
    by_status = emails_by_status(broadcast_id)
    missing = by_status.get("sent", set()) - set(received)
    assert not missing, f"rows marked sent that the server never received: {sorted(missing)[:5]}"
    for status in ("skipped", "failed"):
        wrongly = by_status.get(status, set()) & set(received)
        assert not wrongly, f"rows marked {status} that were received: {sorted(wrongly)[:5]}"
    assert counters(broadcast_id) == result, "the broadcast's counters disagree with its rows"
    total = broadcast_row(broadcast_id).total
    assert sum(result.values()) == total
    return result


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
        self._log = open(self.folder / f"redis-{self.port}.log", "ab")  # noqa: SIM115 - closed in kill()
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


# ---------------------------------------------------------------- a browser without a browser

class Browser:
    """urllib with a cookie jar: a signed-in owner's session, over real HTTP."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def request(self, method: str, path: str, data: bytes | None = None,
                headers: dict | None = None) -> tuple[int, str]:
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers=headers or {})
        try:
            with self.opener.open(request, timeout=15) as response:
                return response.status, response.read().decode()
        except HTTPError as error:
            with error:
                return error.code, error.read().decode()

    def submit(self, path: str, fields: dict[str, str]) -> tuple[int, str]:
        """POST a form (redirects followed, as a browser would): (status, page)."""
        body = urllib.parse.urlencode(fields).encode()
        return self.request("POST", path, body, {"Content-Type": "application/x-www-form-urlencoded"})

    def form(self, path: str, fields: dict[str, str]) -> int:
        return self.submit(path, fields)[0]

    def sign_in(self, email: str, password: str) -> Browser:
        from tests.helpers import csrf_token_from

        token = csrf_token_from(self.request("GET", "/login")[1])
        assert self.form("/login", {"email": email, "password": password, "csrf_token": token}) == 200
        return self
