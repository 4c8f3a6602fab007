"""A receiver cannot hold mail back or the worker's memory: each POST is whole within its
deadline, reads at most 4 KB of the answer and never decompresses it, runs on the worker's
webhook threads (never a mail stream's), and a timeout or a worker stopped mid-POST is a
counted attempt, so the endpoint ends disabled after its window.

The receivers are real sockets on loopback served by threads of the test: one that drips its
answer a byte at a time for ever, one that answers a gzip "bomb" (~300 KB expanding to 300
MB). SQLite only: no SQL here differs between the engines.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
import zlib
from datetime import timedelta

import pytest
from sqlalchemy import select as sql_select
from sqlalchemy import update

from broadside.audience.subscribers.service import save_subscriber
from broadside.core.models import WebhookEndpoint, WebhookMessage
from broadside.core.timeutil import utcnow
from broadside.webhooks import endpoints, ledger
from broadside.webhooks import posting as delivery
from tests.helpers import make_list, start_broadcast, wait_until
from webapp.extensions import db, get_jobs

BOMB_EXPANDS_TO = 300 * 1024 * 1024
RSS_GROWTH_LIMIT_KB = 30 * 1024


@pytest.fixture(params=["sqlite"])
def backend(request):
    return request.param


@pytest.fixture
def app_config(app_config):
    app_config["WEBHOOKS_ALLOW_PRIVATE"] = "1"
    return app_config


class SlowReceiver:
    """Accepts connections on loopback; each reads a whole POST, then `answer(conn)` runs on
    the connection's own thread. Records how each connection ended."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}/hook"
        self.posted = threading.Event()  # a POST arrived
        self.ends: list[str] = []
        self.open = 0
        self.lock = threading.Lock()
        self.done = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                request += chunk
            head, _, body = request.partition(b"\r\n\r\n")
            length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), b"0"))
            while len(body) < length:
                body += conn.recv(65536)
            with self.lock:
                self.open += 1
            self.posted.set()
            try:
                end = self.answer(conn)
            except OSError:
                end = "cut by the client"
            with self.lock:
                self.open -= 1
                self.ends.append(end)

    def answer(self, conn: socket.socket) -> str:
        raise NotImplementedError

    def is_open(self) -> bool:
        with self.lock:
            return self.open > 0

    def stop(self) -> None:
        self.done.set()
        self._server.close()


class Drip(SlowReceiver):
    """Answers one byte every `every` seconds, for ever: the status line, then a header that
    never ends, until the client closes the connection (or `release` is set, or `cap`
    seconds pass: a bound for code that never gives up)."""

    def __init__(self, every: float, cap: float = 20.0) -> None:
        super().__init__()
        self.every = every
        self.cap = cap
        self.release = threading.Event()

    def answer(self, conn: socket.socket) -> str:
        head = b"HTTP/1.1 200 OK\r\nX-Slow: "
        started = time.monotonic()
        sent = 0
        while True:
            if self.release.is_set():  # reset: an error, however much of the answer came
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return "released"
            if time.monotonic() - started > self.cap:
                return "cap reached"
            readable, _, _ = select.select([conn], [], [], self.every)  # the drip's pace
            if readable and not conn.recv(1):
                return "cut by the client"
            conn.sendall(head[sent:sent + 1] if sent < len(head) else b"a")
            sent += 1


