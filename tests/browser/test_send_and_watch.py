"""Send and watch, once through a real Chromium: a real server, a real worker process and a
real SMTP server. Send a test, send to 300 people at a 25 ms pace, watch the bar move, pause and
resume from the page, and see an unsubscribe made during the send show up as skipped."""

from __future__ import annotations

import re
import urllib.request
from email import message_from_bytes, policy

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import Broadcast, Subscriber, Subscription
from broadside.core.site_settings import update_settings
from tests.browser.steps import sign_in
from tests.helpers import make_list, make_token, unsubscribe_url, wait_until
from webapp.extensions import db

pytestmark = pytest.mark.browser

SIZE = 300
BODY = """# Autumn at Acme

Hi {{ name or "friend" }}, three things changed this month:

- Exports are **twice as fast**
- A calmer inbox, with fewer notifications
- Dark mode for the dashboard

Read the [full changelog](https://example.com/changelog) or reply to this email."""


def bar_value(page: Page) -> int:
    return int(page.locator("#progress-bar").get_attribute("value") or 0)


def wait_for_bar(page: Page, test: str, arg: int, timeout: float = 30_000) -> int:
    """Wait (on the page's own updates, not a sleep) until the bar's value passes `test`."""
    page.wait_for_function(f"v => {{ const b = document.getElementById('progress-bar'); "
                           f"return b && Number(b.value) {test} v; }}", arg=arg, timeout=timeout)
    return bar_value(page)


