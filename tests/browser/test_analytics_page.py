"""Reader analytics in Chromium at desktop width and at 390 px: the owner chooses tracking on
the send page, the worker sends, readers (and a scanner) open and click, and the broadcast
page shows the first days as a server-drawn SVG chart with the links and their clicks,
readers and machines apart. The Settings card, the list's switch and the sign-up page's
notice are photographed on the way."""

from __future__ import annotations

import re
from html import unescape

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import update

from broadside.campaigns.analytics.counting import bump_day
from broadside.campaigns.analytics.tokens import TrackingTokens
from broadside.campaigns.broadcasts import drafts
from broadside.core.models import MailingList, TrackedLink
from broadside.core.site_settings import update_settings
from tests.browser.steps import sign_in, table_problems
from tests.helpers import make_list
from webapp.extensions import db

pytestmark = pytest.mark.browser

WIDTHS = (1280, 390)
BODY = ("# Autumn at Acme\n\nHi {{ name }}, the [release notes for November, with every change to exports, "
        "dark mode and the calmer inbox](https://acme.example.com/changelog/2026/november-release-notes-"
        "with-a-very-long-address-indeed), [the shop](https://shop.acme.example/) and "
        "[your account](https://acme.example.com/account). Your own page: "
        "[{{ email }}](https://acme.example.com/people/{{ email }}?from=autumn-newsletter-2026).")
SCANNER = {"User-Agent": "Mozilla/5.0 (compatible; Barracuda Sentinel)"}
READER = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"}


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"the page scrolls sideways ({width}px)"


def photograph(page: Page, folder, name: str, card: str = "#tracking") -> None:
    """The page at both widths (no sideways scroll), and the card this feature adds."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        no_sideways_scroll(page)
        page.screenshot(path=str(folder / f"analytics-{name}-{width}.png"), full_page=True)
        page.locator(card).screenshot(path=str(folder / f"analytics-{name}-card-{width}.png"))


def readers_hit(app, smtp_server) -> None:
    """Every copy opened an hour after delivery, the first links followed; a scanner fetches
    each copy's links; later days get a few more (the counting function the routes use)."""
    client = app.test_client()
    tokens = TrackingTokens(app.config["SECRET_KEY"])
    for n, received in enumerate(smtp_server.messages):
        html = received.message.get_body(("html",)).get_content()
        pixel = unescape(re.search(r'<img src="[^"]*/t/o/([^"]*)\.gif"', html).group(1))
        opened = tokens.read_open(pixel)
        client.get("/t/o/" + tokens.open_token(opened.broadcast_id, opened.slot - 360) + ".gif",
                   headers=READER, environ_base={"REMOTE_ADDR": f"198.51.100.{n}"})
        links = [unescape(h).rsplit("/", 1)[1] for h in re.findall(r'href="([^"]*/t/c/[^"]*)"', html)]
        for position, token in enumerate(links):
            claim = tokens.read_click(token)
            later = tokens.click_token(claim.broadcast_id, claim.position, claim.url,
                                       claim.slot - 400 - position)
            if position <= n % 2:
                assert client.get("/t/c/" + later, headers=READER,
                                  environ_base={"REMOTE_ADDR": f"198.51.100.{n}"}).status_code == 302
            # each copy's gateway scans it from its own address (one address fetching the
            # same link again within ten minutes would count once)
            client.get("/t/c/" + token, headers=SCANNER, environ_base={"REMOTE_ADDR": f"192.0.2.{n}"})
    broadcast_id = opened.broadcast_id
    for day, opens in ((1, 5), (2, 2), (4, 1)):
        for _ in range(opens):
            bump_day(db.session, broadcast_id, day, "opens")
        bump_day(db.session, broadcast_id, day, "clicks")
    db.session.execute(update(TrackedLink).where(TrackedLink.position == 0)
                       .values(clicks=TrackedLink.clicks + 3))
    db.session.commit()


