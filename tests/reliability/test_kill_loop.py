"""A worker killed every second or two, that still delivers mail between its deaths, finishes
the broadcast: the bound on automatic resumptions counts runs without progress, not deaths."""

from __future__ import annotations

import socket

import pytest

from broadside.campaigns.broadcasts.lifecycle import MAX_AUTO_RESUMES
from broadside.delivery.lease import LEASE_KEY
from tests.helpers import (
    assert_ledger_consistent,
    assert_nobody_twice,
    broadcast_row,
    make_list,
    start_broadcast,
    wait_until,
)
from webapp.extensions import db, get_redis

pytestmark = pytest.mark.slow

LIST_SIZE = 200  # 14 lives send a few each; the last sends the rest
# More deaths than the bound allows resumptions without progress: before progress was measured,
# the broadcast was paused at the eleventh ("stopped 10 times in a row without progress").
KILLS = MAX_AUTO_RESUMES + 4


def test_a_worker_killed_again_and_again_that_keeps_sending_finishes_the_broadcast(
    app, app_config, smtp_server, worker_factory
):
    app_config["SEND_DELAY_MS"] = 50  # each life sends a few, and claims few at a time
    broadcast = start_broadcast(app, make_list(db.session, LIST_SIZE))
    lease = f"{app_config['BROADSIDE_NAMESPACE']}:{LEASE_KEY}"
    for death in range(KILLS):
        settled = broadcast_row(broadcast.id).sent_count
        worker = worker_factory()
        # Each life delivers (and records) a few messages before it is killed...
        try:
            wait_until(lambda since=settled: broadcast_row(broadcast.id).sent_count >= since + 3,
                       timeout=30)
        except AssertionError:
            raise AssertionError(f"life {death} sent nothing:\n{worker.output[-3000:]}") from None
        worker.kill()
        # ...and its lease is gone at once, as if its 8 s had run out, so the test does not wait.
        get_redis().delete(lease)
        row = broadcast_row(broadcast.id)
        assert row.status == "sending", f"after death {death}: {row.status} ({row.pause_reason})"
    worker_factory()
    wait_until(lambda: broadcast_row(broadcast.id).status == "sent", timeout=60,
               message="the broadcast did not finish after the last restart")
    received = smtp_server.recipients()
    assert_nobody_twice(received)
    result = assert_ledger_consistent(broadcast.id, received)
    assert result["sent"] + result.get("unknown", 0) == LIST_SIZE


def test_a_worker_that_dies_before_every_send_is_still_paused_with_the_reason(
    app, app_config, worker_factory
):
    """The other half of the bound: a worker that never gets a message out is stopped. Here
    the mail server accepts connections but never answers, so each life claims a row, waits on
    the server, and is killed: its row becomes `unknown`, which is not progress."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        app_config["SMTP_URL"] = f"smtp://127.0.0.1:{silent.getsockname()[1]}"
        app_config["SEND_DELAY_MS"] = 200  # the default pace: one row claimed at a time
        broadcast = start_broadcast(app, make_list(db.session, 30))
        lease = f"{app_config['BROADSIDE_NAMESPACE']}:{LEASE_KEY}"
        for death in range(MAX_AUTO_RESUMES + 1):
            worker = worker_factory()
            # This life repaired the last one's row and claimed its own, then hung on the server.
            wait_until(lambda d=death: (broadcast_row(broadcast.id).unknown_count == d
                                        and broadcast_row(broadcast.id).sending_count == 1),
                       timeout=30, message=f"life {death} claimed nothing")
            worker.kill()
            get_redis().delete(lease)
        last = worker_factory()  # repairs the last life's row, and finds the run at its bound
        try:
            wait_until(lambda: broadcast_row(broadcast.id).status == "paused", timeout=30)
        except AssertionError:
            row = broadcast_row(broadcast.id)
            raise AssertionError(f"not paused: {row.status} auto_resumes={row.auto_resumes} "
                                 f"unknown={row.unknown_count}\n{last.output[-2500:]}") from None
    row = broadcast_row(broadcast.id)
    assert f"{MAX_AUTO_RESUMES} times in a row without progress" in row.pause_reason
    assert (row.sent_count, row.unknown_count) == (0, MAX_AUTO_RESUMES + 1)
