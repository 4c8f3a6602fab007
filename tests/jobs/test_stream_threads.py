"""Every identity's stream in the one worker process, a thread each, through real worker
processes, real SMTP servers, Redis and the database (side by side at each one's pace:
test_streams.py): a provider that does not answer holds only its own stream, a deploy's
SIGTERM is obeyed by all, a SIGKILL loses only what was in flight, identities are followed
while the worker runs, and one identity never has two senders."""

from __future__ import annotations

import threading
import time

import pytest

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.delivery.identities import service as identities
from broadside.delivery.lease import LEASE_KEY, stream_key
from jobs import runtime
from jobs.app import from_flask
from jobs.engine import batch_size_for, pace_limit
from jobs.worker import run_worker
from tests.helpers import (
    assert_ledger_consistent,
    assert_nobody_twice,
    broadcast_status,
    get_jobs,
    make_identity,
    make_list,
    statuses,
    wait_until,
    worker_runtime,
)
from tests.smtp_server import SmtpServer
from webapp.extensions import db

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """Threads, leases and signals, not SQL: SQLite (test_streams.py's side by side runs on both)."""
    return request.param


def _send(app, list_id: int, identity_id: int | None, subject: str = "Hello") -> int:
    draft = create_draft(db.session, list_id=list_id, subject=subject, body="Hello",
                         identity_id=identity_id)
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                          jobs=get_jobs()).id


def _lease_holder(redis_client, namespace: str, stream: str) -> bytes | None:
    return redis_client.get(stream_key(namespace, LEASE_KEY, stream))


def _held_server(server: SmtpServer):
    """The server holds every message at the end of DATA until `release` is set (at most 20 s,
    under the worker's SMTP timeout): a provider that does not answer."""
    inside, release = threading.Event(), threading.Event()

    def hook(envelope) -> None:
        inside.set()
        release.wait(20)

    server.script.on_data = hook
    return inside, release


def test_a_provider_that_does_not_answer_holds_only_its_own_stream(
        app, app_config, smtp_server, second_server, worker_factory):
    app_config["SEND_DELAY_MS"] = "20"
    slow = make_identity("Slow", second_server.url, delay_ms=0, email="slow@product.example")
    news_list = make_list(db.session, 15, "News", domain="news.example")
    slow_list = make_list(db.session, 3, "Slow readers", domain="slow.example")
    inside, release = _held_server(second_server)
    worker = worker_factory()
    try:
        wait_until(lambda: worker.output.count("lease taken") == 2, timeout=30,
                   message=lambda: worker.output)
        held = _send(app, slow_list.id, slow.id, "Held")
        assert inside.wait(30), "the slow identity's stream never reached its server"
        news = _send(app, news_list.id, None, "The news")
        # The whole of the other stream's broadcast goes out while the slow server still
        # holds its first message.
        wait_until(lambda: broadcast_status(news) == "sent", timeout=30, message=lambda: worker.output)
        assert not release.is_set() and second_server.messages == []
        assert statuses(news) == {"sent": 15}
    finally:
        release.set()
    second_server.script.on_data = None
    wait_until(lambda: broadcast_status(held) == "sent", timeout=40, message=lambda: worker.output)
    assert sorted(second_server.recipients()) == [f"reader{i:05d}@slow.example" for i in range(3)]


def test_sigterm_stops_every_stream_mid_send_and_releases_every_lease(
        app, app_config, smtp_server, second_server, worker_factory, redis_client, namespace):
    app_config["SEND_DELAY_MS"] = "25"
    product = make_identity("Product", second_server.url, delay_ms=25, email="product@product.example")
    news_list = make_list(db.session, 150, "News", domain="news.example")
    product_list = make_list(db.session, 150, "Product users", domain="users.example")
    news = _send(app, news_list.id, None, "The news")
    launch = _send(app, product_list.id, product.id, "The launch")
    worker = worker_factory()
    smtp_server.wait_for(5, timeout=60)
    second_server.wait_for(5, timeout=60)
    assert worker.terminate(timeout=5) == 0, worker.output
    assert _lease_holder(redis_client, namespace, "default") is None
    assert _lease_holder(redis_client, namespace, f"identity:{product.id}") is None
    for broadcast_id in (news, launch):
        midway = statuses(broadcast_id)
        assert "sending" not in midway and "unknown" not in midway, midway
        assert midway.get("pending", 0) > 0, "the stop came too late to prove anything"

    restarted = worker_factory()
    wait_until(lambda: broadcast_status(news) == "sent" and broadcast_status(launch) == "sent",
               timeout=60, message=lambda: restarted.output)
    assert statuses(news) == {"sent": 150} and statuses(launch) == {"sent": 150}
    assert_nobody_twice(smtp_server.recipients())
    assert_nobody_twice(second_server.recipients())


