"""A welcome overtakes a long broadcast within one slice, through the real worker."""

from __future__ import annotations

import pytest

from broadside.audience.subscribers import service as subscribers
from broadside.campaigns.automations import service as automations
from jobs.engine import MAX_BATCH
from tests.helpers import broadcast_status, make_list, start_broadcast
from webapp.extensions import db

# Every email prints a postal address: automations need Settings' to be enabled and to send.
pytestmark = pytest.mark.usefixtures("postal_address")

SLICE_SECONDS = 0.3
DELAY_MS = 2
LIST_SIZE = 1000
JOIN_AT = 200


def test_a_welcome_overtakes_a_1000_recipient_broadcast_within_one_slice(
        app, smtp_server, run_worker_burst):
    app.config.update(SLICE_SECONDS=SLICE_SECONDS, SEND_DELAY_MS=DELAY_MS)
    weekly = make_list(db.session, LIST_SIZE)
    data = automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly.id},
        "steps": [{"delay": "PT0S", "subject": "Welcome", "body": "Hi"}]})
    automations.enable(db.session, automations.create_automation(
        db.session, data, default_from=app.config["MAIL_FROM"]).id)
    broadcast = start_broadcast(app, weekly)
    joined_at: list[int] = []

    def join_while_sending(envelope) -> None:
        # Someone signs up while the broadcast is a fifth of the way through.
        if len(smtp_server.messages) == JOIN_AT and not joined_at:
            with app.app_context():
                subscribers.save_subscriber(db.session, email="newcomer@example.com",
                                            list_ids=[weekly.id], welcome=True)
                db.session.remove()
            joined_at.append(len(smtp_server.messages))

    smtp_server.script.on_data = join_while_sending
    run_worker_burst()
    assert broadcast_status(broadcast.id) == "sent"
    received = smtp_server.recipients()
    assert len(received) == LIST_SIZE + 1 and joined_at
    welcome_at = received.index("newcomer@example.com")
    # Between the join and the welcome, at most the rest of the slice in progress: its pace
    # allows SLICE_SECONDS / DELAY_MS sends, plus the batch claimed just before its end.
    most = int(SLICE_SECONDS / (DELAY_MS / 1000)) + MAX_BATCH
    assert welcome_at - joined_at[0] <= most, (welcome_at, joined_at)
    assert welcome_at < LIST_SIZE - 100  # well before the broadcast's end
