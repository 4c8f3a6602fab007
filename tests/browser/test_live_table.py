"""The broadcast page keeps up while sending, in a real Chromium with a real worker and SMTP
server: the deliveries table's rows and its filter's counts follow the send without a reload,
on a desktop (on page 2, with a timeline open and a link focused) and on a phone (filtered to
"Sent"), and stop asking once it is over; a test send's line turns "sent", or "failed" with
the server's reason."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from broadside.campaigns.broadcasts import service
from broadside.core.models import Delivery
from broadside.core.site_settings import update_settings
from tests.browser.steps import sign_in
from tests.helpers import make_list, start_broadcast
from webapp.extensions import db

pytestmark = pytest.mark.browser

SIZE = 150  # at a 40 ms pace, about 6 s: several of the page's 1.5 s polls land mid-send
REFUSED = "reader00003@example.com"


def count(page: Page, status: str) -> int:
    text = page.locator(f"#status-option-{status}").text_content() or ""
    return int(re.search(r"\(([\d,]+)\)", text).group(1).replace(",", ""))


def test_the_table_and_its_counts_follow_the_send_and_the_test_line_its_message(
        page: Page, app, app_config, live_server, owner, smtp_server, worker_factory, screenshot_dir):
    app_config.update(SEND_DELAY_MS="40", BASE_URL=live_server.url)  # the worker reads these at start
    app.config.update(SEND_DELAY_MS=40, BASE_URL=live_server.url, SMTP_URL=smtp_server.url)
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street\nSpringfield", time_zone="Europe/Berlin")
    smtp_server.script.rcpt_replies = {REFUSED: ["550 5.1.1 No such user"],
                                       "nobody@example.org": ["550 5.1.1 No such user"]}
    # Queued and paused before the worker starts: the pages load with everyone waiting, and
    # the owner's Resume starts the send with both pages open.
    broadcast = start_broadcast(app, make_list(db.session, SIZE, name="Weekly readers"),
                                subject="Autumn news", enqueue=False)
    service.pause_broadcast(db.session, broadcast.id)
    ids = db.session.scalars(select(Delivery.id).where(Delivery.broadcast_id == broadcast.id)
                             .order_by(Delivery.id)).all()
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    worker_factory()

    sign_in(page, live_server.url)
    url = f"{live_server.url}/broadcasts/{broadcast.id}"
    page.goto(url)
    phone = page.context.new_page()
    phone.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    phone.set_viewport_size({"width": 390, "height": 844})
    phone.goto(url)
    # The deliveries page of its own (where "See who" links lead) follows too, by its line.
    failures = page.context.new_page()
    failures.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    failures.set_viewport_size({"width": 390, "height": 844})
    failures.goto(f"{url}/deliveries?status=failed")
    expect(failures.locator("#no-deliveries")).to_have_text("No delivery matches.")
    for shown in (page, phone):
        expect(shown.locator("#status-option-sent")).to_have_text("Sent (0)")
        expect(shown.locator("#status-option-pending")).to_have_text(f"Waiting ({SIZE})")
        expect(shown.locator(f"#delivery-{ids[0]}")).to_contain_text("Waiting its turn.")
        shown.evaluate("window.notReloaded = true")

    page.bring_to_front()  # a page in the background gets few animation frames to click in

    # A test send while paused (transactional mail goes ahead of broadcasts): the line says
    # what became of it, then stops asking.
    test_line = page.locator("#test-status")
    page.get_by_label("Send a test to").fill("tester@example.org")
    page.get_by_role("button", name="Send test").click()
    expect(test_line).to_have_text(re.compile(
        r"Test sent to tester@example\.org: the mail server accepted it \(250 .*\)\."), timeout=20_000)
    expect(test_line.locator("[hx-get]")).to_have_count(0)
    page.get_by_label("Send a test to").fill("nobody@example.org")
    page.get_by_role("button", name="Send test").click()
    expect(test_line.locator(".test-state")).to_have_text(
        "Test to nobody@example.org failed: 550 5.1.1 No such user.", timeout=20_000)
    expect(test_line.locator("[hx-get]")).to_have_count(0)
    page.locator("#test-status").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / "test-send-failed.png"))

    # Desktop: page 2 of the table, one timeline open, then Resume.
    page.locator("#next-deliveries").click()
    row = page.locator(f"#delivery-{ids[25]}")
    expect(row).to_contain_text("Waiting its turn.")
    row.get_by_role("link", name="Timeline").click()
    timeline = page.locator(f"#timeline-{ids[25]}")
    expect(timeline).to_contain_text("Hide timeline")
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("#state-words")).not_to_have_text("Paused")
    # Phone: filtered to "Sent" while it sends.
    phone.bring_to_front()
    phone.get_by_label("Status", exact=True).select_option("sent")
    page.bring_to_front()

    # Mid-send, without a reload: page 2's rows turn sent, the counts grow, the timeline
    # stays open, and a focused link keeps its focus and the page its scroll.
    expect(row.locator(".badge")).to_have_text("sent", timeout=30_000)
    expect(row).to_contain_text("Accepted by the mail server (250")
    assert count(page, "sent") >= 25
    expect(timeline).to_contain_text("Accepted by the mail server")  # it follows too
    focused = page.locator(f"#timeline-link-{ids[30]}")
    focused.focus()
    page.locator("#deliveries").scroll_into_view_if_needed()
    filters_top = "document.getElementById('delivery-filters').getBoundingClientRect().top"
    before = page.evaluate(filters_top)
    with page.expect_response(lambda r: "/deliveries?" in r.url and r.status == 200, timeout=20_000):
        pass
    expect(focused).to_be_focused()
    # The table is redrawn under the owner's eyes, not the page scrolled (it once jumped
    # by a table's height: scroll anchoring followed a row of the old table down).
    assert abs(page.evaluate(filters_top) - before) < 2
    page.screenshot(path=str(screenshot_dir / "live-table-mid-send.png"), full_page=True)
    expect(phone.locator("#status-filter")).to_have_value("sent")
    expect(phone.locator("#delivery-results tr.delivery-row").first).to_be_visible()
    phone.screenshot(path=str(screenshot_dir / "live-table-mid-send-phone.png"))
    phone.evaluate("document.getElementById('deliveries').scrollIntoView()")
    phone.screenshot(path=str(screenshot_dir / "live-table-mid-send-phone-table.png"))

    # Over: the last refresh shows the end state, and nothing asks again.
    for shown in (page, phone):
        expect(shown.locator("#status-option-sent")).to_have_text(f"Sent ({SIZE - 1})", timeout=30_000)
        expect(shown.locator("#status-option-pending")).to_have_text("Waiting (0)")
        expect(shown.locator("#status-option-failed")).to_have_text("Failed (1)")
        expect(shown.locator("#state-words")).to_contain_text("Finished at")
        expect(shown.locator("#delivery-results")).not_to_have_attribute("hx-trigger", re.compile("."))
        expect(shown.locator("#progress")).not_to_have_attribute("hx-trigger", re.compile("."))
        assert shown.evaluate("window.notReloaded") is True
    expect(page.locator("#delivery-results .badge")).to_have_text(["sent"] * 20)
    expect(page.locator("#next-deliveries")).to_be_visible()  # still page 2 of 8
    expect(page.locator(f"#delivery-{ids[20]}")).to_be_visible()
    expect(phone.locator("#delivery-results tr.delivery-row")).to_have_count(20)
    expect(phone.locator("#delivery-results .badge")).to_have_text(["sent"] * 20)
    expect(phone.locator("#status-filter")).to_have_value("sent")
    page.screenshot(path=str(screenshot_dir / "live-table-finished.png"), full_page=True)
    phone.evaluate("document.getElementById('deliveries').scrollIntoView()")
    phone.screenshot(path=str(screenshot_dir / "live-table-finished-phone.png"))
    overflow = phone.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the broadcast page scrolls sideways by {overflow}px on a phone"
    expect(failures.locator("#delivery-results tr.delivery-row")).to_have_count(1)
    expect(failures.locator("#delivery-results")).to_contain_text(REFUSED)
    expect(failures.locator("#status-option-failed")).to_have_text("Failed (1)")
    expect(failures.locator("#progress")).to_contain_text(f"{SIZE} of {SIZE} recipients handled (100%)")
    expect(failures.locator("#progress")).not_to_have_attribute("hx-trigger", re.compile("."))
    failures.screenshot(path=str(screenshot_dir / "live-deliveries-page-phone.png"))
    failures.set_viewport_size({"width": 1280, "height": 720})
    failures.screenshot(path=str(screenshot_dir / "live-deliveries-page.png"))
    # A table refresh the send triggered may be in flight when the phone's filter changes: the
    # owner's request replaces it (hx-sync replace), and htmx reports the aborted one on the
    # console. That is the design; any other console error is a defect.
    assert not beyond_replaced_requests(problems), problems
    # "First" replaces whatever request the table has in flight (hx-sync replace: the owner's
    # choice wins over a refresh the send triggered), and htmx reports the one it aborts on
    # the console (htmx:sendAbort, then its htmx:afterRequest): that, and nothing else.
    page.locator("#first-deliveries").click()
    expect(page.locator(f"#delivery-{ids[3]}")).to_contain_text(
        "Refused by the mail server for this address (550 5.1.1")
    assert not beyond_replaced_requests(problems), problems


def beyond_replaced_requests(problems: list[str]) -> list[str]:
    """The console errors left once each request a newer one replaced is taken out: htmx logs
    an abort as "htmx:afterRequest, <elt>" then "htmx:sendAbort, <elt>" (a failed request's
    afterRequest comes with htmx:sendError or htmx:timeout instead, and stays)."""
    left = [text for text in problems if not text.startswith("htmx:sendAbort")]
    for _ in range(len(problems) - len(left)):
        left.remove(next(text for text in left if text.startswith("htmx:afterRequest")))
    return left
