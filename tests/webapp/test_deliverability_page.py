"""The Deliverability page: per identity its two windows in words, a state badge, two charts
drawn on the server with the warning and limit lines and the numbers; the lines' form,
validated (422 under the field, nothing written)."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import select

from broadside.core.models import SiteSettings
from broadside.core.timeutil import utcnow
from broadside.feedback.reputation import guard
from tests.broadside.feedback import sends
from tests.helpers import csrf_token_from, make_identity
from webapp.extensions import db


def section(html: str, anchor: str) -> str:
    start = html.index(f'<section class="card reputation" id="{anchor}"')
    return html[start:html.index("</section>", start)]


def test_the_page_draws_each_identitys_rates_against_the_lines(logged_in_client):
    product = make_identity("Product", "outbox://", 0).id
    now = utcnow()
    news, sent = sends.broadcast(product, sends.times(400, now - timedelta(minutes=5)))
    for one in sent[:12]:  # 3 %: over the warning (2 %), under the limit (5 %)
        sends.bounce_delivery(news, one)
    sends.complain_delivery(news, sent[20])
    quiet, quiet_sent = sends.broadcast(None, sends.times(10, now))

    page = logged_in_client.get("/deliverability/")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'href="/deliverability/"' in html and ">Deliverability</a>" in html  # in the nav
    card = section(html, f"identity-{product}")
    assert f'id="identity-{product}-state">warning<' in card
    assert "3 % hard bounces (12), 0.25 % complaints (1)" in card
    assert "3 % hard bounces (12 of 400 sends), 0.25 % complaints (1)" in card
    bounce = card[card.index(f'id="identity-{product}-bounce"'):]
    bounce = bounce[:bounce.index("</figure>")]
    assert '<svg class="rate-chart rate-bounce"' in bounce and 'role="img"' in bounce
    assert "<title" in bounce
    assert "3 % over 30 days (12 hard bounces in 400 sends); warning line 2 %, limit 5 %." in bounce
    assert re.search(r'<line class="line-warning"[^>]*data-rate="2"', bounce)
    assert re.search(r'<line class="line-limit"[^>]*data-rate="5"', bounce)
    assert len(re.findall(r'<rect class="bar bar-warn"[^>]*data-rate="3"', bounce)) == 1
    complaint = card[card.index(f'id="identity-{product}-complaint"'):]
    assert re.search(r'<line class="line-limit"[^>]*data-rate="0.3"', complaint)
    assert "Numbers per day" in card

    default = section(html, "identity-default")
    assert 'id="identity-default-state">too few sends to judge<' in default


def test_paused_by_the_guard_says_why_and_links_to_resume(logged_in_client):
    product = make_identity("Product", "outbox://", 0).id
    news, sent = sends.broadcast(product, sends.times(200))
    for one in sent[:10]:
        sends.bounce_delivery(news, one)
    reason = guard.check(db.session, product, label="Product")
    html = logged_in_client.get("/deliverability/").get_data(as_text=True)
    card = section(html, f"identity-{product}")
    assert f'id="identity-{product}-state">paused by the guard<' in card
    assert reason in card.replace("&#39;", "'")
    assert f'href="/settings/identities/#identity-{product}"' in card


def test_the_lines_are_saved_or_refused_under_their_field(logged_in_client):
    page = logged_in_client.get("/deliverability/").get_data(as_text=True)
    good = {"csrf_token": csrf_token_from(page), "complaint_warning_pct": "0.1",
            "complaint_limit_pct": "0.3", "bounce_warning_pct": "2", "bounce_limit_pct": "5"}
    for field, value, words in [
            ("complaint_warning_pct", "0.5", "The complaint rate&#39;s warning must be below its limit."),
            ("bounce_limit_pct", "120", "Enter a percentage above 0 and at most 100."),
            ("bounce_warning_pct", "two", "Enter a percentage, for example 0.3.")]:
        answer = logged_in_client.post("/deliverability/lines", data={**good, field: value})
        assert answer.status_code == 422
        html = answer.get_data(as_text=True)
        assert words in html
        assert re.search(rf'name="{field}"[^>]*aria-invalid="true"', html) or \
            re.search(rf'aria-invalid="true"[^>]*name="{field}"', html)
    db.session.expire_all()
    assert db.session.scalar(select(SiteSettings.bounce_limit_pct)) in (None, 5.0)
    answer = logged_in_client.post("/deliverability/lines", data={**good, "bounce_limit_pct": "4"})
    assert answer.status_code == 303
    db.session.expire_all()
    assert db.session.scalar(select(SiteSettings.bounce_limit_pct)) == 4.0
    html = logged_in_client.get("/deliverability/").get_data(as_text=True)
    assert 'value="4"' in html
