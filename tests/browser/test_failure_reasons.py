"""The failed deliveries and their timelines, in a real Chromium at 1280 px and 390 px: each
reason says who refused (the mail server with its reply, or Broadside before sending) and
what to do, fits its cell without sideways scrolling, and shows no Python text. The email's
footer link says "Unsubscribe"."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import insert, select

from broadside.core.models import Delivery, Subscriber, Subscription
from tests.browser.steps import sign_in
from tests.helpers import make_list, start_broadcast
from webapp.extensions import db

pytestmark = pytest.mark.browser

# An address no server is asked about: its domain is no valid international domain name (an
# ASCII or UTF-8 local part goes out now, with SMTPUTF8 where needed).
NON_ASCII = "juergen.mueller@\u0301example.com"
REFUSED = "reader00001@example.com"
RAW = re.compile(r"\b[A-Z][A-Za-z]+(?:Error|Exception)\b|Traceback|codec can't|\[Errno")


def test_failed_rows_say_who_refused_at_both_widths(page: Page, app, live_server, owner, smtp_server,
                                                     run_worker_burst, screenshot_dir):
    app.config["BASE_URL"] = live_server.url
    readers = make_list(db.session, 3, name="Weekly readers")
    odd = db.session.execute(insert(Subscriber).values(email=NON_ASCII, name="Jürgen", attributes={})
                             .returning(Subscriber.id)).scalar_one()
    db.session.execute(insert(Subscription).values(subscriber_id=odd, list_id=readers.id,
                                                   status="active"))
    db.session.commit()
    smtp_server.script.rcpt_replies = {REFUSED: ["550 5.1.1 No such user here"] * 5}
    broadcast = start_broadcast(app, readers, subject="Autumn news")
    run_worker_burst()
    odd_row = db.session.scalar(select(Delivery.id).where(Delivery.subscriber_id == odd))

    sign_in(page, live_server.url)
    for width, suffix in ((1280, ""), (390, "-phone")):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/broadcasts/{broadcast.id}/deliveries?status=failed")
        table = page.locator("#delivery-results")
        expect(table).to_contain_text("Refused by the mail server for this address "
                                      "(550 5.1.1 No such user here)")
        row = page.locator(f"#delivery-{odd_row}")
        expect(row).to_contain_text("Broadside did not send it: the domain of the address is not "
                                    "a valid international domain name")
        expect(row).not_to_contain_text("Refused by the mail server")
        row.get_by_role("link", name=re.compile("Timeline")).click()
        timeline = page.locator(f"#timeline-{odd_row}")
        expect(timeline).to_contain_text("refused by Broadside before sending, no server was asked")
        assert not RAW.search(page.content())
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{overflow} px of sideways scrolling at {width} px"
        page.screenshot(path=str(screenshot_dir / f"failure-reasons{suffix}.png"), full_page=True)

        page.goto(f"{live_server.url}/broadcasts/{broadcast.id}/preview")
        expect(page.get_by_role("link", name="Unsubscribe", exact=True)).to_be_visible()
        assert "one click" not in page.content()
        page.screenshot(path=str(screenshot_dir / f"email-footer{suffix}.png"), full_page=True)
