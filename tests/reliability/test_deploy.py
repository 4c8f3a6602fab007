"""SIGTERM mid-send (a deploy), in the awkward places: during a slow reply, twice, and while
the worker is waiting to retry. Nothing is lost, nothing is doubled, the broadcast continues.

(tests/jobs/test_worker_process.py covers one SIGTERM between sends; these go further.)
"""

from __future__ import annotations

import signal
import threading
import time

import pytest
from sqlalchemy import select

from broadside.core.models import Delivery, Subscriber
from jobs.engine import batch_size_for, pace_limit
from tests.helpers import (
    assert_ledger_consistent,
    assert_nobody_twice,
    broadcast_status,
    emails_by_status,
    make_list,
    start_broadcast,
    statuses,
    wait_until,
)
from webapp.extensions import db

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """Signals do not depend on the database; the crash tests run on both."""
    return request.param

SLOW_REPLY_S = 2.5


def slow_reply_for(address: str, seconds: float):
    """An on_data hook: the server takes `seconds` to accept this one address's message."""
    inside = threading.Event()

    def hook(envelope) -> None:
        if envelope.rcpt_tos == [address]:
            inside.set()
            time.sleep(seconds)  # the server being slow is the scenario, not a wait

    return hook, inside


def finish_and_check(broadcast_id: int, smtp_server, worker_factory, size: int) -> dict[str, int]:
    worker_factory()
    wait_until(lambda: broadcast_status(broadcast_id) == "sent", timeout=60,
               message="the broadcast did not finish after the restart")
    received = smtp_server.recipients()
    assert_nobody_twice(received)
    result = assert_ledger_consistent(broadcast_id, received)
    assert result.get("sent", 0) + result.get("unknown", 0) == size
    return result


def test_sigterm_twice_during_a_slow_reply_lets_that_send_finish_and_be_recorded(
    app, app_config, smtp_server, worker_factory
):
    """A deploy tool that sends SIGTERM twice in a row (within a second) still gets a warm
    stop: the conversation in flight completes and is recorded `sent`, not `unknown`."""
    app_config["SEND_DELAY_MS"] = 10
    weekly = make_list(db.session, 80)
    broadcast = start_broadcast(app, weekly)
    in_flight = "reader00020@example.com"
    smtp_server.script.on_data, inside = slow_reply_for(in_flight, SLOW_REPLY_S)
    worker = worker_factory()
    assert inside.wait(40), "the worker never reached the slow recipient"
    worker.proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)  # the second signal of an impatient tool; RQ ignores repeats within 1 s
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.wait(SLOW_REPLY_S + 10) == 0

    midway = statuses(broadcast.id)
    assert "sending" not in midway and "unknown" not in midway, midway
    assert in_flight in emails_by_status(broadcast.id)["sent"]
    assert midway.get("pending", 0) > 0, "the stop came too late to prove anything"
    smtp_server.script.on_data = None

    result = finish_and_check(broadcast.id, smtp_server, worker_factory, 80)
    assert result == {"sent": 80}


def test_a_second_sigterm_after_a_second_cold_stops_and_the_message_in_flight_is_unknown(
    app, app_config, smtp_server, worker_factory
):
    """RQ treats a second SIGTERM more than a second later as "stop now": the slow reply is cut
    off mid-conversation. That message may have arrived, so it is `unknown`, never resent;
    the lease is released on the way out, so the restart sends at once."""
    app_config["SEND_DELAY_MS"] = 10
    weekly = make_list(db.session, 80)
    broadcast = start_broadcast(app, weekly)
    in_flight = "reader00020@example.com"
    smtp_server.script.on_data, inside = slow_reply_for(in_flight, SLOW_REPLY_S)
    worker = worker_factory()
    assert inside.wait(40), "the worker never reached the slow recipient"
    worker.proc.send_signal(signal.SIGTERM)
    time.sleep(1.2)  # past RQ's one-second window for repeated signals: the scenario itself
    worker.proc.send_signal(signal.SIGTERM)
    worker.proc.wait(10)
    assert "cold shut down" in worker.output, "the second signal did not force the stop"
    smtp_server.script.on_data = None
    # The server took the message after the client had gone.
    smtp_server.wait_for(21, timeout=SLOW_REPLY_S + 5)

    stopped_at = time.monotonic()
    at_stop = len(smtp_server.recipients())
    worker_factory()
    wait_until(lambda: len(smtp_server.recipients()) > at_stop, timeout=15)
    assert time.monotonic() - stopped_at < 7, "a released lease should not make the restart wait"
    wait_until(lambda: broadcast_status(broadcast.id) == "sent", timeout=60)

    received = smtp_server.recipients()
    assert_nobody_twice(received)
    result = assert_ledger_consistent(broadcast.id, received)
    assert in_flight in emails_by_status(broadcast.id)["unknown"]
    assert received.count(in_flight) == 1
    # At most the batch claimed when the stop came: about 0.2 s of sends at the 10 ms pace.
    assert 1 <= result["unknown"] <= batch_size_for(pace_limit(0.010))


def test_sigterm_while_waiting_to_retry_stops_at_once_and_the_retry_happens_after_restart(
    app, app_config, smtp_server, worker_factory
):
    app_config["SEND_DELAY_MS"] = 5
    weekly = make_list(db.session, 40)
    broadcast = start_broadcast(app, weekly)
    # The last three are refused once (451): everyone else is sent, then the slice waits for
    # their retry time (4 to 8 seconds with RETRY_BASE_SECONDS=8).
    later = [f"reader{i:05d}@example.com" for i in (37, 38, 39)]
    smtp_server.script.rcpt_replies = {a: ["451 4.3.0 Try again later"] for a in later}
    worker = worker_factory(RETRY_BASE_SECONDS="8")
    # Outcomes are recorded a batch at a time: wait for the database, not the server.
    wait_until(lambda: statuses(broadcast.id) == {"sent": 37, "pending": 3}, timeout=40)
    assert len(smtp_server.rcpt_rejections) == 3 and len(smtp_server.recipients()) == 37

    started = time.monotonic()
    assert worker.terminate(timeout=15) == 0
    took = time.monotonic() - started
    assert took < 3, f"stopping took {took:.1f}s: the retry wait must not hold up a deploy"
    db.session.expire_all()
    due = db.session.execute(
        select(Subscriber.email, Delivery.attempts, Delivery.next_attempt_at)
        .join(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.broadcast_id == broadcast.id, Delivery.status == "pending")
    ).all()
    db.session.commit()
    assert sorted(e for e, _, _ in due) == later
    assert all(attempts == 1 and next_at is not None for _, attempts, next_at in due)

    result = finish_and_check(broadcast.id, smtp_server, worker_factory, 40)
    assert result == {"sent": 40}
    assert sorted(smtp_server.recipients()[-3:]) == later
