"""Through Chromium, desktop and phone: tick people in the subscriber table (one by one and
"select everyone on this page"), add them to a list, confirm, and watch the real worker's
progress bar finish; on the phone, the same for everyone a search matches. A confirmed erase
erases only the people confirmed, and its finished page says who was left alone."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import func, select, update

from broadside.audience import lists as lists
from broadside.core.models import Subscriber, Subscription
from tests.browser.steps import sign_in
from tests.helpers import make_list
from webapp.extensions import db

pytestmark = pytest.mark.browser


def overflow(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def on_list(list_id: int) -> int:
    db.session.expire_all()
    return db.session.scalar(select(func.count()).select_from(Subscription)
                             .where(Subscription.list_id == list_id))


def test_select_rows_add_them_to_a_list_and_watch_the_worker_finish(
        page: Page, live_server, owner, worker_factory, screenshot_dir):
    make_list(db.session, 120, name="Weekly")
    monthly = lists.create_list(db.session, "Monthly").id
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    sign_in(page, live_server.url)

    # Desktop: the first page's 50, less one, by ticking.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(live_server.url + "/subscribers/")
    expect(page.locator("#subscriber-total")).to_have_text("120 subscribers")
    page.get_by_label("Select everyone on this page").check()
    page.get_by_label("Select reader00119@example.com").uncheck()
    expect(page.locator("#scope-selected")).to_have_text("the 49 people ticked below")
    expect(page.get_by_label("Select everyone on this page")).not_to_be_checked()
    page.get_by_label("Action", exact=True).select_option(label="Add to a list")
    page.get_by_label("Which list").select_option(label="Monthly")
    assert overflow(page) <= 0
    page.screenshot(path=str(screenshot_dir / "subscribers-bulk-selection-desktop.png"),
                    full_page=True)
    page.get_by_role("button", name="Continue…").click()

    expect(page.get_by_role("heading", name="Add 49 people to Monthly?")).to_be_visible()
    expect(page.locator("#bulk-who")).to_have_text("Who: the 49 people you ticked.")
    page.screenshot(path=str(screenshot_dir / "subscribers-bulk-confirm-desktop.png"),
                    full_page=True)
    page.get_by_role("button", name="Add 49 people to Monthly").click()

    # No worker yet: the page waits and polls; then the worker does it and the bar fills.
    expect(page.get_by_role("status")).to_contain_text("Waiting for the worker… 0 of 49")
    page.screenshot(path=str(screenshot_dir / "subscribers-bulk-waiting-desktop.png"),
                    full_page=True)
    worker_factory()
    expect(page.locator("#bulk-done")).to_have_text("Done: 49 people added.", timeout=30_000)
    expect(page.locator("#bulk-bar")).to_have_attribute("value", "100")
    assert on_list(monthly) == 49
    page.screenshot(path=str(screenshot_dir / "subscribers-bulk-done-desktop.png"),
                    full_page=True)

    # Phone: everyone a search matches ("reader0001" is in 10 addresses: 00010-00019).
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_server.url + "/subscribers/")
    page.get_by_label("Search email or name").press_sequentially("reader0001", delay=20)
    expect(page.locator("#subscriber-total")).to_have_text("10 subscribers match")
    expect(page).to_have_url(re.compile(r"q=reader0001"))
    # A filter's select searches at once (the 49 on Monthly are none of these ten).
    page.locator("#list").select_option(label="Monthly")
    expect(page.locator("#no-results")).to_have_text("No subscribers match.")
    page.locator("#list").select_option(label="All lists")
    expect(page.locator("#subscriber-total")).to_have_text("10 subscribers match")
    page.get_by_label("Select everyone on this page").check()
    expect(page.locator("#select-all-note")).to_be_hidden()  # all of them are on this page
    page.get_by_label("Apply to").select_option(label="everyone matching this search")
    page.get_by_label("Action", exact=True).select_option(label="Add to a list")
    page.get_by_label("Which list").select_option(label="Monthly")
    expect(page.locator('input[name="ids"]:checked')).to_have_count(10)  # no swap cleared them
    assert overflow(page) <= 0
    page.screenshot(path=str(screenshot_dir / "subscribers-bulk-selection-phone.png"),
                    full_page=True)
    page.get_by_role("button", name="Continue…").click()
    expect(page.get_by_role("heading", name="Add 10 people to Monthly?")).to_be_visible()
    expect(page.locator("#bulk-who")).to_contain_text("email or name containing “reader0001”")
    assert overflow(page) <= 0
    page.screenshot(path=str(screenshot_dir / "subscribers-bulk-confirm-phone.png"),
                    full_page=True)
    page.get_by_role("button", name="Add 10 people to Monthly").click()
    # 00010-00019 are older than the 50 ticked on the desktop (00070-00119): all ten are new.
    expect(page.locator("#bulk-done")).to_have_text("Done: 10 people added.", timeout=30_000)
    assert overflow(page) <= 0
    page.screenshot(path=str(screenshot_dir / "subscribers-bulk-done-phone.png"), full_page=True)
    assert on_list(monthly) == 59

    # A bigger table on the phone: the "select all matching" offer after ticking the page.
    page.goto(live_server.url + "/subscribers/?q=reader")
    page.get_by_label("Select everyone on this page").check()
    expect(page.locator("#select-all-note")).to_be_visible()
    page.get_by_role("button", name="Select everyone matching").click()
    expect(page.get_by_label("Apply to")).to_have_value("all")
    expect(page.locator("#select-all-note")).to_have_text(
        "Everyone matching is chosen: the next page says how many.")
    expect(page.locator("#subscriber-total")).to_have_text("120 subscribers match")
    assert overflow(page) <= 0
    page.locator("#bulk-form").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / "subscribers-bulk-all-matching-phone.png"))

    # The erase confirmation (typed) and a refusal, on both widths (looked at, not submitted).
    for width, name in ((390, "phone"), (1280, "desktop")):
        page.set_viewport_size({"width": width, "height": 844})
        page.goto(live_server.url + "/subscribers/bulk?action=erase&scope=all&q=reader0001")
        expect(page.get_by_role("heading", name="Erase 10 people?")).to_be_visible()
        expect(page.get_by_label("Type 10 to confirm")).to_be_visible()
        assert overflow(page) <= 0
        page.screenshot(path=str(screenshot_dir / f"subscribers-bulk-erase-{name}.png"),
                        full_page=True)
        page.goto(live_server.url + "/subscribers/bulk?action=add&scope=selected&ids=3&ids=4")
        expect(page.locator("#bulk-error")).to_have_text("Choose the list to add them to.")
        assert overflow(page) <= 0
        page.screenshot(path=str(screenshot_dir / f"subscribers-bulk-refused-{name}.png"),
                        full_page=True)
    assert [p for p in problems if "422" not in p] == []  # the refusal's status is logged


def test_a_confirmed_erase_touches_only_the_people_confirmed(
        page: Page, live_server, owner, worker_factory, screenshot_dir):
    """Confirm "Erase 3 people?" for a search; before the worker comes, two more people come
    to match and one of the three stops matching: two are erased, the others stay, and the
    finished page says who was left alone. Both widths."""
    make_list(db.session, 12, name="Weekly")
    ids = db.session.scalars(select(Subscriber.id).order_by(Subscriber.id)).all()

    def rename(subscriber_id: int, name: str) -> None:
        db.session.execute(update(Subscriber).where(Subscriber.id == subscriber_id)
                           .values(name=name))
        db.session.commit()

    sign_in(page, live_server.url)
    for width, label in ((1280, "desktop"), (390, "phone")):
        first = 0 if label == "desktop" else 6
        for offset in range(3):
            rename(ids[first + offset], f"Maria Hamilton {label} {offset}")
        page.set_viewport_size({"width": width, "height": 844})
        page.goto(live_server.url + f"/subscribers/bulk?action=erase&scope=all&q=hamilton+{label}")
        expect(page.get_by_role("heading", name="Erase 3 people?")).to_be_visible()
        expect(page.locator("#bulk-who")).to_contain_text("when you confirm, and nobody else")
        page.get_by_label("Type 3 to confirm").fill("3")
        assert overflow(page) <= 0
        page.screenshot(path=str(screenshot_dir / f"subscribers-bulk-fixed-confirm-{label}.png"),
                        full_page=True)
        page.get_by_role("button", name="Erase 3 people").click()
        expect(page.get_by_role("status")).to_contain_text("Waiting for the worker… 0 of 3")
        rename(ids[first + 3], f"Late Hamilton {label}")  # comes to match: not in the set
        rename(ids[first + 4], f"Later Hamilton {label}")
        rename(ids[first + 2], "Somebody Else")  # stops matching: left alone
        worker = worker_factory()
        expect(page.locator("#bulk-done")).to_have_text(
            "Done: 2 people erased. 1 person no longer matched the filter and was left alone.",
            timeout=30_000)
        worker.stop()
        expect(page.locator("#bulk-counts")).to_contain_text("1 left alone (no longer matched)")
        assert overflow(page) <= 0
        page.screenshot(path=str(screenshot_dir / f"subscribers-bulk-fixed-done-{label}.png"),
                        full_page=True)
        db.session.expire_all()
        still_there = set(db.session.scalars(select(Subscriber.id)))
        assert [i for i in ids[first:first + 5] if i in still_there] == ids[first + 2:first + 5]
