"""A `redis-server` of our own on a free port, for tests that flush or kill Redis, or that
must see every key written (the shared Redis on 6379 holds other tests' keys)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis
from redis.exceptions import RedisError

from tests.smtp_server import free_port


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
