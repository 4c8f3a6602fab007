"""A worker SIGKILLed at random moments, again and again, never sends anyone a second copy.

Each kill lands at a random point of the send loop (between two messages, mid-conversation,
while committing a batch); the next worker waits out the dead one's lease (8 s), repairs
the rows left in flight to `unknown` and carries on from the rows still pending.
"""

from __future__ import annotations

import os
import random
import re
import time

import pytest
from sqlalchemy import select

from broadside.core.models import Event
from jobs.engine import batch_size_for, pace_limit
from tests.helpers import (
    assert_ledger_consistent,
    assert_nobody_twice,
    broadcast_status,
    make_list,
    start_broadcast,
    wait_until,
)
from webapp.extensions import db

pytestmark = pytest.mark.slow

LIST_SIZE = 300
# Kills cost the lease TTL (8 s) each before the next worker may send: three keep this test
# near half a minute per backend.
KILLS = ("main", "group", "main")


def test_sigkill_at_random_moments_never_sends_twice_and_loses_at_most_a_batch_per_kill(
    app, app_config, smtp_server, worker_factory
):
    seed = int(os.environ.get("BROADSIDE_CHAOS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    note = f"(seed {seed}; rerun with BROADSIDE_CHAOS_SEED={seed})"
    app_config["SEND_DELAY_MS"] = 5
    weekly = make_list(db.session, LIST_SIZE)
    broadcast = start_broadcast(app, weekly)

    workers = []
    for how in KILLS:
        worker = worker_factory()
        workers.append(worker)
        target = len(smtp_server.recipients()) + rng.randint(15, 50)
        smtp_server.wait_for(target, timeout=40)
        # A random phase within one send cycle (about 5 ms of pacing plus the conversation),
        # so the kill does not always land just after a reply.
        time.sleep(rng.uniform(0, 0.02))
        worker.kill(group=(how == "group"))

    assert broadcast_status(broadcast.id) != "sent", f"the list ran out before the last kill {note}"
    workers.append(worker_factory())
    wait_until(lambda: broadcast_status(broadcast.id) == "sent", timeout=60,
               message=f"the broadcast did not finish after the last restart {note}")

    received = smtp_server.recipients()
    assert_nobody_twice(received)
    result = assert_ledger_consistent(broadcast.id, received)
    assert set(result) <= {"sent", "unknown"}, note
    # A claim is about 0.2 s of sends at the rate achieved, which the 5 ms pace bounds.
    most_per_kill = batch_size_for(pace_limit(0.005))
    assert result.get("unknown", 0) <= most_per_kill * len(KILLS), f"{result} {note}"
    # Nothing was lost: every address is either received or shown to the owner as unknown.
    assert result["sent"] + result.get("unknown", 0) == LIST_SIZE
    # Each unknown row says why, and every one was repaired by a worker starting up (the rows
    # the dead one had claimed), not by anything that might have sent it again.
    reasons = db.session.scalars(
        select(Event.detail).where(Event.broadcast_id == broadcast.id, Event.kind == "unknown")
    ).all()
    assert len(reasons) == result.get("unknown", 0)
    assert all("worker stopped mid-send" in r for r in reasons)
    repaired = sum(int(n) for w in workers
                   for n in re.findall(r"repaired (\d+) deliveries left in flight", w.output))
    assert repaired == result.get("unknown", 0), note