class Bomb(SlowReceiver):
    """Answers 200 with a gzip body of ~300 KB that expands to 300 MB."""

    def __init__(self, body: bytes) -> None:
        super().__init__()
        self.body = body

    def answer(self, conn: socket.socket) -> str:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(self.body))
        conn.sendall(self.body)  # the client stops reading long before: an OSError here
        return "all sent"


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip format
    zeros = bytes(1024 * 1024)
    parts = [packer.compress(zeros) for _ in range(BOMB_EXPANDS_TO // len(zeros))]
    return b"".join([*parts, packer.flush()])


@pytest.fixture
def receivers():
    made: list[SlowReceiver] = []

    def make(receiver: SlowReceiver) -> SlowReceiver:
        made.append(receiver)
        return receiver

    yield make
    for receiver in made:
        if isinstance(receiver, Drip):
            receiver.release.set()
        receiver.stop()


def peak_rss_reset() -> int:
    """Reset this process's peak resident size to its current one (Linux's clear_refs 5);
    returns it, in KB."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return _status_kb("VmHWM")


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1])


def add_endpoint(url: str, *events: str) -> WebhookEndpoint:
    return endpoints.create(db.session, url, list(events), allow_private=True)


def rows_of(endpoint: WebhookEndpoint) -> list[WebhookMessage]:
    db.session.expire_all()
    return list(db.session.scalars(sql_select(WebhookMessage).where(
        WebhookMessage.endpoint_id == endpoint.id).order_by(WebhookMessage.id)))


def test_mail_leaves_while_a_receiver_drips_and_a_gzip_bomb_costs_the_worker_no_memory(
        app, smtp_server, run_worker_burst, receivers, gzip_bomb):
    app.config["WEBHOOKS_TIMEOUT_SECONDS"] = 60  # the drip is held open until the mail is in
    drip = receivers(Drip(every=0.5))
    bomb = receivers(Bomb(gzip_bomb))
    events = ("subscriber.created", "broadcast.started", "delivery.sent", "broadcast.finished")
    dripping = add_endpoint(drip.url, *events)
    bombing = add_endpoint(bomb.url, *events)
    weekly = make_list(db.session, 0)
    save_subscriber(db.session, email="ann@example.com", list_ids=[weekly.id])  # due at once
    broadcast = start_broadcast(app, weekly)
    held_open: list[bool] = []

    def the_mail_arrives(envelope) -> None:
        # The one message reaches the server: is a POST to the drip being held open now?
        held_open.append(drip.posted.wait(20) and drip.is_open())
        drip.release.set()  # then the drip ends its answer (cut short: a failed attempt)

    smtp_server.script.on_data = the_mail_arrives
    before_kb = peak_rss_reset()

    assert run_worker_burst() == 0

    grown_kb = _status_kb("VmHWM") - before_kb
    print(f"peak resident size grew by {grown_kb} KB")
    assert smtp_server.recipients() == ["ann@example.com"]
    assert held_open == [True]  # the message left while a webhook POST was still held open
    assert grown_kb < RSS_GROWTH_LIMIT_KB, f"the worker grew by {grown_kb} KB"
    assert "released" in drip.ends
    delivered = [r.event_type for r in rows_of(bombing) if r.status == "delivered"]
    assert "subscriber.created" in delivered and "broadcast.finished" in delivered
    [first, *_] = rows_of(dripping)
    assert first.event_type == "subscriber.created" and first.attempts == 1
    assert first.last_error == "No answer from 127.0.0.1: the connection was reset"
    db.session.refresh(broadcast)
    assert broadcast.status == "sent"


def test_a_gzip_bomb_is_neither_read_nor_expanded(app, receivers, gzip_bomb):
    bomb = receivers(Bomb(gzip_bomb))
    endpoint = add_endpoint(bomb.url, "subscriber.created")
    weekly = make_list(db.session, 0)
    for name in ("bo", "cy", "di"):
        save_subscriber(db.session, email=f"{name}@example.com", list_ids=[weekly.id])
    before_kb = peak_rss_reset()

    outcome = delivery.deliver_due(db.session, delivery.Settings(allow_private=True))

    grown_kb = _status_kb("VmHWM") - before_kb
    print(f"peak resident size grew by {grown_kb} KB")
    assert outcome.delivered == 3
    assert grown_kb < RSS_GROWTH_LIMIT_KB, f"the POSTs grew the process by {grown_kb} KB"
    assert [r.status for r in rows_of(endpoint)] == ["delivered"] * 3


def test_a_dripping_receiver_is_cut_at_the_deadline_and_disabled_after_its_window(
        app, run_worker_burst, receivers):
    # The drip's bytes come faster than any socket timeout: only a deadline on the whole
    # exchange ends the POST. By then its status line is whole and a header has begun: what
    # http.client read looks like a 200 answer, and must not count as one.
    app.config.update(WEBHOOKS_TIMEOUT_SECONDS=0.5, WEBHOOKS_WINDOW_SECONDS=2,
                      WEBHOOKS_RETRY_BASE_SECONDS=30)
    drip = receivers(Drip(every=0.01))
    endpoint = add_endpoint(drip.url, "subscriber.created")
    weekly = make_list(db.session, 0)
    save_subscriber(db.session, email="eve@example.com", list_ids=[weekly.id])

    assert run_worker_burst() == 0  # one attempt, cut at the deadline, counted
    [row] = rows_of(endpoint)
    assert (row.status, row.attempts, row.response_code) == ("pending", 1, None)
    assert "No whole answer from 127.0.0.1 within 0.5 seconds" in row.last_error
    db.session.refresh(endpoint)
    assert endpoint.status == "enabled" and endpoint.failing_since is not None

    # Retried at once from now on: a newer event keeps failing until its window ends, a
    # whole window after the endpoint's first failure.
    app.config["WEBHOOKS_RETRY_BASE_SECONDS"] = 0
    save_subscriber(db.session, email="fay@example.com", list_ids=[weekly.id])
    assert run_worker_burst() == 0

    db.session.refresh(endpoint)
    assert endpoint.status == "disabled"
    assert "every delivery failed" in endpoint.disabled_reason
    assert "within 0.5 seconds" in endpoint.disabled_reason
    assert [r.status for r in rows_of(endpoint)] == ["failed", "failed"]
    assert len(drip.ends) >= 3 and set(drip.ends) == {"cut by the client"}


def test_a_post_a_stopped_worker_left_in_flight_is_a_counted_attempt(
        app, run_worker_burst, receivers):
    drip = receivers(Drip(every=0.1))
    endpoint = add_endpoint(drip.url, "subscriber.created")
    weekly = make_list(db.session, 0)
    save_subscriber(db.session, email="gus@example.com", list_ids=[weekly.id])
    # A worker claimed it and died mid-POST, six minutes ago.
    [claimed] = ledger.claim(db.session, utcnow(), 10)
    db.session.execute(update(WebhookMessage).where(WebhookMessage.id == claimed)
                       .values(claimed_at=utcnow() - ledger.STALE_CLAIM - timedelta(minutes=1)))
    db.session.commit()

    assert run_worker_burst() == 0  # the runner's upkeep finds it

    [row] = rows_of(endpoint)
    assert (row.status, row.attempts) == ("pending", 1)
    assert row.last_error.startswith("No answer before the worker stopped")
    assert row.next_attempt_at > utcnow()  # backoff, as for any failure
    db.session.refresh(endpoint)
    assert endpoint.failing_since is not None
    assert drip.ends == []  # not POSTed again at once

    # A receiver whose answer stops the worker every time ends disabled after its window.
    window = timedelta(minutes=10)
    later = utcnow() + timedelta(minutes=6)
    assert ledger.claim(db.session, later, 10) == [claimed]
    db.session.commit()
    assert ledger.release_stale(db.session, later + ledger.STALE_CLAIM + timedelta(seconds=1),
                                window=window, base_seconds=30) == 1
    db.session.commit()
    db.session.refresh(endpoint)
    assert endpoint.status == "disabled" and "worker stopped" in endpoint.disabled_reason
    assert [(r.status, r.attempts) for r in rows_of(endpoint)] == [("failed", 2)]


def test_a_warm_stop_ends_the_post_in_flight_at_its_deadline_and_records_it(
        app, app_config, worker_factory, receivers):
    drip = receivers(Drip(every=0.5, cap=60))
    endpoint = add_endpoint(drip.url, "subscriber.created")
    save_subscriber(db.session, email="hal@example.com", list_ids=[make_list(db.session, 0).id])
    worker = worker_factory(WEBHOOKS_ALLOW_PRIVATE="1")  # python -m jobs: the 10 s default
    wait_until(drip.posted.is_set, timeout=30, message=lambda: worker.output)

    assert worker.terminate(timeout=30) == 0, worker.output  # waits for that POST, no longer

    assert drip.ends == ["cut by the client"]
    [row] = rows_of(endpoint)
    assert (row.status, row.attempts) == ("pending", 1)  # recorded, not left `sending`
    assert "within 10 seconds" in row.last_error


def test_no_mail_stream_listens_for_webhooks_and_an_old_versions_job_is_dropped(
        app, run_worker_burst):
    jobs = get_jobs()
    for stream in ("default", "identity:7"):
        assert not any(name.endswith(":webhooks") for name in jobs.listened(stream))
    # A job an older version queued (its function is gone): dropped at the worker's start,
    # never run, its marker cleared.
    jobs.queue("webhooks").enqueue("jobs.webhooks_out.run_webhooks_job", 0, result_ttl=0)
    jobs.redis.set(jobs.marker_key("webhooks", 0), "1")
    assert run_worker_burst() == 0
    assert jobs.queue("webhooks").count == 0
    assert not jobs.has_marker("webhooks", 0)
