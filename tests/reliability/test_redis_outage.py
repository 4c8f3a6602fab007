"""Redis flushed or restarted mid-send: sending stops cleanly and resumes by itself.

Redis holds only the queue and the lease; the database is the source of truth. When the lease
vanishes the sender stops before its next message; the worker's maintenance thread takes the
lease again once Redis answers and gives the broadcast a new job (orphan repair). These tests
run against a private redis-server, never the shared one other tests use.
"""

from __future__ import annotations

import time

import pytest

from jobs.engine import batch_size_for, pace_limit
from tests.helpers import (
    assert_ledger_consistent,
    assert_nobody_twice,
    broadcast_status,
    make_list,
    start_broadcast,
    wait_until,
)
from tests.private_redis import PrivateRedis
from webapp.extensions import db

pytestmark = pytest.mark.slow

LIST_SIZE = 200


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """Redis's failures do not depend on the database; the crash tests cover both."""
    return request.param


@pytest.fixture
def app_config(app_config, private_redis):
    app_config["REDIS_URL"] = private_redis.url
    app_config["SEND_DELAY_MS"] = 10
    return app_config


def finished_without_doubles(broadcast_id: int, smtp_server) -> dict[str, int]:
    wait_until(lambda: broadcast_status(broadcast_id) == "sent", timeout=45,
               message="the broadcast did not resume and finish by itself")
    received = smtp_server.recipients()
    assert_nobody_twice(received)
    result = assert_ledger_consistent(broadcast_id, received)
    # The sender stopped between messages, so nothing was left in flight.
    assert result == {"sent": LIST_SIZE}
    return result


def test_redis_flushed_twice_mid_send_resumes_by_itself_without_doubles(
    app, smtp_server, worker_factory, private_redis
):
    weekly = make_list(db.session, LIST_SIZE)
    broadcast = start_broadcast(app, weekly)
    worker = worker_factory()
    for at in (40, 110):
        smtp_server.wait_for(at, timeout=40)
        private_redis.flushall()  # the queue, the job, the lease and every marker: gone
    finished_without_doubles(broadcast.id, smtp_server)
    assert "lease had vanished" in worker.output
    assert worker.proc.poll() is None, "the worker should survive a flush"


def test_redis_killed_and_restarted_mid_send_stops_sending_then_resumes_by_itself(
    app, smtp_server, worker_factory, private_redis
):
    weekly = make_list(db.session, LIST_SIZE)
    broadcast = start_broadcast(app, weekly)
    worker = worker_factory()
    smtp_server.wait_for(40, timeout=40)
    private_redis.kill()
    at_kill = len(smtp_server.recipients())
    # Two failed lease renewals (said at most every 2 s) prove Redis has been down a while.
    wait_until(lambda: worker.output.count("Redis unreachable") >= 2, timeout=15,
               message="the worker did not notice that Redis was gone")
    during = len(smtp_server.recipients())
    # The lease is re-checked before every claim (the worker's lease rule), and one claim covers at
    # most ~0.2 s of sends (20 rows at the 10 ms pace): at most that batch completes once Redis
    # is gone, and nothing after it until the lease is back.
    claim = batch_size_for(pace_limit(0.010))
    assert during <= at_kill + claim, f"{during - at_kill} messages sent without a lease"

    private_redis.start()  # same port, empty: like a Redis restart without persistence
    restarted_at = time.monotonic()
    wait_until(lambda: len(smtp_server.recipients()) > during, timeout=20,
               message="sending did not resume after Redis came back")
    assert time.monotonic() - restarted_at < 15
    finished_without_doubles(broadcast.id, smtp_server)
    assert "lease had vanished" in worker.output
    assert worker.proc.poll() is None, "the worker should survive a Redis restart"
    # It said what was wrong and when it was right again, in words (broadside.core.redis_health).
    log = worker.output
    assert f"Redis is not answering at {private_redis.url}: start it, e.g. `sudo apt-get" in log
    assert f"Redis is answering again at {private_redis.url}" in log


def test_a_worker_started_before_redis_says_so_in_words_and_sends_once_it_answers(
    app, app_config, smtp_server, worker_factory, tmp_path
):
    weekly = make_list(db.session, 3)
    broadcast = start_broadcast(app, weekly)  # queued on the Redis the web app uses
    late = PrivateRedis(tmp_path / "late")  # its port chosen; nothing listening there yet
    app_config["REDIS_URL"] = late.url
    worker = worker_factory()
    said = f"Redis is not answering at {late.url}: start it, e.g. `sudo apt-get install redis-server`"
    wait_until(lambda: said in worker.output, timeout=30, message="the worker did not say Redis is missing")
    assert "another worker holds the sending lease" not in worker.output
    assert worker.proc.poll() is None, "the worker should wait for Redis, not exit"

    late.start()
    try:
        # Retried with backoff, it says so and takes the lease; orphan repair queues the
        # broadcast on this Redis, and it is sent.
        wait_until(lambda: f"Redis is answering again at {late.url}" in worker.output, timeout=20,
                   message="the worker did not notice Redis answering")
        assert "lease taken by" in worker.output
        smtp_server.wait_for(3, timeout=30)
        wait_until(lambda: broadcast_status(broadcast.id) == "sent", timeout=30)
        assert worker.output.count(said) == 1, "said once, not on every retry"
    finally:
        worker.stop()
        late.kill()
