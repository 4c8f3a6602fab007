"""The reliability suite's fixtures: a private Redis that can be flushed and restarted, and an
SMTP server that can go away and come back on the same port. The checks every chaos test ends
with (nobody got two copies, every row is final, every `sent` row was received, the counters
agree with the rows) are in `tests.helpers`."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from aiosmtpd.controller import Controller

from tests.smtp_server import RecordingHandler, SmtpServer

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
