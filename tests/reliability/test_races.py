"""Things that happen while the worker is sending: people leaving through the link in last
week's email, the provider reporting bounces and complaints, the owner pausing and resuming
in quick succession, and the same slice job queued several times over.

Every request goes over real HTTP to the running app, beside a real worker process.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core.models import Delivery, Event, Subscriber
from broadside.core.site_settings import update_settings
from broadside.delivery import queues
from tests.helpers import (
    OWNER_EMAIL,
    OWNER_PASSWORD,
    Browser,
    assert_ledger_consistent,
    assert_nobody_twice,
    broadcast_row,
    broadcast_status,
    csrf_token_from,
    make_list,
    start_broadcast,
    statuses,
    wait_until,
    webhook_body,
    webhook_headers,
)
from tests.webapp.test_unsubscribe import http, one_click
from webapp.extensions import db, get_jobs

pytestmark = pytest.mark.slow

WEBHOOK_SECRET = "whsec-reliability-races"


def addr(i: int) -> str:
    return f"reader{i:05d}@example.com"


def signed_event(base_url: str, payload: dict) -> int:
    body = webhook_body(**payload)
    return http("POST", base_url + "/webhooks/events", body,
                webhook_headers(body, WEBHOOK_SECRET))[0]


def api(base_url: str, api_headers: dict, path: str) -> int:
    return http("POST", f"{base_url}/api{path}", b"", api_headers)[0]


def skip_reasons(broadcast_id: int) -> dict[str, str]:
    db.session.expire_all()
    rows = db.session.execute(
        select(Subscriber.email, Delivery.reason)
        .join(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.broadcast_id == broadcast_id, Delivery.status == "skipped")
    ).all()
    db.session.commit()
    return dict(rows)


def test_leaving_bouncing_and_complaining_during_a_send_are_honoured_at_each_persons_turn(
    app, app_config, smtp_server, worker_factory, live_server, run_worker_burst
):
    app.config.update(BASE_URL=live_server.url, WEBHOOK_SECRET=WEBHOOK_SECRET)
    app_config.update(BASE_URL=live_server.url, SEND_DELAY_MS=10)
    weekly = make_list(db.session, 300)
    # Last week's newsletter: everyone has a List-Unsubscribe link in their inbox.
    start_broadcast(app, weekly, subject="Last week")
    run_worker_burst()
    links = {m.rcpt_tos[0].lower(): m.message["List-Unsubscribe"].strip("<> ")
             for m in smtp_server.messages}
    assert len(links) == 300
    last_week = len(smtp_server.messages)

    broadcast = start_broadcast(app, weekly, subject="This week")
    worker_factory()
    smtp_server.wait_for(last_week + 30, timeout=30)
    leavers = [addr(i) for i in range(200, 210)]
    bounced = [addr(i) for i in range(210, 215)]
    complained = [addr(i) for i in range(215, 220)]
    answers = [one_click(links[a])[0] for a in leavers]
    answers += [signed_event(live_server.url, {"type": "bounce", "bounce_type": "hard", "email": a,
                                               "detail": "550 5.1.1 gone"}) for a in bounced]
    answers += [signed_event(live_server.url, {"type": "complaint", "email": a}) for a in complained]
    reached = len(smtp_server.messages) - last_week
    assert reached < 200, f"the worker reached the leavers ({reached}) before they left"
    assert answers == [200] * 10 + [202] * 10

    wait_until(lambda: broadcast_status(broadcast.id) == "sent", timeout=40)
    this_week = smtp_server.recipients()[last_week:]
    assert_nobody_twice(this_week)
    assert not {*leavers, *bounced, *complained} & set(this_week)
    assert assert_ledger_consistent(broadcast.id, this_week) == {"sent": 280, "skipped": 20}
    reasons = skip_reasons(broadcast.id)
    assert {reasons[a] for a in leavers} == {"unsubscribed"}
    assert {reasons[a] for a in bounced} == {"suppressed: bounced"}
    assert {reasons[a] for a in complained} == {"suppressed: complained"}


def test_pause_over_the_api_stops_within_one_send_and_quick_pause_resume_cycles_never_double(
    app, app_config, smtp_server, worker_factory, live_server, api_headers
):
    app_config["SEND_DELAY_MS"] = 10
    weekly = make_list(db.session, 300)
    broadcast = start_broadcast(app, weekly)
    worker = worker_factory()
    smtp_server.wait_for(40, timeout=30)
    assert api(live_server.url, api_headers, f"/broadcasts/{broadcast.id}/pause") == 200
    at_pause = len(smtp_server.messages)
    # The running slice notices at its next recipient, hands back the rest of its batch and
    # ends (or, if the pause fell between two slices, the next one finds it paused).
    wait_until(lambda: "slice done: stopped" in worker.output
               or "sending" not in statuses(broadcast.id), timeout=10)
    # At most the message already in flight when the pause was committed.
    assert len(smtp_server.messages) <= at_pause + 1
    paused = statuses(broadcast.id)
    assert set(paused) == {"sent", "pending"}, paused
    # The rest of the claimed batch went back to pending without counting as an attempt.
    db.session.expire_all()
    assert set(db.session.scalars(select(Delivery.attempts).where(
        Delivery.broadcast_id == broadcast.id, Delivery.status == "pending"))) == {0}
    assert "Paused by the owner" in broadcast_row(broadcast.id).pause_reason

    # An owner hammering the buttons: resume, pause, resume... while the worker picks it up.
    for _ in range(4):
        assert api(live_server.url, api_headers, f"/broadcasts/{broadcast.id}/resume") == 200
        smtp_server.wait_for(len(smtp_server.messages) + 5, timeout=20)
        assert api(live_server.url, api_headers, f"/broadcasts/{broadcast.id}/pause") == 200
    assert api(live_server.url, api_headers, f"/broadcasts/{broadcast.id}/resume") == 200
    wait_until(lambda: broadcast_status(broadcast.id) == "sent", timeout=40)
    received = smtp_server.recipients()
    assert_nobody_twice(received)
    assert assert_ledger_consistent(broadcast.id, received) == {"sent": 300}


def test_four_owners_pressing_send_on_one_draft_at_once_send_it_once(app, live_server, owner):
    """Through the owner's own page (the API's version is in tests/webapp/test_api_broadcasts.py)."""
    update_settings(db.session, sender_name="Acme", sender_email="news@example.com",
                    postal_address="1 Main Street, Springfield", time_zone="UTC")
    weekly = make_list(db.session, 50)
    draft_id = create_draft(db.session, list_id=weekly.id, subject="Race", body="Hello").id
    owners = [Browser(live_server.url).sign_in(OWNER_EMAIL, OWNER_PASSWORD) for _ in range(4)]
    tokens = [csrf_token_from(b.request("GET", f"/broadcasts/{draft_id}/send")[1]) for b in owners]
    barrier = threading.Barrier(len(owners))
    pages: list[tuple[int, str]] = []

    def press_send(browser: Browser, token: str) -> None:
        barrier.wait()
        # No worker runs here, so the page asks to confirm queueing anyway.
        pages.append(browser.submit(f"/broadcasts/{draft_id}/send",
                                    {"csrf_token": token, "queue_anyway": "y"}))

    threads = [threading.Thread(target=press_send, args=pair) for pair in zip(owners, tokens, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert [status for status, _ in pages] == [200] * 4
    assert sum("Sending to 50 subscribers" in text for _, text in pages) == 1
    db.session.expire_all()
    assert db.session.scalar(select(func.count()).select_from(Delivery)) == 50
    assert db.session.scalar(select(func.count()).select_from(Event).where(
        Event.broadcast_id == draft_id, Event.kind == "queued")) == 1
    assert broadcast_status(draft_id) == "queued"


def test_the_same_slice_job_queued_several_times_sends_each_person_once(
    app, app_config, smtp_server, worker_factory
):
    app_config["SEND_DELAY_MS"] = 5
    weekly = make_list(db.session, 300)
    broadcast = start_broadcast(app, weekly)
    queue = get_jobs().queue(queues.BROADCASTS)
    # Bypassing the "already queued" marker, as a retried enqueue or an operator's
    # `rq requeue` would: three jobs for one broadcast before the worker starts...
    for _ in range(2):
        queue.enqueue("jobs.tasks.send_broadcast_slice", broadcast.id, result_ttl=0)
    assert queue.count == 3
    worker = worker_factory()
    smtp_server.wait_for(60, timeout=30)
    # ...and two more while it sends.
    for _ in range(2):
        queue.enqueue("jobs.tasks.send_broadcast_slice", broadcast.id, result_ttl=0)
    wait_until(lambda: broadcast_status(broadcast.id) == "sent", timeout=40)
    wait_until(lambda: queue.count == 0, timeout=20)

    received = smtp_server.recipients()
    assert_nobody_twice(received)
    assert assert_ledger_consistent(broadcast.id, received) == {"sent": 300}
    assert "Traceback" not in worker.output
