"""Welcomes written by a background import while the worker is SIGKILLed again and again: every
person the import added gets the welcome once or is `unknown`, nobody gets it twice, and
nobody outside the import gets it (a person already on the list, a person not in the file)."""

from __future__ import annotations

import io
import os
import random
import time

import pytest
from sqlalchemy import func, select

from broadside.audience.transfer import importer
from broadside.campaigns.automations import service as automations
from broadside.core.models import (
    AutomationEntry,
    AutomationMessage,
    Import,
    MailingList,
    Subscriber,
    Subscription,
)
from tests.helpers import assert_nobody_twice, wait_until
from webapp.extensions import db, get_jobs

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("postal_address")]

ROWS = 1000
KILLS = ("main", "group", "main")


def settled(automation_id: int) -> bool:
    db.session.expire_all()
    left = db.session.scalar(select(func.count()).select_from(AutomationMessage).where(
        AutomationMessage.automation_id == automation_id,
        AutomationMessage.status.in_(("pending", "sending"))))
    imported = db.session.scalar(select(Import.status).order_by(Import.id.desc()).limit(1))
    return imported == "done" and left == 0


def test_an_import_with_welcomes_survives_sigkills_without_a_second_copy(
        app, app_config, smtp_server, worker_factory):
    seed = int(os.environ.get("BROADSIDE_CHAOS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    note = f"(seed {seed}; rerun with BROADSIDE_CHAOS_SEED={seed})"
    app_config["SEND_DELAY_MS"] = 5
    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.flush()
    known = Subscriber(email="known@example.com", name="Known")
    outsider = Subscriber(email="outsider@example.com", name="Out")
    db.session.add_all([known, outsider])
    db.session.flush()
    db.session.add_all([Subscription(subscriber_id=known.id, list_id=weekly.id, status="active"),
                        Subscription(subscriber_id=outsider.id, list_id=weekly.id, status="active")])
    db.session.commit()
    data = automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly.id},
        "steps": [{"delay": "PT0S", "subject": "Welcome {{ name }}", "body": "Hi"}]})
    automation = automations.enable(db.session, automations.create_automation(
        db.session, data, default_from=app.config["MAIL_FROM"]).id)
    lines = (["email,name"] + [f"new{i:04d}@example.com,New {i}" for i in range(ROWS)]
             + ["known@example.com,Known"])
    record = importer.start_import(
        db.session, weekly.id, "people.csv", io.BytesIO("\n".join(lines).encode()),
        instance_path=app.instance_path, max_bytes=10**7, inline_max_bytes=0,
        enqueue=get_jobs().enqueue_import, consent="opted_in", welcome=True)
    assert record.status == "queued"

    for number, how in enumerate(KILLS):
        worker = worker_factory()
        if number == 0:
            # The first kill lands early: often while the import's batch is being written.
            wait_until(lambda w=worker: w.output.count("lease taken") >= 1, timeout=30)
            time.sleep(rng.uniform(0.05, 0.8))
        else:
            smtp_server.wait_for(len(smtp_server.recipients()) + rng.randint(20, 80), timeout=60)
            time.sleep(rng.uniform(0, 0.02))
        worker.kill(group=(how == "group"))
    worker_factory()
    wait_until(lambda: settled(automation.id), timeout=120, message=f"the welcomes did not settle {note}")

    received = smtp_server.recipients()
    assert_nobody_twice(received)
    assert set(received) <= {f"new{i:04d}@example.com" for i in range(ROWS)}, note
    rows = db.session.execute(
        select(Subscriber.email, AutomationMessage.status)
        .join(AutomationMessage, AutomationMessage.subscriber_id == Subscriber.id)
        .where(AutomationMessage.automation_id == automation.id)).all()
    by_status: dict[str, set[str]] = {}
    for email, status in rows:
        by_status.setdefault(status, set()).add(email)
    assert set(by_status) <= {"sent", "unknown"}, f"{ {k: len(v) for k, v in by_status.items()} } {note}"
    assert len(rows) == ROWS, note  # one message each, for exactly the people the import added
    # Every sent row was received; whatever else was received is one shown as unknown (the
    # kill came after the server took it, before the worker recorded it).
    assert by_status["sent"] <= set(received), note
    assert set(received) <= by_status["sent"] | by_status.get("unknown", set()), note
    assert db.session.scalar(select(func.count()).select_from(AutomationEntry).where(
        AutomationEntry.subscriber_id.in_([known.id, outsider.id]))) == 0
