""""Send again those that failed for a temporary reason" is offered only when some did: most
failures are refusals for good, and sending them again would be refused the same way. Asked
for anyway, the answer says there is nothing to send again, and why."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from broadside.core.models import Broadcast, Delivery, Subscriber
from tests.helpers import csrf_token_from, make_list, start_broadcast
from webapp.extensions import db

HTMX = {"HX-Request": "true"}


def email(i: int) -> str:
    return f"reader{i:05d}@example.com"


def send_with(app, smtp_server, run_worker_burst, replies: dict[str, list[str]]) -> Broadcast:
    weekly = make_list(db.session, 3)
    broadcast = start_broadcast(app, weekly, subject="News", body="Hello")
    smtp_server.script.rcpt_replies = replies
    app.config["RETRY_BASE_SECONDS"] = 0.002  # deferrals take milliseconds
    run_worker_burst()
    db.session.expire_all()
    done = db.session.get(Broadcast, broadcast.id)
    assert done.status == "sent"
    return done


@pytest.fixture
def refused_for_good(app, smtp_server, run_worker_burst) -> Broadcast:
    done = send_with(app, smtp_server, run_worker_burst, {email(1): ["550 5.1.1 No such user"]})
    assert (done.sent_count, done.failed_count) == (2, 1)
    return done


def test_no_retry_link_when_every_failure_was_for_good(logged_in_client, refused_for_good):
    page = logged_in_client.get(f"/broadcasts/{refused_for_good.id}").text
    assert "<strong>1 failed.</strong>" in page
    assert "retry-transient-link" not in page and "failed for a temporary reason" not in page
    fragment = logged_in_client.get(f"/broadcasts/{refused_for_good.id}/progress", headers=HTMX).text
    assert "<strong>1 failed.</strong>" in fragment and "retry-transient-link" not in fragment


def test_asking_to_retry_none_says_so_clearly(logged_in_client, refused_for_good):
    here = f"/broadcasts/{refused_for_good.id}"
    confirm = logged_in_client.get(f"{here}/retry/transient")
    assert confirm.status_code == 200
    assert "Nothing to send again" in confirm.text
    assert "No delivery of this broadcast failed for a temporary reason" in confirm.text
    assert "confirm-retry" not in confirm.text
    assert "kept answering" not in confirm.text  # no claim about addresses that do not exist

    done = logged_in_client.post(f"{here}/retry/transient",
                                 data={"csrf_token": csrf_token_from(confirm.text), "confirm": "yes"})
    assert done.status_code == 303 and done.headers["Location"] == here
    shown = logged_in_client.get(done.headers["Location"]).text
    assert "Nothing was sent again. No delivery of this broadcast failed for a temporary reason" in shown
    db.session.expire_all()
    refused = db.session.scalars(select(Delivery).join(Subscriber, Subscriber.id == Delivery.subscriber_id)
                                 .where(Subscriber.email == email(1))).one()
    assert refused.status == "failed"
    assert db.session.get(Broadcast, refused_for_good.id).status == "sent"


def test_the_retry_link_is_there_when_some_failed_for_a_temporary_reason(
        app, logged_in_client, smtp_server, run_worker_burst):
    done = send_with(app, smtp_server, run_worker_burst,
                     {email(0): ["451 4.3.0 Try again later"] * 10,
                      email(1): ["550 5.1.1 No such user"]})
    assert done.failed_count == 2
    page = logged_in_client.get(f"/broadcasts/{done.id}").text
    assert f'href="/broadcasts/{done.id}/retry/transient" id="retry-transient-link"' in page
    confirm = logged_in_client.get(f"/broadcasts/{done.id}/retry/transient").text
    assert "Send again to 1 recipient?" in confirm and email(0) in confirm