def test_choose_tracking_send_and_read_opens_and_clicks_on_desktop_and_phone(
        page: Page, app, live_server, owner, smtp_server, run_worker_burst, screenshot_dir):
    app.config["BASE_URL"] = live_server.url
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="1 Main Street", time_zone="Europe/Berlin")
    weekly = make_list(db.session, 6, name="The Remarkably Thorough Weekly Dispatch")
    weekly.signup_enabled = True
    db.session.commit()
    draft = drafts.create_draft(db.session, list_id=weekly.id, subject="Autumn at Acme", body=BODY)
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, live_server.url)

    # Settings: the default is off; the card is photographed.
    page.goto(live_server.url + "/settings/#tracking")
    card = page.locator("#tracking")
    expect(card.get_by_role("radio", name=re.compile("^Off"))).to_be_checked()
    card.scroll_into_view_if_needed()
    photograph(page, screenshot_dir, "settings")

    # The list's switch, then its public sign-up page says so.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(live_server.url + f"/lists/{weekly.id}")
    page.locator("#tracking").get_by_role("radio", name=re.compile("^Per person")).check()
    page.get_by_role("button", name="Save the list's tracking").click()
    expect(page.locator("#list-tracking-state")).to_have_text("Per person")
    photograph(page, screenshot_dir, "list")
    page.goto(live_server.url + f"/join/{weekly.id}")
    expect(page.locator("#tracking-notice")).to_contain_text("whether you opened them")
    photograph(page, screenshot_dir, "join", card="section.card")
    db.session.get(MailingList, weekly.id)
    page.set_viewport_size({"width": 1280, "height": 900})

    # The send page: counts only, saved, then Send.
    page.goto(live_server.url + f"/broadcasts/{draft.id}/send")
    tracking = page.locator("#tracking")
    tracking.get_by_role("radio", name=re.compile("^Counts only")).check()
    tracking.get_by_role("button", name="Save the tracking choice").click()
    expect(page.locator("#tracking-now")).to_contain_text("counts only")
    untracked = page.locator("#tracking-untracked")
    expect(untracked).to_contain_text("1 link carries a merge field and is left untracked in "
                                      "counts-only mode")
    expect(untracked.locator("code")).to_have_text(
        "https://acme.example.com/people/{{ email }}?from=autumn-newsletter-2026")
    photograph(page, screenshot_dir, "send-page")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.get_by_label(re.compile("^Queue it anyway")).check()  # the worker runs below, in burst
    page.get_by_role("button", name=re.compile("^Send now")).click()
    expect(page.get_by_text("Sending to 6 subscribers")).to_be_visible()
    run_worker_burst()
    assert len(smtp_server.messages) == 6
    readers_hit(app, smtp_server)

    page.goto(live_server.url + f"/broadcasts/{draft.id}")
    section = page.locator("#analytics")
    expect(section.get_by_role("heading", name="Opens and clicks")).to_be_visible()
    expect(section.locator("#analytics-estimate")).to_contain_text("Opens are an estimate")
    chart = section.get_by_role("img", name=re.compile("^Opens and clicks over the first 7 days"))
    expect(chart).to_be_visible()
    expect(chart.locator("rect.bar-opens")).to_have_count(4)  # days 1, 2, 3 and 5
    expect(chart.locator("rect.bar-bot-clicks")).to_have_count(1)  # the scanner, day 1
    expect(section.locator("#analytics-opens")).to_have_text("14")  # 6 + 5 + 2 + 1
    expect(section.locator("#analytics-bots")).to_contain_text("18 clicks")  # 3 links x 6 copies
    rows = section.locator("#analytics-links tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("november-release-notes")
    expect(rows.nth(0).locator("td.num").nth(0)).to_have_text("9")  # 6 readers + 3 later
    expect(rows.nth(0).locator("td.num").nth(1)).to_have_text("6")
    expect(rows.nth(1).locator("td.num").nth(0)).to_have_text("3")
    expect(section.locator("#analytics-untracked")).to_contain_text("people/{{ email }}")
    assert page.evaluate("document.querySelectorAll('script[src*=chart]').length") == 0
    section.scroll_into_view_if_needed()
    section.get_by_text("Numbers per day").click()  # its table too must fit a phone
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        no_sideways_scroll(page)
        assert not table_problems(page), table_problems(page)
        box = chart.bounding_box()
        assert box is not None and box["width"] <= width and box["height"] > 50
        section.screenshot(path=str(screenshot_dir / f"analytics-broadcast-{width}.png"))
    page.screenshot(path=str(screenshot_dir / "analytics-broadcast-page-390.png"), full_page=True)

    # Turn it off: the card says so and offers no second stop.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.get_by_role("button", name="Turn tracking off").click()
    expect(page.locator("#analytics .analytics-mode")).to_contain_text("turned off")
    expect(page.get_by_role("button", name="Turn tracking off")).to_have_count(0)