def test_sigkill_loses_at_most_each_streams_rows_in_flight(
        app, app_config, smtp_server, second_server, worker_factory):
    app_config["SEND_DELAY_MS"] = "10"
    product = make_identity("Product", second_server.url, delay_ms=10, email="product@product.example")
    news_list = make_list(db.session, 120, "News", domain="news.example")
    product_list = make_list(db.session, 120, "Product users", domain="users.example")
    news = _send(app, news_list.id, None, "The news")
    launch = _send(app, product_list.id, product.id, "The launch")
    worker = worker_factory()
    smtp_server.wait_for(20, timeout=60)
    second_server.wait_for(20, timeout=60)
    worker.kill()

    restarted = worker_factory()
    wait_until(lambda: broadcast_status(news) == "sent" and broadcast_status(launch) == "sent",
               timeout=60, message=lambda: restarted.output)
    for broadcast_id, server in ((news, smtp_server), (launch, second_server)):
        received = server.recipients()
        assert_nobody_twice(received)
        result = assert_ledger_consistent(broadcast_id, received)
        assert set(result) <= {"sent", "unknown"}
        # At most the batch each stream had claimed: about 0.2 s of sends at its 10 ms pace.
        assert result.get("unknown", 0) <= batch_size_for(pace_limit(0.010))
        assert result["sent"] + result.get("unknown", 0) == 120


def test_a_second_worker_waits_for_every_lease_then_takes_them_over(
        app, app_config, smtp_server, second_server, worker_factory, redis_client, namespace):
    product = make_identity("Product", second_server.url, delay_ms=0, email="product@product.example")
    first = worker_factory()
    wait_until(lambda: first.output.count("lease taken") == 2, timeout=30, message=lambda: first.output)
    second = worker_factory()
    wait_until(lambda: all(f"sending lease of the stream {s}" in second.output
                           for s in ("default", f"identity:{product.id}")),
               timeout=30, message=lambda: second.output)
    assert "lease taken" not in second.output
    holders = {_lease_holder(redis_client, namespace, s) for s in ("default", f"identity:{product.id}")}
    # Idle, both streams listening: a deploy's SIGTERM is obeyed at once (a listen lasts 1 s).
    asked = time.monotonic()
    assert first.terminate(timeout=10) == 0
    assert time.monotonic() - asked < 3, first.output
    wait_until(lambda: second.output.count("lease taken") == 2, timeout=15, message=lambda: second.output)
    taken = {_lease_holder(redis_client, namespace, s) for s in ("default", f"identity:{product.id}")}
    assert None not in taken and not taken & holders

    product_list = make_list(db.session, 4, "Product users", domain="users.example")
    launch = _send(app, product_list.id, product.id)
    wait_until(lambda: broadcast_status(launch) == "sent", timeout=30, message=lambda: second.output)
    assert sorted(second_server.recipients()) == [f"reader{i:05d}@users.example" for i in range(4)]


def test_identities_changed_or_deleted_while_the_worker_runs_are_followed(
        app, app_config, smtp_server, second_server, worker_factory, redis_client, namespace):
    product = make_identity("Product", second_server.url, delay_ms=0, email="product@product.example")
    stream = f"identity:{product.id}"
    worker = worker_factory()
    wait_until(lambda: worker.output.count("lease taken") == 2, timeout=30, message=lambda: worker.output)
    first_holder = _lease_holder(redis_client, namespace, stream)

    # A new pace: the stream starts again on it (a new holder of the same lease).
    identities.update(db.session, product.id, identities.parse_input(
        {"name": "Product", "from": "Product <product@product.example>", "delay_ms": 30},
        updating=True))
    wait_until(lambda: worker.output.count("lease taken") == 3, timeout=30, message=lambda: worker.output)
    assert _lease_holder(redis_client, namespace, stream) not in (None, first_holder)
    product_list = make_list(db.session, 6, "Product users", domain="users.example")
    launch = _send(app, product_list.id, product.id)
    wait_until(lambda: broadcast_status(launch) == "sent", timeout=30, message=lambda: worker.output)
    assert min(second_server.paired_gaps()) >= 0.030 * 0.9, second_server.gaps()

    # Deleted: its stream stops and lets its lease go; the default's goes on.
    identities.delete(db.session, product.id)
    wait_until(lambda: _lease_holder(redis_client, namespace, stream) is None, timeout=30,
               message=lambda: worker.output)
    assert "identity Product is gone" in worker.output
    assert _lease_holder(redis_client, namespace, "default") is not None
    assert worker.proc is not None and worker.proc.poll() is None


def test_a_burst_in_this_process_sends_for_each_named_identity_on_its_own_thread(
        app, smtp_server, second_server):
    app.config["SMTP_URL"] = smtp_server.url
    product = make_identity("Product", second_server.url, delay_ms=0, email="product@product.example")
    news = _send(app, make_list(db.session, 3, "News", domain="news.example").id, None)
    launch = _send(app, make_list(db.session, 3, "Users", domain="users.example").id, product.id)
    db.session.commit()
    assert run_worker(from_flask(app), burst=True, identities=("default", "Product")) == 0
    db.session.expire_all()
    assert statuses(news) == {"sent": 3} and statuses(launch) == {"sent": 3}
    assert all(m.mail_from == "product@product.example" for m in second_server.messages)
    assert all(m.mail_from != "product@product.example" for m in smtp_server.messages)


def test_each_thread_finds_its_own_streams_runtime(app):
    default, product = worker_runtime(app, None), worker_runtime(app, None, identity="Product")
    seen: dict[str, object] = {}

    def serve(name: str, rt) -> None:
        runtime.bind(rt)
        try:
            seen[name] = runtime.get()
        finally:
            runtime.bind(None)

    threads = [threading.Thread(target=serve, args=(n, rt)) for n, rt in
               (("default", default), ("product", product))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == {"default": default, "product": product}
    with pytest.raises(RuntimeError):
        runtime.get()  # this thread bound none, and no process-wide one is set
