"""Mistakes in merge fields are never silent: typing `{{ nmae }}` in the editor brings a
warning with the closest field beside the preview, broken syntax is placed at its line and
column as soon as it is saved, and the send page shows the warnings above the Send button.
Desktop and phone."""

import pytest
from playwright.sync_api import Page, expect

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import MailingList, Subscriber, Subscription
from broadside.core.site_settings import update_settings
from tests.browser.steps import sign_in
from webapp.extensions import db

pytestmark = pytest.mark.browser


def no_sideways_scroll(page: Page) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px"


def test_typing_an_unknown_field_warns_in_the_editor_and_above_send(
        page: Page, live_server, owner, screenshot_dir):
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street", time_zone="UTC")
    news = MailingList(name="Monthly news")
    db.session.add(news)
    db.session.flush()
    for index, city in enumerate(["Lisbon", "Porto", "Faro", None]):
        person = Subscriber(email=f"reader{index}@example.com", name=f"Reader {index}",
                            attributes={"city": city} if city else {})
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=news.id, status="active"))
    db.session.commit()
    draft = drafts.create_draft(db.session, list_id=news.id, subject="November news",
                                body="# November\n\nNews from {{ attributes.city }}.")

    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/edit")
    warnings = page.locator("#merge-check")
    expect(warnings).to_contain_text("1 of 4 recipients has no city")
    expect(warnings).to_contain_text('Add a fallback: {{ attributes.city or "there" }}')

    body = page.get_by_label("Body", exact=True)
    body.click()
    body.press("Control+End")
    body.press_sequentially("\n\nSee you soon, {{ nmae }}")
    expect(warnings).to_contain_text("In the body, line 5, column 18: {{ nmae }} is not a merge "
                                     "field, so it will be empty for everyone. Did you mean "
                                     "{{ name }}?")
    expect(page.locator("#save-status")).to_contain_text("2 merge fields to check.")

    # Broken syntax is placed where it is as soon as it is saved, in the subject too.
    subject = page.get_by_label("Subject")
    subject.fill("November news for {{ name")
    expect(page.locator("#preview-problem")).to_contain_text(
        "The subject has a merge-field error on line 1, column 19: This {{ is never closed")
    expect(page.locator("#save-status")).to_contain_text("The email has an error")
    page.screenshot(path=str(screenshot_dir / "merge-editor-error.png"), full_page=True)
    subject.fill("November news")
    expect(page.locator("#preview-subject")).to_have_text("November news")
    expect(warnings).to_contain_text("Did you mean {{ name }}?")
    page.screenshot(path=str(screenshot_dir / "merge-editor.png"), full_page=True)

    page.goto(f"{live_server.url}/broadcasts/{draft.id}/send")
    card = page.locator(".merge-card")
    expect(card).to_contain_text("{{ nmae }} is not a merge field")
    expect(card).to_contain_text("1 of 4 recipients has no city")
    send = page.locator("#send-now")
    expect(send).to_have_text("Send now to 4 subscribers")
    assert card.bounding_box()["y"] + card.bounding_box()["height"] <= send.bounding_box()["y"]
    page.screenshot(path=str(screenshot_dir / "merge-send-confirm.png"), full_page=True)

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(card).to_contain_text("Did you mean {{ name }}?")
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshot_dir / "merge-send-confirm-phone.png"), full_page=True)

    page.goto(f"{live_server.url}/broadcasts/{draft.id}/edit")
    # On a phone the preview is below the form: the save status links to the warnings.
    link = page.locator("#save-status a")
    expect(link).to_have_text("2 merge fields to check.")
    link.click()
    expect(warnings).to_be_in_viewport()
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshot_dir / "merge-editor-phone.png"))

    # Broken syntax: the send page says where, and offers no Send button.
    drafts.update_draft(db.session, draft.id, list_id=news.id, subject="November news",
                        preheader="", body="Hi {{ name,\n\n{% if attributes.vip %}VIP{% endif %}")
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/send")
    expect(page.locator(".problem-list")).to_contain_text(
        "The body has a merge-field error on line 1, column 4: This {{ is never closed")
    expect(page.locator("#send-now")).to_have_count(0)
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshot_dir / "merge-send-blocked-phone.png"), full_page=True)
