"""Bounces and unsubscribes meet the real sending worker (a separate process) and SMTP server.

Everything goes through real HTTP against the running app: the webhook, and the one-click
POST to the List-Unsubscribe URL the worker put on a real message.
"""

from __future__ import annotations

from sqlalchemy import select

from broadside.core.models import Broadcast, Delivery, Subscriber, Subscription
from tests.helpers import make_list, start_broadcast, wait_until, webhook_body, webhook_headers
from tests.webapp.test_unsubscribe import events, http, one_click
from webapp.extensions import db

SECRET = "whsec-during-broadcast"


def _broadcast_status(broadcast_id: int) -> str:
    db.session.rollback()
    return db.session.scalar(select(Broadcast.status).where(Broadcast.id == broadcast_id))


def _post_signed(url: str, payload: dict) -> int:
    body = webhook_body(**payload)
    return http("POST", url, body, webhook_headers(body, SECRET))[0]


def test_a_bounce_arriving_during_a_broadcast_stops_further_sends_to_that_address(
    app, app_config, smtp_server, worker_factory, live_server
):
    app.config["WEBHOOK_SECRET"] = SECRET
    app_config["SEND_DELAY_MS"] = 20
    weekly = make_list(db.session, 12)
    broadcast = start_broadcast(app, weekly)
    answers: list[int] = []

    def provider_reports_while_sending(envelope) -> None:
        # While the first message is being accepted, the provider reports a hard bounce and
        # a complaint for two people whose turn comes later in this broadcast.
        if envelope.rcpt_tos == ["reader00000@example.com"] and not answers:
            hook = live_server.url + "/webhooks/events"
            answers.append(_post_signed(hook, {"type": "bounce", "bounce_type": "hard",
                                               "email": "reader00009@example.com",
                                               "detail": "550 5.1.1 mailbox gone"}))
            answers.append(_post_signed(hook, {"type": "complaint",
                                               "email": "reader00010@example.com"}))

    smtp_server.script.on_data = provider_reports_while_sending
    worker_factory()
    wait_until(lambda: _broadcast_status(broadcast.id) == "sent", timeout=60,
               message="the broadcast did not finish")

    assert answers == [202, 202]
    received = smtp_server.recipients()
    assert "reader00009@example.com" not in received
    assert "reader00010@example.com" not in received
    assert len(received) == 10 and len(set(received)) == 10
    reasons = dict(db.session.execute(
        select(Subscriber.email, Delivery.reason)
        .join(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.broadcast_id == broadcast.id, Delivery.status == "skipped")
    ).all())
    assert reasons == {"reader00009@example.com": "suppressed: bounced",
                       "reader00010@example.com": "suppressed: complained"}


def test_the_list_unsubscribe_header_of_a_sent_message_works_as_a_one_click_post(
    app, app_config, smtp_server, worker_factory, live_server
):
    app_config["BASE_URL"] = live_server.url  # the worker writes links to the running app
    weekly = make_list(db.session, 3)
    broadcast = start_broadcast(app, weekly)
    worker_factory()
    [message] = [m.message for m in smtp_server.wait_for(3, timeout=60)
                 if m.rcpt_tos == ["reader00001@example.com"]]

    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    url = message["List-Unsubscribe"].strip().strip("<>")
    assert url.startswith(live_server.url + "/u/")
    status, headers, text = one_click(url)

    assert status == 200 and "You are unsubscribed" in text
    assert "Set-Cookie" not in headers
    reader = db.session.scalar(select(Subscriber.id)
                               .where(Subscriber.email == "reader00001@example.com"))
    db.session.rollback()
    assert db.session.scalar(select(Subscription.status).where(
        Subscription.subscriber_id == reader, Subscription.list_id == weekly.id)) == "unsubscribed"
    [event] = events("unsubscribed")
    assert (event.subscriber_id, event.broadcast_id, event.detail) == (
        reader, broadcast.id, "one-click")
