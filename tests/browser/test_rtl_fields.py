"""The owner's pages stay usable with right-to-left words in their fields: an Arabic subject
and body in the editor read from the right (each field takes the direction of its text),
while the page around them stays as it is."""

import pytest
from playwright.sync_api import Page

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import MailingList
from tests.browser.steps import sign_in
from webapp.extensions import db

pytestmark = pytest.mark.browser

SUBJECT = "نشرة نوفمبر: ما الجديد"
BODY = "مرحبا {{ name }}،\n\nهذه أخبار الشهر. Broadside 2.0 متاح الآن.\n\nشكرا للقراءة."


def test_arabic_in_the_editor_reads_from_the_right(page: Page, live_server, owner, screenshot_dir):
    weekly = MailingList(name="النشرة")
    db.session.add(weekly)
    db.session.commit()
    draft = drafts.create_draft(db.session, list_id=weekly.id, subject=SUBJECT, body=BODY)
    sign_in(page, live_server.url)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/broadcasts/{draft.id}")
        subject = page.locator("input[name=subject]")
        assert subject.input_value() == SUBJECT
        # The field's text starts at its right edge: its first letters are drawn there.
        caret_side = subject.evaluate("""el => {
            const style = getComputedStyle(el);
            return [style.unicodeBidi, style.textAlign, getComputedStyle(document.documentElement).direction];
        }""")
        assert caret_side == ["plaintext", "start", "ltr"]
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.screenshot(path=str(screenshot_dir / f"rtl-editor-{width}.png"), full_page=False)
