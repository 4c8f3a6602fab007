import pytest
from playwright.sync_api import Page, expect

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import Broadcast, MailingList
from broadside.core.site_settings import update_settings
from tests.browser.steps import sign_in
from tests.helpers import OWNER_EMAIL
from webapp.extensions import db

pytestmark = pytest.mark.browser

BODY = """# November at Acme

Hi {{ name or "friend" }}, here is what changed this month:

- Exports are **twice as fast**
- A calmer inbox, with fewer notifications
- Dark mode for the dashboard

Read the [full changelog](https://example.com/changelog) or simply reply to this email.

> The best newsletter is the one people look forward to.

Thanks for reading!"""


def test_compose_with_live_preview_then_save(page: Page, live_server, owner, screenshot_dir):
    db.session.add(MailingList(name="Monthly news"))
    db.session.commit()
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street\nSpringfield", time_zone="UTC")
    csp_errors: list[str] = []
    page.on("console", lambda msg: csp_errors.append(msg.text)
            if "Content Security Policy" in msg.text else None)

    sign_in(page, live_server.url)
    page.get_by_role("link", name="Broadcasts").click()
    page.get_by_label("Send to", exact=True).select_option(label="Monthly news")
    page.get_by_role("button", name="New draft").click()
    expect(page.get_by_role("heading", name="New broadcast")).to_be_visible()

    preview = page.frame_locator("#preview-frame")
    page.get_by_label("Subject").fill("News for {{ name }}")
    page.get_by_label("Preheader").fill("Faster exports, a calmer inbox")
    page.get_by_label("Body", exact=True).fill(BODY)
    # The autosave (htmx, debounced) stores the draft and swaps in a fresh preview of the
    # real email rendered for the sample recipient, Alex.
    expect(page.locator("#preview-subject")).to_have_text("News for Alex")
    expect(preview.get_by_role("heading", name="November at Acme")).to_be_visible()
    expect(preview.get_by_text("Hi Alex, here is what changed")).to_be_visible()
    expect(preview.get_by_role("link", name="Unsubscribe")).to_be_visible()
    expect(preview.get_by_text("1 Main Street")).to_be_visible()
    expect(page.locator("#save-status")).to_contain_text("Saved at")

    page.get_by_label("Body", exact=True).fill(BODY + "\n\nP.S. {{ email }}")
    expect(preview.get_by_text(f"P.S. {OWNER_EMAIL}")).to_be_visible()

    page.get_by_role("button", name="Save draft").click()
    expect(page.get_by_text("Draft saved.")).to_be_visible()
    db.session.expire_all()
    broadcast = db.session.query(Broadcast).one()
    assert broadcast.subject == "News for {{ name }}"
    assert broadcast.body.endswith("P.S. {{ email }}")
    expect(page.get_by_role("heading", name="News for {{ name }}")).to_be_visible()
    expect(preview.get_by_text(f"P.S. {OWNER_EMAIL}")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "compose.png"), full_page=True)

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(preview.get_by_role("heading", name="November at Acme")).to_be_visible()
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px on a phone"
    page.screenshot(path=str(screenshot_dir / "compose-phone.png"))
    # Element shots: a full-page capture leaves the (out-of-process) sandboxed frame blank.
    page.locator(".compose-preview").screenshot(
        path=str(screenshot_dir / "compose-phone-preview.png"))
    for path in ("/broadcasts/", "/settings/"):
        page.goto(live_server.url + path)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} scrolls sideways by {overflow}px on a phone"
    assert csp_errors == []


def test_leaving_before_autosave_asks_first(page: Page, live_server, owner):
    mailing_list = MailingList(name="Monthly news")
    db.session.add(mailing_list)
    db.session.commit()
    draft = drafts.create_draft(db.session, list_id=mailing_list.id, subject="Draft")
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/edit")
    expect(page.locator("#save-status")).to_contain_text("Saved at")
    dialogs: list[str] = []

    def dismiss(dialog):
        dialogs.append(dialog.type)
        dialog.dismiss()

    page.on("dialog", dismiss)
    # Leaving within the autosave delay: the browser asks, and staying keeps the text.
    page.get_by_label("Body", exact=True).fill("Words not stored yet")
    with page.expect_event("dialog"):
        page.get_by_role("link", name="All broadcasts").click(no_wait_after=True)
    assert dialogs == ["beforeunload"]
    expect(page).to_have_url(f"{live_server.url}/broadcasts/{draft.id}/edit")
    expect(page.get_by_label("Body", exact=True)).to_have_value("Words not stored yet")
    # Once autosave has stored them, leaving is silent.
    expect(page.frame_locator("#preview-frame").get_by_text("Words not stored yet")).to_be_visible()
    page.get_by_role("link", name="All broadcasts").click()
    expect(page.get_by_role("heading", name="Broadcasts", exact=True)).to_be_visible()
    assert dialogs == ["beforeunload"]
