"""Our Message-IDs are written once, in broadside.mail.message_refs: each of its three forms
names its row (`row_of` reads it back), and the worker sends every kind of mail with them."""

from __future__ import annotations

import re
from email.utils import parseaddr
from pathlib import Path

from sqlalchemy import select

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_test
from broadside.core.models import Delivery, TransactionalMessage
from broadside.mail.message_refs import (
    automation_message_id,
    delivery_message_id,
    ref_for,
    row_of,
    transactional_message_id,
)
from jobs.automations import AutomationRecheck, MessageRow
from tests.helpers import get_jobs, make_list, start_broadcast, worker_runtime
from webapp.extensions import db

ROOT = Path(__file__).resolve().parents[2]
SENDERS = ("news@example.com", "a@b.c", "no-at-sign")


def test_each_message_id_names_its_row_and_keeps_its_bytes():
    for sender in SENDERS:
        domain = sender.rpartition("@")[2] or "localhost"
        cases = [
            (delivery_message_id(987654, 12, sender), f"<broadside.d987654.b12@{domain}>",
             ("delivery", 987654)),
            (automation_message_id(31, 4, sender), f"<broadside.m31.a4@{domain}>",
             ("automation message", 31)),
            (transactional_message_id(7, sender), f"<broadside.t7@{domain}>",
             ("transactional message", 7)),
        ]
        for written, expected, row in cases:
            assert written == expected  # the bytes every earlier message was sent with
            assert row_of(written) == row
            reference = ref_for(written)
            assert reference is not None and row_of(reference) == row


def test_no_module_but_message_refs_writes_the_format():
    """A second hand-written copy of `<broadside.d…`, `.m…` or `.t…` anywhere in the code."""
    written = re.compile(r"""f["']<broadside\.[dmt]\{""")
    offenders = [str(path.relative_to(ROOT))
                 for folder in ("broadside", "jobs", "webapp")
                 for path in (ROOT / folder).rglob("*.py")
                 if written.search(path.read_text()) and path.name != "message_refs.py"]
    assert offenders == []


def test_the_worker_sends_each_kind_with_message_refs(app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 1)
    broadcast = start_broadcast(app, weekly)
    draft = create_draft(db.session, list_id=weekly.id, subject="Draft", body="Body")
    send_test(db.session, draft.id, "tester@example.com", default_from=app.config["MAIL_FROM"],
              jobs=get_jobs())
    run_worker_burst()
    by_rcpt = {m.rcpt_tos[0]: m.message for m in smtp_server.messages}
    copy, test = by_rcpt["reader00000@example.com"], by_rcpt["tester@example.com"]
    delivery_id = db.session.scalar(select(Delivery.id).where(Delivery.broadcast_id == broadcast.id))
    sender = parseaddr(copy["From"])[1]
    assert copy["Message-ID"] == delivery_message_id(delivery_id, broadcast.id, sender)
    row = db.session.scalars(select(TransactionalMessage)).one()
    assert test["Message-ID"] == row.message_id == \
        transactional_message_id(row.id, parseaddr(test["From"])[1])

    automation = AutomationRecheck(db.session, worker_runtime(app, None), fields=False)
    automation.from_email = "steps@example.net"
    assert automation.message_id(MessageRow(8, None, automation_id=3, revision_id=1)) == \
        automation_message_id(8, 3, "steps@example.net")
