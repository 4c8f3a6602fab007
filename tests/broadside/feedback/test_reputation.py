"""The reputation guard: the rates over an identity's last 1,000 sends and over 30 days, from
every kind of mail and every road a bounce or complaint comes by; the pause at the limit (not
below it, not under the minimum of sends), once, with its reason and its webhook; and after
the owner's resume, a pause again only on new evidence."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import func, select

from broadside.core.errors import ValidationError
from broadside.core.models import Event, Identity, ReputationMark, SiteSettings, WebhookMessage
from broadside.core.site_settings import update_reputation_lines
from broadside.core.timeutil import utcnow
from broadside.delivery.identities import service as identities
from broadside.feedback.reputation import figures, guard
from broadside.webhooks import endpoints
from broadside.webhooks import posting as outgoing
from tests.broadside.feedback import sends
from tests.helpers import make_identity
from tests.webhook_receiver import Receiver
from webapp.extensions import db


@pytest.fixture
def product(app) -> int:
    return make_identity("Product", "outbox://", 0).id


def test_both_windows_count_every_kind_of_mail_and_every_road_of_a_bounce(app, product):
    now = utcnow()
    # Two days ago: a broadcast whose 500 sends are older than the last 1,000.
    old, old_sent = sends.broadcast(product, sends.times(500, now - timedelta(days=2)))
    # Within the last hour: a broadcast (600), an automation (200), transactional mail (200).
    news, news_sent = sends.broadcast(product, sends.times(600, now - timedelta(minutes=5)))
    welcome, welcome_sent = sends.automation(product, sends.times(200, now - timedelta(minutes=3)))
    receipts = sends.transactional(product, sends.times(200, now - timedelta(minutes=1)))
    # Another identity's mail and bounces count for it, not for this one.
    other, other_sent = sends.broadcast(None, sends.times(300, now))
    for sent in other_sent[:30]:
        sends.bounce_delivery(other, sent)

    for sent in old_sent[:10]:
        sends.bounce_delivery(old, sent)
    for sent in news_sent[:3]:
        sends.bounce_delivery(news, sent)
    sends.complain_delivery(news, news_sent[3])
    for _ in range(3):  # three soft bounces suppress as bounced: not a hard bounce
        sends.bounce_delivery(news, news_sent[4], "soft")
    for sent in welcome_sent[:2]:
        sends.bounce_automation(welcome, sent)
    sends.bounce_transactional(receipts[0])
    sends.refused_at_rcpt(news, product)  # failed at RCPT: a send, and a hard bounce
    sends.bounce_delivery(news, news_sent[0])  # reported again: counted once

    last = figures.last_window(db.session, product)
    assert (last.sends, last.bounced, last.complained) == (1001, 7, 1)
    assert last.bounce_pct == pytest.approx(100 * 7 / 1001)
    assert last.complaint_pct == pytest.approx(100 * 1 / 1001)

    days = figures.per_day(db.session, product, ZoneInfo("UTC"), now=now)
    month = figures.total(days)
    assert (month.sends, month.bounced, month.complained) == (1501, 17, 1)
    assert len(days) == 30 and days[-1].label_day == now.date()
    by_day = {d.label_day: d.figures for d in days}
    two_days_ago = by_day[(now - timedelta(days=2)).date()]
    assert (two_days_ago.sends, two_days_ago.bounced) == (500, 10) or now.hour == 0

    default = figures.last_window(db.session, None)
    assert (default.sends, default.bounced, default.complained) == (300, 30, 0)
    assert db.session.scalar(select(func.count()).select_from(ReputationMark)) == 48


def test_the_30_days_leave_out_older_sends(app, product):
    now = utcnow()
    sends.broadcast(product, sends.times(50, now - timedelta(days=31)))
    recent, recent_sent = sends.broadcast(product, sends.times(40, now))
    sends.bounce_delivery(recent, recent_sent[0])
    month = figures.total(figures.per_day(db.session, product, ZoneInfo("UTC"), now=now))
    assert (month.sends, month.bounced) == (40, 1)
    assert figures.last_window(db.session, product).sends == 90


def outbox(kind: str) -> list[WebhookMessage]:
    db.session.expire_all()
    return list(db.session.scalars(select(WebhookMessage).where(WebhookMessage.event_type == kind)))


def status(identity_id: int) -> tuple[str, str | None]:
    db.session.expire_all()
    row = db.session.get(Identity, identity_id)
    return row.status, row.pause_reason


def test_the_guard_pauses_at_the_limit_once_with_its_reason_and_webhook(app, product):
    app.config["WEBHOOKS_ALLOW_PRIVATE"] = True
    with Receiver() as receiver:
        endpoints.create(db.session, receiver.url, ["identity.paused"], allow_private=True)
        news, sent = sends.broadcast(product, sends.times(1000))
        for one in sent[:49]:
            sends.bounce_delivery(news, one)
        assert guard.check(db.session, product, label="Product") is None  # 4.9 %: below
        assert status(product) == ("active", None)

        sends.bounce_delivery(news, sent[49])  # 5 %: at the limit
        reason = guard.check(db.session, product, label="Product")
        expected = ("Paused by the reputation guard: 5 % hard bounces over the last 1,000 "
                    "sends (limit 5 %).")
        assert reason == expected and status(product) == ("paused", expected)
        assert guard.check(db.session, product, label="Product") is None  # not twice
        assert len(outbox("identity.paused")) == 1

        outcome = outgoing.deliver_due(db.session, outgoing.Settings(allow_private=True))
        assert outcome.delivered == 1
        [request] = receiver.requests
    body = request.json()
    assert body["type"] == "identity.paused"
    assert body["data"]["identity"] == {"id": product, "name": "Product"}
    assert body["data"]["reason"] == expected
    assert body["data"]["figures"]["sends"] == 1000
    assert body["data"]["figures"]["hard_bounces"] == 50
    assert body["data"]["figures"]["hard_bounce_rate_pct"] == 5.0
    assert body["data"]["figures"]["hard_bounce_limit_pct"] == 5.0
    paused = db.session.scalars(select(Event.detail).where(Event.kind == "identity paused")).all()
    assert paused == [f"Product: {expected}"]


def test_under_the_minimum_of_sends_it_waits(app, product):
    news, sent = sends.broadcast(product, sends.times(99))
    for one in sent[:20]:
        sends.bounce_delivery(news, one)
    assert guard.check(db.session, product) is None
    assert status(product) == ("active", None)
    more, more_sent = sends.broadcast(product, sends.times(1))
    assert guard.check(db.session, product, label="Product") is not None  # 100 sends: judged


def test_complaints_pause_the_default_identity_too(app):
    news, sent = sends.broadcast(None, sends.times(1000))
    for one in sent[:2]:
        sends.complain_delivery(news, one)
    assert guard.check(db.session, None) is None  # 0.2 %: over the warning only
    sends.complain_delivery(news, sent[2])
    reason = guard.check(db.session, None)
    assert reason == ("Paused by the reputation guard: 0.3 % complaints over the last 1,000 "
                      "sends (limit 0.3 %).")
    db.session.expire_all()
    assert db.session.get(SiteSettings, 1).default_pause_reason == reason


def test_after_the_owner_resumes_only_new_evidence_pauses_again(app, product):
    news, sent = sends.broadcast(product, sends.times(200, utcnow() - timedelta(seconds=5)))
    for one in sent[:20]:
        sends.bounce_delivery(news, one)
    assert guard.check(db.session, product, label="Product")
    identities.resume(db.session, product)
    assert guard.check(db.session, product, label="Product") is None  # the old evidence
    assert status(product) == ("active", None)
    # A late bounce of a message sent before the pause is old evidence too.
    sends.bounce_delivery(news, sent[30])
    assert guard.check(db.session, product, label="Product") is None

    later, later_sent = sends.broadcast(product, sends.times(100, utcnow() + timedelta(seconds=300)))
    for one in later_sent[:5]:
        sends.bounce_delivery(later, one)
    assert guard.check(db.session, product, label="Product") == (
        "Paused by the reputation guard: 5 % hard bounces over the last 100 sends (limit 5 %).")


def test_the_lines_are_validated_whole(app):
    good = {"complaint_warning_pct": "0.1", "complaint_limit_pct": "0.3",
            "bounce_warning_pct": "2", "bounce_limit_pct": "5"}
    for field, value in [("complaint_warning_pct", "0.3"), ("bounce_limit_pct", "101"),
                         ("bounce_warning_pct", "0"), ("complaint_limit_pct", "lots"),
                         ("bounce_limit_pct", "nan"), ("bounce_warning_pct", "-1")]:
        with pytest.raises(ValidationError) as refused:
            update_reputation_lines(db.session, {**good, field: value})
        assert refused.value.field in (field, field.replace("limit", "warning"))
    update_reputation_lines(db.session, {**good, "bounce_limit_pct": "3.5 %"})
    db.session.expire_all()
    assert db.session.get(SiteSettings, 1).bounce_limit_pct == 3.5
