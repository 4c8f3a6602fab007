"""Issue 39's proof of the transactional API: 40 concurrent clients send 200 distinct
Idempotency-Keys, each retried 3 times (the first retry while the first request's message is
still in flight, the second after a SIGKILL of the worker mid-run, the third while a new
worker sends), over real HTTP to the app, a real worker process and aiosmtpd. Every key has
exactly one row, every answer for a key names it, and every message was received exactly
once or is `unknown` (the worker died mid-send: never resent); nobody received two.

The full scale of the issue (200 keys, 40 clients, 3 retries each: 800 requests), at a pace
of 20 ms between sends so the kill lands mid-run; about 15 s per database.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select

from broadside.core.models import TransactionalMessage
from broadside.delivery.lease import LEASE_KEY
from tests.helpers import wait_until
from webapp.extensions import db, get_redis

pytestmark = pytest.mark.slow

KEYS = 200
CLIENTS = 40


def post(url: str, headers: dict[str, str], body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={**headers, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def statuses() -> Counter:
    db.session.expire_all()
    found = Counter(dict(db.session.execute(
        select(TransactionalMessage.status, func.count()).group_by(TransactionalMessage.status)
    ).all()))
    db.session.commit()
    return found


def test_every_key_is_one_message_received_once_or_unknown_across_a_sigkill(
        app, app_config, api_headers, live_server, smtp_server, worker_factory):
    app_config["SEND_DELAY_MS"] = 20
    made, _ = post(f"{live_server.url}/api/transactional/templates", api_headers,
                   {"name": "Code", "subject": "Your code", "body": "Code {{ data.code }}",
                    "essential": True})
    assert made == 201
    url = f"{live_server.url}/api/transactional"
    answers: dict[int, list[tuple[int, int]]] = {i: [] for i in range(KEYS)}
    lock = threading.Lock()

    def attempt(i: int) -> None:
        status, body = post(url, {**api_headers, "Idempotency-Key": f"code-{i:04d}"},
                            {"template": "Code", "to": f"user{i:04d}@example.com",
                             "data": {"code": f"{i:06d}"}})
        with lock:
            answers[i].append((status, body.get("id", 0)))

    def first_and_retry(i: int) -> None:
        attempt(i)
        attempt(i)  # at once: its message is still pending or sending

    lease = f"{app_config['BROADSIDE_NAMESPACE']}:{LEASE_KEY}"
    worker = worker_factory()
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(first_and_retry, range(KEYS)))
    # Killed mid-run: some received, some not yet, one perhaps on the wire.
    wait_until(lambda: len(smtp_server.messages) >= 20, timeout=30,
               message="the worker sent nothing")
    worker.kill(group=True)
    get_redis().delete(lease)  # as if its TTL had run out, so the test does not wait
    received_at_kill = len(smtp_server.messages)
    assert received_at_kill < KEYS, "the kill came too late to land mid-run"
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(attempt, range(KEYS)))  # retried while no worker runs
    worker_factory()
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(attempt, range(KEYS)))  # retried while the new worker sends
    wait_until(lambda: statuses()["pending"] + statuses()["sending"] == 0, timeout=60,
               message="messages left unsettled after the restart")

    for i, tries in answers.items():
        assert len(tries) == 4 and {status for status, _ in tries} == {202}, (i, tries)
        assert len({message_id for _, message_id in tries}) == 1, (i, tries)
    rows = db.session.execute(select(TransactionalMessage.idempotency_key,
                                     TransactionalMessage.to_email,
                                     TransactionalMessage.status)).all()
    assert sorted(key for key, _, _ in rows) == [f"code-{i:04d}" for i in range(KEYS)]
    received = Counter(smtp_server.recipients())
    assert not [address for address, n in received.items() if n > 1], "someone got two"
    for _key, to_email, status in rows:
        if status == "sent":
            assert received[to_email] == 1, (to_email, status)
        else:
            assert status == "unknown" and received[to_email] <= 1, (to_email, status)
    assert len(received) > received_at_kill  # the new worker sent the rest
