"""An identity's edits reach its running stream at the next maintenance tick, through a real
worker process, real SMTP servers, Redis and the database: a new transport carries the next
test send, a rename keeps a `--identity` worker serving it (streams are found by id), a change
in the middle of a broadcast never gives the identity two senders at once, and the System
page shows the values the stream runs on."""

from __future__ import annotations

import itertools
import re

import pytest

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from tests.helpers import (
    assert_nobody_twice,
    broadcast_status,
    get_jobs,
    make_identity,
    make_list,
    wait_until,
)
from tests.smtp_server import SmtpServer
from webapp.extensions import db

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """Processes, threads and leases; the identity's reads are the service's (both databases
    in tests/webapp): SQLite, except the mid-broadcast change, on both."""
    return request.param


@pytest.fixture
def third_server():
    server = SmtpServer().start()
    yield server
    server.stop()


def _body(name: str, **values) -> dict:
    return {"name": name, "from": "Product <product@product.example>", **values}


def _test_send(client, api_headers, broadcast_id: int, to: str) -> None:
    answer = client.post(f"/api/broadcasts/{broadcast_id}/test", headers=api_headers, json={"email": to})
    assert answer.status_code == 202, answer.text


def test_a_changed_transport_carries_the_next_test_send(
        app, client, api_headers, smtp_server, second_server, third_server, worker_factory):
    product = make_identity("Product", second_server.url, delay_ms=0, email="product@product.example")
    users = make_list(db.session, 2, "Users", domain="users.example")
    draft = create_draft(db.session, list_id=users.id, subject="Hi", body="Hello", identity_id=product.id)
    worker = worker_factory()
    wait_until(lambda: worker.output.count("lease taken") == 2, timeout=30, message=lambda: worker.output)
    _test_send(client, api_headers, draft.id, "first@example.com")
    wait_until(lambda: second_server.recipients() == ["first@example.com"], timeout=30,
               message=lambda: worker.output)

    changed = client.put(f"/api/identities/{product.id}", headers=api_headers,
                         json=_body("Product", transport=third_server.url, delay_ms=0,
                                    **{"from": "Launch team <launch@product.example>"}))
    assert changed.status_code == 200, changed.text
    wait_until(lambda: worker.output.count("lease taken") == 3, timeout=30, message=lambda: worker.output)
    _test_send(client, api_headers, draft.id, "second@example.com")
    _test_send(client, api_headers, draft.id, "third@example.com")
    wait_until(lambda: len(third_server.recipients()) == 2, timeout=30, message=lambda: worker.output)
    assert sorted(third_server.recipients()) == ["second@example.com", "third@example.com"]
    assert second_server.recipients() == ["first@example.com"]
    # The From of a draft's test send is read when it is queued: the new one.
    assert {m.mail_from for m in third_server.messages} == {"launch@product.example"}
    assert {m.message["From"] for m in third_server.messages} == {"Launch team <launch@product.example>"}


def test_a_renamed_identity_keeps_its_named_worker(
        app, client, api_headers, smtp_server, second_server, worker_factory):
    product = make_identity("Product", second_server.url, delay_ms=0, email="product@product.example")
    users = make_list(db.session, 2, "Users", domain="users.example")
    draft = create_draft(db.session, list_id=users.id, subject="Hi", body="Hello", identity_id=product.id)
    worker = worker_factory("--identity", "Product")
    wait_until(lambda: "lease taken" in worker.output, timeout=30, message=lambda: worker.output)
    renamed = client.put(f"/api/identities/{product.id}", headers=api_headers,
                         json=_body("Launch", delay_ms=0))
    assert renamed.status_code == 200, renamed.text
    wait_until(lambda: "identity Launch changed" in worker.output, timeout=30, message=lambda: worker.output)
    _test_send(client, api_headers, draft.id, "after@example.com")
    wait_until(lambda: second_server.recipients() == ["after@example.com"], timeout=30,
               message=lambda: worker.output)
    assert worker.proc is not None and worker.proc.poll() is None
    assert "no sending identity called" not in worker.output and "is gone" not in worker.output


def _live(client) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", client.get("/system/live").text))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_change_mid_broadcast_never_gives_the_identity_two_senders(
        app, logged_in_client, api_headers, smtp_server, second_server, worker_factory):
    """The pace changes while a broadcast sends: the stream starts again on it, its successor
    after the old one's lease. Each sender has its own connection, so two at once would show as
    the server's messages (in the order their MAIL FROM arrived) alternating between
    connections; each connection's messages are one run instead, everyone once."""
    product = make_identity("Product", second_server.url, delay_ms=40, email="product@product.example")
    users = make_list(db.session, 160, "Users", domain="users.example")
    worker = worker_factory()
    wait_until(lambda: worker.output.count("lease taken") == 2, timeout=30, message=lambda: worker.output)
    draft = create_draft(db.session, list_id=users.id, subject="Launch", body="Hello", identity_id=product.id)
    launch = send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs()).id
    wait_until(lambda: len(second_server.messages) >= 5, timeout=30, message=lambda: worker.output)
    changed = logged_in_client.put(f"/api/identities/{product.id}", headers=api_headers,
                                   json=_body("Product", delay_ms=10, hourly_limit=5000))
    assert changed.status_code == 200, changed.text
    wait_until(lambda: broadcast_status(launch) == "sent", timeout=60, message=lambda: worker.output)
    assert worker.output.count("lease taken") == 3  # the stream started again, mid-broadcast
    received = sorted(second_server.messages, key=lambda m: m.at)
    assert_nobody_twice([r for m in received for r in m.rcpt_tos])
    assert len(received) == 160
    runs = [peer for peer, _ in itertools.groupby(m.peer for m in received)]
    assert len(runs) == len(set(runs)) >= 2, runs

    # The System page shows the values the stream now runs on, nothing left to apply.
    wait_until(lambda: "10 ms" in _live(logged_in_client), timeout=15,
               message=lambda: _live(logged_in_client))
    text = _live(logged_in_client)
    assert "applying" not in text and "of 5,000" in text
    assert f"through {second_server.url}" in text  # said by the stream itself, beside its lease


def test_an_account_rate_set_on_another_identity_restarts_the_accounts_streams(
        app, client, api_headers, smtp_server, second_server, worker_factory):
    """The account's ceiling is among a stream's values: an identity of the same account
    saved with an account_rate restarts the other's stream on it (and the outbox's is alone)."""
    make_identity("Product", second_server.url, delay_ms=0, email="product@product.example")
    worker = worker_factory()
    wait_until(lambda: worker.output.count("lease taken") == 2, timeout=30, message=lambda: worker.output)
    saved = client.post("/api/identities", headers=api_headers,
                        json=_body("Receipts", transport=second_server.url, account_rate=4))
    assert saved.status_code == 201 and saved.json["account_rate"] == 4
    wait_until(lambda: "identity Product changed" in worker.output, timeout=30,
               message=lambda: worker.output)
    wait_until(lambda: re.search(r"identity Product: .* its account at most 4 requests/s", worker.output),
               timeout=30, message=lambda: worker.output)
    wait_until(lambda: re.search(r"identity Receipts: .* its account at most 4 requests/s", worker.output),
               timeout=30, message=lambda: worker.output)
