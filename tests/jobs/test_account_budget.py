"""What a provider says of the account's budget holds every identity of the account, through
the real transports, their loopback provider servers (tests/provider_servers.py) and Redis:
Resend's `ratelimit-remaining: 0` before the 429 it would otherwise answer, a 429's
Retry-After for the other identities too, and SES's MaxSendRate from `GetAccount` as a cap."""

from __future__ import annotations

import threading
import time

import pytest
from redis import Redis

from broadside.delivery import account_limit
from broadside.delivery.identities.service import SendingIdentity
from broadside.delivery.providers.factory import make_transport
from broadside.delivery.transports import DeliveryError, Outgoing
from jobs import account_ceiling, runtime
from tests.provider_servers import PostmarkServer, ResendServer, SesServer
from tests.smtp_server import free_port
from webapp.doctor.identities import run as check_identity

SECRET = "a secret key for the tests"


def _identity(url: str, rate: float | None = None, name: str = "One") -> SendingIdentity:
    return SendingIdentity(id=1, name=name, from_name="", from_email="news@example.com",
                           transport_url=url, delay_ms=0, hourly_limit=0, postal_address="",
                           status="active", pause_reason=None, account_rate=rate)


def _ceiling(redis_client, namespace: str, url: str, rate: float | None = None):
    config = {"SECRET_KEY": SECRET, "BROADSIDE_NAMESPACE": namespace}
    ceiling = account_ceiling.build(_identity(url, rate), redis_client, config)
    assert ceiling is not None
    return ceiling


def _item(n: int) -> list[Outgoing]:
    rcpt = f"reader{n}@example.com"
    return [Outgoing("news@example.com", rcpt, b"From: news@example.com\r\nTo: " + rcpt.encode()
                     + b"\r\nSubject: Hi\r\n\r\nHello\r\n")]


@pytest.fixture
def resend():
    server = ResendServer().start()
    server.rate_limit = 2  # Resend's default: 2 requests a second per team
    yield server
    server.stop()


def test_an_exhausted_budget_holds_every_identity_of_the_account_before_a_429(
        redis_client, namespace, resend):
    """Two identities with one Resend key and no account_rate of their own: Resend's headers
    say when the second's budget is spent, and neither meets its 429."""
    url = resend.transport_url()
    pairs = []
    for _ in range(2):
        transport = make_transport(url, "/tmp", 5.0, allow_private=True)
        ceiling = _ceiling(redis_client, namespace, url)
        account_ceiling.listen(transport, ceiling)
        pairs.append((transport, ceiling))
    started = time.monotonic()
    try:
        for n in range(6):
            transport, ceiling = pairs[n % 2]
            [result] = transport.send_batch(_item(n), f"key-{n}", pace=ceiling.wait)
            assert not isinstance(result, DeliveryError), result
    finally:
        for transport, _ in pairs:
            transport.close()
    assert resend.over_limit == 0
    assert len(resend.accepted) == 6
    assert time.monotonic() - started >= 2.0  # three seconds' budgets, two requests each


def test_a_429s_retry_after_holds_the_other_identities_of_the_account(redis_client, namespace):
    with PostmarkServer() as server:
        url = server.transport_url()
        mine, theirs = (_ceiling(redis_client, namespace, url) for _ in range(2))
        transport = make_transport(url, "/tmp", 5.0, allow_private=True)
        server.throttle(1, retry_after="1.5")
        try:
            with pytest.raises(DeliveryError) as refused:
                transport.send_batch(_item(0), "", pace=mine.wait)
        finally:
            transport.close()
        assert refused.value.code == 429 and refused.value.retry_after == 1.5
        rt = runtime.Runtime(lease=None, pacer=None, transport=None, hourly=None,  # type: ignore[arg-type]
                             config={}, jobs=None, instance_path="", ceiling=mine)  # type: ignore[arg-type]
        rt.throttled(refused.value.retry_after)
        other = runtime.Runtime(lease=None, pacer=None, transport=None, hourly=None,  # type: ignore[arg-type]
                                config={}, jobs=None, instance_path="", ceiling=theirs)  # type: ignore[arg-type]
        assert other.held_for() > 1.2  # its slice waits before claiming anyone
        started = time.monotonic()
        theirs.wait()
        assert time.monotonic() - started > 1.2
    elsewhere = _ceiling(redis_client, namespace, "postmark://another-token@")
    started = time.monotonic()
    elsewhere.wait()
    assert time.monotonic() - started < 0.2  # another account is not held


def test_ses_caps_the_account_at_90_percent_of_its_max_send_rate(app, redis_client, namespace):
    with SesServer() as server:
        server.max_send_rate = 5.0
        url = server.transport_url()
        config = {"SECRET_KEY": SECRET, "BROADSIDE_NAMESPACE": namespace,
                  "PROVIDER_ENDPOINTS_ALLOW_PRIVATE": True}  # the server is on loopback
        ceiling = _ceiling(redis_client, namespace, url, rate=10)
        assert ceiling.rate == 10  # SES not asked yet
        rates = account_ceiling.SesRates()
        assert rates.due(_identity(url, 10))
        rates.read(_identity(url, 10), ceiling, config, "/tmp")  # the worker's hourly read
        assert not rates.due(_identity(url, 10))
        account_ceiling.follow(ceiling, _identity(url, 10))
        assert ceiling.rate == pytest.approx(4.5)
        account_ceiling.follow(ceiling, _identity(url, 3))
        assert ceiling.rate == 3  # a lower account_rate stands

        # The owner's check of the identity reads it too (and a new figure replaces it).
        server.max_send_rate = 20.0
        app.config["BROADSIDE_NAMESPACE"] = namespace
        app.config["SECRET_KEY"] = SECRET
        assert check_identity(app, _identity(url, 10), store=False).ok
        digest = account_limit.account_digest(url, SECRET)
        assert account_limit.ses_max_rate(redis_client, namespace, digest) == 20.0
        fresh = _ceiling(redis_client, namespace, url, rate=None)
        assert fresh.rate == pytest.approx(18.0)  # no account_rate: SES's cap alone


def test_redis_not_answering_holds_the_request_and_a_stop_ends_the_wait():
    """Never faster than allowed: without the shared count the ceiling waits, asking again,
    and a stream stopping meanwhile gets a "not sent", never a send."""
    dead = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.2)
    ceiling = account_limit.Ceiling(dead, "nowhere", "0" * 32, 10.0)
    stop = threading.Event()
    threading.Timer(1.2, stop.set).start()
    started = time.monotonic()
    with pytest.raises(account_limit.CeilingStopped):
        ceiling.wait(stop)
    assert time.monotonic() - started >= 1.0
