"""The deliveries table's bounded search (pages at a million rows) in a real Chromium: a search
examines one window of deliveries at a time, says so, and "Search the next" carries on until
the match is found, and an address pasted whole is found at once; on a desktop and on a
phone, with the dashboard's list sizes beside it."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.campaigns.broadcasts import evidence, service
from tests.browser.steps import sign_in
from tests.helpers import make_list, start_broadcast
from webapp.extensions import db

pytestmark = pytest.mark.browser


def test_a_search_goes_window_by_window_until_it_finds(
        page: Page, app, live_server, owner, monkeypatch, screenshot_dir):
    monkeypatch.setattr(evidence, "SEARCH_WINDOW", 20)  # the live server runs in this process
    broadcast = start_broadcast(app, make_list(db.session, 60, name="Weekly readers"),
                                subject="Autumn news", enqueue=False)
    service.pause_broadcast(db.session, broadcast.id)
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    sign_in(page, live_server.url)
    for width, name in ((1280, "desktop"), (390, "phone")):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/broadcasts/{broadcast.id}/deliveries")
        page.locator("#delivery-search").fill("reader00045@")
        page.locator("#delivery-search").press("Enter")
        notice = page.locator("#delivery-search-window")
        expect(notice).to_contain_text("looks through 20 deliveries at a time, and found nobody")
        page.screenshot(path=str(screenshot_dir / f"deliveries-search-window-{name}.png"),
                        full_page=True)
        page.locator("#delivery-search-further").click()
        expect(notice).to_contain_text("found nobody")  # the second window: 21-40
        page.locator("#delivery-search-further").click()
        expect(page.locator(".delivery-row")).to_have_count(1)
        expect(page.locator(".delivery-row")).to_contain_text("reader00045@example.com")
        page.screenshot(path=str(screenshot_dir / f"deliveries-search-found-{name}.png"),
                        full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        # An address pasted whole is found at once, beyond the first window, and says how.
        page.locator("#delivery-search").fill("Reader00052@example.com")
        page.locator("#delivery-search").press("Enter")
        expect(page.locator(".delivery-row")).to_have_count(1)
        expect(page.locator(".delivery-row")).to_contain_text("reader00052@example.com")
        expect(notice).to_contain_text("Found by its whole address")
        expect(page.locator("#delivery-search-further")).to_be_visible()
        page.screenshot(path=str(screenshot_dir / f"deliveries-search-whole-address-{name}.png"),
                        full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.goto(f"{live_server.url}/")
        expect(page.locator(".list-sizes")).to_contain_text("Weekly readers")
        page.screenshot(path=str(screenshot_dir / f"dashboard-lists-{name}.png"), full_page=True)
    assert problems == []


def test_the_subscriber_search_window_and_its_total(page: Page, live_server, owner, monkeypatch,
                                                     screenshot_dir):
    from broadside.audience.subscribers import search

    monkeypatch.setattr(search, "SCAN_WINDOW", 10)
    make_list(db.session, 35, name="Weekly readers")
    db.session.commit()
    sign_in(page, live_server.url)
    for width, name in ((1280, "desktop"), (390, "phone")):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/subscribers/?q=3")
        # reader00030-34 are among the newest 10; 00003, 00013 and 00023 lie further back.
        expect(page.locator("#subscriber-total")).to_contain_text(
            "At least 5 match: 5 among the newest 10 subscribers")
        expect(page.locator("#search-window")).to_contain_text("Search the next 10")
        page.screenshot(path=str(screenshot_dir / f"subscribers-window-total-{name}.png"),
                        full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
