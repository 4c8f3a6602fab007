"""Fixtures shared by the worker's tests."""

import pytest

from tests.smtp_server import SmtpServer


@pytest.fixture
def second_server():
    """A second SMTP server, for a second sending identity's stream."""
    server = SmtpServer().start()
    yield server
    server.stop()