def post_one_click(url: str) -> int:
    """What a mail app does with List-Unsubscribe-Post: a POST, no cookies, no CSRF token."""
    request = urllib.request.Request(url, data=b"List-Unsubscribe=One-Click", method="POST",
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


def readers(smtp_server) -> list[str]:
    return [r for r in smtp_server.recipients() if r.startswith("reader")]


def test_send_a_test_then_watch_a_send_with_pause_resume_and_an_unsubscribe(
        page: Page, app, app_config, live_server, owner, smtp_server, worker_factory, screenshot_dir):
    # 300 sends at 25 ms take ~7.5 s: several of the page's 1.5 s polls land mid-send.
    app_config.update(SEND_DELAY_MS="25", BASE_URL=live_server.url)  # the worker reads these at start
    app.config.update(SEND_DELAY_MS=25, BASE_URL=live_server.url, SMTP_URL=smtp_server.url)
    weekly = make_list(db.session, SIZE, name="Weekly readers")
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street\nSpringfield", time_zone="Europe/Berlin")
    draft = drafts.create_draft(db.session, list_id=weekly.id, subject="Autumn news for {{ name }}",
                                preheader="Faster exports, a calmer inbox", body=BODY)
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    worker_factory()

    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/edit")
    expect(page.frame_locator("#preview-frame").get_by_role("heading", name="Autumn at Acme")).to_be_visible()

    # Send a test: htmx answers in place; the real worker delivers it through the real server.
    page.get_by_label("Send a test to").fill("tester@example.org")
    page.get_by_role("button", name="Send test").click()
    wait_until(lambda: "tester@example.org" in smtp_server.recipients(), timeout=20,
               message="the test email never arrived")
    # The line follows the message: queued, then sent (tests/browser/test_live_table.py
    # watches a refused one too).
    expect(page.locator("#test-status")).to_contain_text("Test sent to tester@example.org",
                                                         timeout=20_000)
    test_message = smtp_server.messages[0].message
    # Filled in with the newest active reader's details, and the line says so.
    assert test_message["Subject"] == "[Test] Autumn news for Reader 299"
    expect(page.locator("#test-status")).to_contain_text("filled in with Reader 299's details")
    page.locator(".send-card").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / "compose-send.png"), full_page=True)

    # Send…: the confirmation shows the audience; the worker is running, so no warning.
    page.get_by_role("link", name="Send…").click()
    expect(page.locator("#audience")).to_contain_text("300 active subscribers will receive it.")
    expect(page.locator("#not-ready")).to_have_count(0)
    expect(page.get_by_label("Date and time (Europe/Berlin)")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "send-confirm.png"), full_page=True)
    page.get_by_role("button", name="Send now to 300 subscribers").click()
    expect(page.get_by_text("Sending to 300 subscribers.")).to_be_visible()

    # Watch the bar move (htmx polling every 1.5 s), then pause from the page.
    seen = [bar_value(page)]
    seen.append(wait_for_bar(page, ">", seen[-1]))
    seen.append(wait_for_bar(page, ">=", 60))
    expect(page.locator("#state-words")).to_have_text("Sending")
    expect(page.locator("#send-rate")).to_contain_text("emails a second")
    page.screenshot(path=str(screenshot_dir / "broadcast-mid-send.png"))
    phone = page.context.new_page()
    phone.set_viewport_size({"width": 390, "height": 844})
    phone.goto(page.url)
    expect(phone.locator("#progress-bar")).to_be_visible()
    phone.screenshot(path=str(screenshot_dir / "broadcast-mid-send-phone.png"))
    overflow = phone.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the broadcast page scrolls sideways by {overflow}px on a phone"
    phone.close()

    # A keyboard user on the Pause button keeps focus while the bar updates around it.
    page.locator("#pause-button").focus()
    with page.expect_response(lambda response: "/progress?seen=" in response.url):
        pass
    expect(page.locator("#pause-button")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#state-words")).to_have_text("Paused")
    expect(page.get_by_role("button", name="Resume")).to_be_visible()
    expect(page.locator("#pause-note")).to_contain_text("Paused by the owner.")
    expect(page.locator("#status-badge")).to_have_text("paused")
    db.session.expire_all()
    broadcast = db.session.get(Broadcast, draft.id)
    wait_until(lambda: (db.session.expire_all() or db.session.get(Broadcast, draft.id).sending_count) == 0)
    paused_at = len(readers(smtp_server))
    assert 0 < paused_at < SIZE

    # During the send, two people leave with their one-click links, over real HTTP: someone
    # who already got it (the URL from their received message) and someone still waiting.
    first = smtp_server.messages[1].message
    assert first["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert post_one_click(first["List-Unsubscribe"].strip("<>")) == 200
    last_id = db.session.scalar(select(Subscriber.id).where(Subscriber.email == "reader00299@example.com"))
    assert post_one_click(unsubscribe_url(make_token(last_id, weekly.id, broadcast.id),
                                          base_url=live_server.url)) == 200
    assert db.session.scalar(select(Subscription.status).where(Subscription.subscriber_id == last_id)) \
        == "unsubscribed"
    page.screenshot(path=str(screenshot_dir / "broadcast-paused.png"))
    assert len(readers(smtp_server)) == paused_at  # nothing went out while paused

    page.get_by_role("button", name="Resume").click()
    expect(page.locator("#state-words")).not_to_have_text("Paused")
    while seen[-1] < SIZE:
        seen.append(wait_for_bar(page, ">", seen[-1]))
    expect(page.locator("#state-words")).to_contain_text("Finished at")
    expect(page.locator("#progress-label")).to_have_text("100%")
    expect(page.locator("#status-badge")).to_have_text("sent")
    distinct = sorted(set(seen))
    assert len([v for v in distinct if 0 < v < SIZE]) >= 3, distinct

    # The counts on the page match what the SMTP server received.
    received = readers(smtp_server)
    assert len(received) == len(set(received)) == SIZE - 1
    assert "reader00299@example.com" not in received
    expect(page.locator("#count-sent strong")).to_have_text(str(SIZE - 1))
    expect(page.locator("#count-skipped strong")).to_have_text("1")
    expect(page.locator("#count-failed strong")).to_have_text("0")
    expect(page.locator("#count-unknown strong")).to_have_text("0")
    message = message_from_bytes(smtp_server.messages[-1].data, policy=policy.default)
    assert message["Subject"].startswith("Autumn news for Reader ")

    # The skip is in the deliveries table with its reason, and the timeline says when they left.
    # No reload: the table followed the send (its counts too) and stopped when it was over.
    expect(page.locator("#status-option-skipped")).to_have_text("Skipped (1)")
    page.get_by_label("Status", exact=True).select_option("skipped")
    row = page.locator("#delivery-results tbody tr.delivery-row")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("reader00299@example.com")
    expect(row).to_contain_text("Not sent: they had unsubscribed.")
    row.get_by_role("link", name="Timeline").click()
    timeline = page.locator("tr.timeline-row:not([hidden])")
    expect(timeline).to_contain_text("Unsubscribed with the one-click button in their mail app")
    expect(timeline).to_contain_text("Skipped: they had unsubscribed")
    page.locator("#deliveries").screenshot(path=str(screenshot_dir / "broadcast-timeline.png"))
    page.get_by_label("Search by email").fill("reader00001@")
    page.get_by_label("Status", exact=True).select_option("")
    expect(page.locator("#delivery-results tbody tr.delivery-row")).to_have_count(1)
    expect(page.locator("#delivery-results")).to_contain_text("Accepted by the mail server")
    page.screenshot(path=str(screenshot_dir / "broadcast-finished.png"), full_page=True)
    page.get_by_role("link", name="Dashboard").click()
    # The subject as a reader reads it: filled in for the newest person a send could reach.
    expect(page.locator(".recent-table")).to_contain_text(re.compile(r"Autumn news for Reader \d+"))
    expect(page.locator(f"#list-size-{weekly.id}")).to_have_text("298")
    page.screenshot(path=str(screenshot_dir / "dashboard-after-send.png"), full_page=True)
    assert not [p for p in problems if "Content Security Policy" in p or "Refused" in p], problems


def test_broadcast_pages_read_and_steer_without_javascript(browser, app, live_server, owner, screenshot_dir):
    """Progressive enhancement: with JavaScript off the page still shows the bar, the counts
    and the table, and Pause, Cancel (after a confirmation page), filters and timelines work
    as plain links and forms."""
    from tests.helpers import start_broadcast

    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main Street", time_zone="UTC")
    broadcast = start_broadcast(app, make_list(db.session, 30), subject="Quiet <b>launch</b>",
                                enqueue=False)
    context = browser.new_context(java_script_enabled=False, viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        sign_in(page, live_server.url)
        page.goto(f"{live_server.url}/broadcasts/{broadcast.id}")
        expect(page.get_by_role("heading", name="Quiet <b>launch</b>")).to_be_visible()
        expect(page.locator("#progress-bar")).to_have_attribute("max", "30")
        expect(page.locator("#count-pending strong")).to_have_text("30")
        expect(page.locator("#delivery-results tbody tr.delivery-row")).to_have_count(20)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the broadcast page scrolls sideways by {overflow}px on a phone"

        page.get_by_role("button", name="Pause").click()
        expect(page.get_by_text("Paused. Nothing more is sent until you press Resume.")).to_be_visible()
        page.get_by_role("button", name="Cancel broadcast").click()
        expect(page.get_by_role("heading", name="Cancel “Quiet <b>launch</b>”?")).to_be_visible()
        page.screenshot(path=str(screenshot_dir / "cancel-confirm-nojs-phone.png"))
        page.get_by_role("button", name="Yes, cancel it").click()
        expect(page.locator("#state-words")).to_contain_text("Cancelled at")

        page.get_by_label("Status", exact=True).select_option("skipped")
        page.get_by_role("button", name="Show").click()
        expect(page.get_by_role("heading", name="Deliveries of “Quiet <b>launch</b>”")).to_be_visible()
        expect(page.locator("tr.delivery-row")).to_have_count(20)  # the page length is kept
        expect(page.get_by_role("link", name="Next →")).to_be_visible()
        page.locator("tr.delivery-row").first.get_by_role("link", name="Timeline").click()
        expect(page.get_by_text("Skipped: the broadcast was cancelled")).to_be_visible()
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the timeline page scrolls sideways by {overflow}px on a phone"
        db.session.expire_all()
        assert db.session.get(Broadcast, broadcast.id).status == "cancelled"
    finally:
        context.close()
