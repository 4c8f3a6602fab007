"""What an owner sees when a NUL character reaches a form or an address (the one rule for text,
webapp/text_input.py): the reason, naming the field, on a page that fits a desktop and a
phone; in the broadcast editor, above the form, while the preview and the typed text stay."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import Broadcast, MailingList
from tests.browser.steps import sign_in
from webapp.extensions import db

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": 1280, "phone": 390}
NO_SIDEWAYS_SCROLL = "() => document.scrollingElement.scrollWidth <= innerWidth"


def test_a_nul_in_an_address_is_a_page_that_says_which_part(page: Page, live_server, owner,
                                                            screenshot_dir):
    sign_in(page, live_server.url)
    for name, width in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": 800})
        answer = page.goto(live_server.url + "/subscribers/?q=ann%00")
        assert answer is not None and answer.status == 422
        expect(page.get_by_role("heading", name="That did not work")).to_be_visible()
        expect(page.get_by_text("The “search” in the address holds a NUL character")).to_be_visible()
        assert page.evaluate(NO_SIDEWAYS_SCROLL), name
        page.screenshot(path=str(screenshot_dir / f"text-rule-address-{name}.png"), full_page=True)


def test_a_nul_typed_into_the_editor_is_refused_above_the_form_and_nothing_is_saved(
        page: Page, live_server, owner, screenshot_dir):
    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.commit()
    draft_id = drafts.create_draft(db.session, list_id=weekly.id, subject="Hello",
                                   body="Kept as it was").id
    db.session.commit()
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/broadcasts/{draft_id}/edit")
    expect(page.locator("#preview-pane")).to_be_attached()
    # A NUL cannot be typed on a keyboard; a paste or a script can put one in the field.
    page.evaluate("""() => {
      const body = document.getElementById('body');
      body.value = 'Pasted \\u0000 text';
      body.dispatchEvent(new Event('input', {bubbles: true}));
    }""")
    alert = page.locator("#main > .flash-error")
    expect(alert).to_contain_text("The “body” field holds a NUL character")
    expect(alert).to_contain_text("nothing was saved")
    expect(page.locator("#preview-pane")).to_be_attached()  # not replaced by the answer
    assert page.input_value("#body") == "Pasted \x00 text"  # the typing stays to be fixed
    for name, width in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": 800})
        assert page.evaluate(NO_SIDEWAYS_SCROLL), name
        page.screenshot(path=str(screenshot_dir / f"text-rule-editor-{name}.png"))
    db.session.expire_all()
    assert db.session.get(Broadcast, draft_id).body == "Kept as it was"
