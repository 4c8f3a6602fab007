"""Settings -> Transactional templates in Chromium, at a desktop width and on a phone: the empty
list says what templates are for, a refused body keeps what was typed with the refusal under
it, the preview fills the sample data typed as JSON (and says when it is not an object), a test
send goes through the real worker to the SMTP server on loopback while its status line follows
it, and the list shows the template and its send. Nothing may scroll sideways, no text may
leave its box, and the tables are one labelled block per row on a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.core.site_settings import update_settings
from tests.browser.steps import fits, sign_in, table_problems
from tests.helpers import OWNER_EMAIL
from webapp.extensions import db

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": 1280, "phone": 390}
BODY = """# Reset your password

Hello {{ name }}, someone asked to reset the password of {{ email }}.

[Choose a new password](https://app.example.com/reset/{{ data.token }})

The link works for {{ data.hours }} hours."""
TOKEN = "4f9a2c1e"
LINK = f"https://app.example.com/reset/{TOKEN}"


@pytest.mark.parametrize("size", list(WIDTHS))
def test_create_a_template_preview_it_with_sample_data_and_receive_a_test(
        page: Page, live_server, owner, smtp_server, run_worker_burst, screenshot_dir, size):
    update_settings(db.session, sender_name="Acme", sender_email="hello@acme.example",
                    postal_address="Acme Ltd\n1 Main Street\nSpringfield", time_zone="UTC")
    page.set_default_timeout(5_000)
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    csp_errors: list[str] = []
    page.on("console", lambda msg: csp_errors.append(msg.text)
            if "Content Security Policy" in msg.text else None)
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/")
    page.get_by_role("link", name="Transactional templates", exact=True).click()
    expect(page.get_by_role("heading", name="Transactional templates", level=1)).to_be_visible()
    expect(page.locator("#no-templates")).to_contain_text("Transactional API")
    fits(page, "the empty list")
    page.screenshot(path=str(screenshot_dir / f"transactional-empty-{size}.png"), full_page=True)

    page.get_by_role("link", name="New template").click()
    page.get_by_label("Name").fill("Password reset")
    page.get_by_label("Subject").fill("Reset your password, {{ name }}")
    page.get_by_label("Body", exact=True).fill("Hello {{ name ")
    page.get_by_label("Essential").check()
    page.get_by_role("button", name="Save the template").click()
    expect(page.locator("#body-error")).to_contain_text("line 1")
    expect(page.get_by_label("Subject")).to_have_value("Reset your password, {{ name }}")
    expect(page.get_by_label("Essential")).to_be_checked()
    fits(page, "the refused template")
    page.screenshot(path=str(screenshot_dir / f"transactional-error-{size}.png"), full_page=True)

    page.get_by_label("Body", exact=True).fill(BODY)
    page.get_by_role("button", name="Save the template").click()
    expect(page.get_by_role("heading", name="Password reset", level=1)).to_be_visible()
    expect(page.locator("#revision-line")).to_contain_text("Revision 1, saved at")

    sample = page.get_by_label("Sample data (JSON)")
    # htmx listens for the typing once the page has loaded: typed earlier (a loaded machine
    # shows the heading before the scripts have run), the preview would never be asked for.
    page.wait_for_load_state("load")
    sample.fill('["not", "an", "object"]')
    expect(page.locator("#sample-error")).to_contain_text("must be a JSON object")
    sample.fill(f'{{"token": "{TOKEN}", "hours": 2}}')
    expect(page.locator("#preview-text")).to_contain_text(f"Choose a new password ({LINK})")
    expect(page.locator("#preview-subject")).to_have_text("Reset your password, Alex")
    frame = page.frame_locator("#preview-frame")
    expect(frame.get_by_role("link", name="Choose a new password")).to_have_attribute("href", LINK)
    expect(frame.get_by_text("The link works for 2 hours.")).to_be_visible()
    fits(page, "the preview")
    # Before the full-page capture, which leaves the (out-of-process) sandboxed frame blank.
    page.locator("#try").screenshot(path=str(screenshot_dir / f"transactional-preview-pane-{size}.png"))
    page.locator("#preview-frame").screenshot(
        path=str(screenshot_dir / f"transactional-preview-frame-{size}.png"))
    page.screenshot(path=str(screenshot_dir / f"transactional-preview-{size}.png"), full_page=True)

    expect(page.get_by_label("Send a test to")).to_have_value(OWNER_EMAIL)
    page.get_by_role("button", name="Send test").click()
    expect(page.locator("#test-status")).to_contain_text(f"Test queued for {OWNER_EMAIL}")
    assert run_worker_burst() == 0
    [received] = smtp_server.wait_for(1)
    assert received.rcpt_tos == [OWNER_EMAIL]
    message = received.message
    assert message["Subject"] == "[Test] Reset your password, Alex"
    assert LINK in message.get_body(("plain",)).get_content()
    # The line asks again every 2 s and follows the message.
    expect(page.locator("#test-status")).to_contain_text(f"Test sent to {OWNER_EMAIL}",
                                                          timeout=10_000)
    page.reload()
    expect(page.locator("#template-sends")).to_contain_text("sent")
    assert table_problems(page, ["#template-sends"] if size == "phone" else []) == []

    page.get_by_role("link", name="Back to Transactional templates").click()
    expect(page.locator("#template-table")).to_contain_text("Password reset")
    expect(page.locator("#template-table")).to_contain_text("yes")
    expect(page.locator("#recent-sends")).to_contain_text(OWNER_EMAIL)
    fits(page, "the list")
    assert table_problems(page, ["#template-table", "#recent-sends"] if size == "phone" else []) == []
    page.screenshot(path=str(screenshot_dir / f"transactional-list-{size}.png"), full_page=True)
    assert csp_errors == []
