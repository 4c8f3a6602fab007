"""Templates and blocks in Chromium: save a broadcast as a template, give the template its own
design, start a new broadcast from it (the design in its preview's HTML), insert a block, edit
the block and see the draft's preview change, send to the SMTP server (the block in the HTML
received), and a sent revision unchanged by a later edit of the block. The pages at 1280 and
390 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.campaigns.broadcasts import drafts
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import (
    Broadcast,
    ContentBlock,
    MailingList,
    MessageTemplate,
    Subscriber,
    Subscription,
)
from broadside.core.site_settings import update_settings
from tests.browser.steps import fits, sign_in
from webapp.extensions import db, get_jobs

pytestmark = pytest.mark.browser

BODY = "# Spring at Acme\n\nHi {{ name or \"friend\" }}, the garden is open again."


def photograph(page: Page, folder, name: str, part: str | None = None) -> None:
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        fits(page, f"{name} at {width} px")
        page.screenshot(path=str(folder / f"templates-{name}-{width}.png"), full_page=True)
        if part:
            page.locator(part).screenshot(path=str(folder / f"templates-{name}-part-{width}.png"))
    page.set_viewport_size({"width": 1280, "height": 900})


def test_template_then_block_then_send(page: Page, live_server, owner, smtp_server,
                                       run_worker_burst, screenshot_dir):
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street", time_zone="UTC")
    weekly = MailingList(name="Weekly")
    reader = Subscriber(email="reader@example.org", name="Robin")
    db.session.add_all([weekly, reader])
    db.session.flush()
    db.session.add(Subscription(subscriber_id=reader.id, list_id=weekly.id, status="active"))
    db.session.commit()
    source = drafts.create_draft(db.session, list_id=weekly.id, subject="Spring, {{ name }}",
                                 body=BODY)
    sign_in(page, live_server.url)

    # Save as template, from the editor; then its own design on the templates page.
    page.goto(f"{live_server.url}/broadcasts/{source.id}/edit")
    page.locator("summary", has_text="Save as template").click()
    page.get_by_label("Template name").fill("Spring issue")
    page.get_by_role("button", name="Save as template").click()
    expect(page.get_by_text("Saved as the template “Spring issue”")).to_be_visible()
    page.locator(".template-card", has_text="Spring issue").get_by_role(
        "link", name="Rename or change its design").click()
    page.get_by_label("Colour").fill("#aa3300")
    page.get_by_label("Width (pixels)").fill("720")
    page.get_by_role("button", name="Save template").click()
    expect(page.get_by_text("Template saved.")).to_be_visible()
    card = page.locator(".template-card", has_text="Spring issue")
    expect(card).to_contain_text("colour #aa3300")
    card.get_by_text("Preview").click()
    page.locator(".template-card", has_text="Plain letter").get_by_text("Preview").click()
    photograph(page, screenshot_dir, "index", ".template-card >> nth=3")

    # New from template: the chooser on the broadcasts page.
    page.goto(f"{live_server.url}/broadcasts/")
    page.get_by_label("Send to", exact=True).select_option(label="Weekly")
    page.get_by_label("Start from").select_option(label="Spring issue")
    photograph(page, screenshot_dir, "chooser", ".new-draft")
    page.get_by_role("button", name="New draft").click()
    expect(page.locator("#design-source")).to_contain_text("from the template “Spring issue”")
    db.session.expire_all()
    started = db.session.query(Broadcast).order_by(Broadcast.id.desc()).first()
    assert started.id != source.id and started.body == BODY
    frame = page.request.get(f"{live_server.url}/broadcasts/{started.id}/preview").text()
    assert "border-top: 4px solid #aa3300" in frame and "max-width: 720px" in frame

    # A block, made on the blocks page, inserted in the new draft by the editor's control.
    page.goto(f"{live_server.url}/templates/blocks/")
    page.get_by_label("Name").fill("Sign-off")
    page.get_by_label("Content").fill("With thanks,\\\n**Ann at Acme**")
    page.get_by_role("button", name="Save block").click()
    expect(page.get_by_text("Block “Sign-off” saved.")).to_be_visible()
    page.goto(f"{live_server.url}/broadcasts/{started.id}/edit")
    body = page.get_by_label("Body", exact=True)
    body.press("Control+End")
    page.get_by_role("button", name="Insert", exact=True).click()
    expect(body).to_have_value(BODY + "\n[[block: Sign-off]]\n")
    preview = page.frame_locator("#preview-frame")
    expect(preview.get_by_text("Ann at Acme")).to_be_visible()
    expect(page.locator("#save-status")).to_contain_text("Saved at")
    photograph(page, screenshot_dir, "editor", ".template-actions")
    page.goto(f"{live_server.url}/templates/blocks/")
    photograph(page, screenshot_dir, "blocks")

    # Editing the block changes the draft's preview.
    block = db.session.query(ContentBlock).one()
    page.goto(f"{live_server.url}/templates/blocks/{block.id}")
    expect(page.get_by_role("link", name="the draft “Spring, {{ name }}”")).to_be_visible()
    page.get_by_label("Content").fill("With thanks,\\\n**Bob at Acme**")
    page.get_by_role("button", name="Save block").click()
    page.goto(f"{live_server.url}/broadcasts/{started.id}/edit")
    expect(preview.get_by_text("Bob at Acme")).to_be_visible()

    # Sent: the block and the template's design reach the reader.
    db.session.expire_all()  # the page's saves were another session's
    send_broadcast(db.session, started.id, default_from="news@acme.example", jobs=get_jobs())
    run_worker_burst()
    message = smtp_server.wait_for(1)[0].message
    html = message.get_body(("html",)).get_content()
    assert "Bob at Acme" in html and "[[block" not in html
    assert "#aa3300" in html and "max-width: 720px" in html
    assert "Bob at Acme" in message.get_body(("plain",)).get_content()

    # A later edit of the block leaves the sent broadcast as it was sent.
    page.goto(f"{live_server.url}/templates/blocks/{block.id}")
    page.get_by_label("Content").fill("Cheers, Cy")
    page.get_by_role("button", name="Save block").click()
    expect(page.get_by_text("Block “Sign-off” saved.")).to_be_visible()
    sent_frame = page.request.get(f"{live_server.url}/broadcasts/{started.id}/preview").text()
    assert "Bob at Acme" in sent_frame and "Cheers, Cy" not in sent_frame
    assert db.session.query(MessageTemplate).count() == 1
