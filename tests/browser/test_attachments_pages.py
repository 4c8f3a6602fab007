"""Attaching a PDF on the broadcast editor in Chromium: a file that is not what its name says
refused under the field, the PDF listed with its size and kind and saved with the draft, the
warning that attachments hurt bulk mail's deliverability on the editor and on the send page,
and "Remove" taking it off the message. Screenshots at 1280 and 390 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import Broadcast, MailingList
from broadside.core.site_settings import update_settings
from tests import attachment_files as files
from tests.browser.steps import fits, sign_in
from tests.helpers import wait_until
from webapp.extensions import db

pytestmark = pytest.mark.browser


def photograph(page: Page, folder, name: str, target: str, whole: bool = True) -> None:
    for width, label in ((1280, "desktop"), (390, "phone")):
        page.set_viewport_size({"width": width, "height": 900})
        if whole:
            fits(page, f"{name} at {width} px")
        else:
            assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
            assert page.evaluate(f"""[...document.querySelectorAll(
                '{target} :is(p, label, small, span, button, li)')]
                .filter(e => e.offsetParent !== null && !e.closest('.sr-only')
                        && e.scrollWidth > e.clientWidth + 1).length""") == 0, \
                f"{name}: text out of its box at {width} px"
        page.locator(target).scroll_into_view_if_needed()
        page.locator(target).screenshot(path=str(folder / f"attachments-{name}-{label}.png"))
    page.set_viewport_size({"width": 1280, "height": 900})


def saved_ids(broadcast_id: int) -> list[int]:
    db.session.expire_all()
    return list(db.session.get(Broadcast, broadcast_id).attachment_ids or [])


def test_attach_a_pdf_see_the_warning_then_remove_it(page: Page, live_server, owner,
                                                     screenshot_dir):
    weekly = MailingList(name="Monthly news")
    db.session.add(weekly)
    db.session.commit()
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street\nSpringfield", time_zone="UTC")
    draft = drafts.create_draft(db.session, list_id=weekly.id, subject="The programme",
                                body="Our programme for next year is attached.")
    csp_errors: list[str] = []
    page.on("console", lambda msg: csp_errors.append(msg.text)
            if "Content Security Policy" in msg.text else None)

    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/edit")
    field = page.locator("#attachment-field")
    expect(field.locator("#attachment-warning")).to_contain_text(
        "Attachments on bulk mail hurt deliverability")
    expect(field.locator("#attachment-warning")).to_contain_text(
        "upload the file to your site and link to it")

    # A "PDF" that is not one: refused under the field, nothing attached.
    field.get_by_label("File to attach").set_input_files(
        {"name": "programme.pdf", "mimeType": "application/pdf", "buffer": b"<html>no</html>"})
    field.get_by_role("button", name="Upload").click()
    expect(page.locator("#attachment-error")).to_contain_text("is not a PDF")

    page.locator("#attachment-field").get_by_label("File to attach").set_input_files(
        {"name": "Programme 2027.pdf", "mimeType": "application/pdf", "buffer": files.PDF})
    page.locator("#attachment-field").get_by_role("button", name="Upload").click()
    listed = page.locator("#attachment-field .attachment")
    expect(listed).to_have_count(1)
    expect(listed).to_contain_text("Programme 2027.pdf")
    expect(listed).to_contain_text("PDF, 1 KB" if len(files.PDF) >= 1024 else
                                   f"PDF, {len(files.PDF)} bytes")
    expect(page.locator("#attachment-field [data-attachments-total]")).to_contain_text(
        "of 10.0 MB attached")
    expect(page.locator("#attachment-error")).to_have_count(0)
    # The autosave keeps it on the draft.
    wait_until(lambda: len(saved_ids(draft.id)) == 1, message="the upload saved on the draft")
    photograph(page, screenshot_dir, "editor-field", "#attachment-field")

    page.goto(f"{live_server.url}/broadcasts/{draft.id}/send")
    card = page.locator("#confirm-attachments")
    expect(card.locator("#attachments-warning")).to_contain_text(
        "Attachments on bulk mail hurt deliverability")
    expect(card).to_contain_text("Programme 2027.pdf")
    photograph(page, screenshot_dir, "send-warning", "#confirm-attachments")

    page.goto(f"{live_server.url}/broadcasts/{draft.id}/edit")
    page.locator("#attachment-field").get_by_role(
        "button", name="Remove Programme 2027.pdf from this message").click()
    expect(page.locator("#attachment-field .attachment")).to_have_count(0)
    expect(page.locator("#attachment-field [data-attachments-total]")).to_have_text(
        "0 bytes of 10.0 MB attached.")
    wait_until(lambda: saved_ids(draft.id) == [], message="the removal saved on the draft")
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/send")
    expect(page.locator("#confirm-attachments")).to_have_count(0)
    assert csp_errors == []


def test_a_template_and_a_step_take_a_file_too(page: Page, live_server, owner, screenshot_dir):
    from broadside.campaigns.automations import service as automations
    from broadside.campaigns.transactional import templates

    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street\nSpringfield", time_zone="UTC")
    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.commit()
    template = templates.create_template(db.session, templates.parse_template(db.session, {
        "name": "Ticket", "subject": "Your ticket", "body": "See you there."}),
        default_from="news@acme.example")
    automation = automations.create_automation(db.session, automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly.id},
        "steps": [{"subject": "Welcome", "body": "Hello"}]}), default_from="news@acme.example")
    sign_in(page, live_server.url)

    page.goto(f"{live_server.url}/settings/transactional/{template.id}")
    field = page.locator("#attachment-field")
    expect(field.locator(".attachment-warning")).to_have_count(0)  # a ticket is what they are for
    field.get_by_label("File to attach").set_input_files(
        {"name": "ticket.ics", "mimeType": "text/calendar", "buffer": files.ICS})
    field.get_by_role("button", name="Upload").click()
    expect(page.locator("#attachment-field .attachment")).to_contain_text("calendar event")
    photograph(page, screenshot_dir, "template-field", "#attachment-field")
    page.get_by_role("button", name="Save").first.click()
    db.session.expire_all()
    wait_until(lambda: bool(templates.get_template(db.session, template.id).attachment_ids),
               message="the template saved with its file")

    page.goto(f"{live_server.url}/automations/{automation.id}/edit")
    step = page.locator("#step-1-attachment-field")
    expect(step.locator(".attachment-warning")).to_contain_text("hurt deliverability")
    step.get_by_label("File to attach").set_input_files(
        {"name": "guide.pdf", "mimeType": "application/pdf", "buffer": files.PDF})
    step.get_by_role("button", name="Upload").click()
    expect(page.locator("#step-1-attachment-field .attachment")).to_contain_text("guide.pdf")
    # (The editor's hidden default-submit button, 1 px wide by design, is not text out of its
    # box: only the sideways scroll is checked on this page.)
    photograph(page, screenshot_dir, "step-field", "#step-1-attachment-field", whole=False)
