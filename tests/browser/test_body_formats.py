"""Three ways to write one message, in Chromium: the same short issue written in Markdown, in
the rich-text editor (typed, with its toolbar and keyboard shortcuts) and as the owner's HTML,
each saved and sent as a test through a real worker to the real SMTP server, whose received
HTML and plain-text parts are checked; switching modes converts, and warns (cancellable) before
losing formatting; an image from the media picker goes in at the cursor in every mode; the
rich-text editor runs under the strict CSP (its <style> carries the response's nonce)."""

from __future__ import annotations

import base64
import re

import pytest
from playwright.sync_api import Page, expect

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import Broadcast
from broadside.core.site_settings import update_settings
from tests.browser.steps import fits, sign_in
from tests.helpers import make_list, wait_until
from webapp.extensions import db

pytestmark = pytest.mark.browser

MARKDOWN = """# Autumn notes

Hello {{ name or "friend" }}, a **short** issue.

- exports are faster
- a calmer inbox"""

OWN_HTML = """<h1>Autumn notes</h1>
<p>Hello {{ name or "friend" }}, a <strong>short</strong> issue.</p>
<table role="presentation" width="100%"><tr>
<td style="color: #b00020; padding: 8px" align="center">exports are faster</td></tr></table>
<script>alert("x")</script><form action="https://evil.example/"><input name="q"></form>
<img src="http://tracker.example/pixel.gif" alt="" onerror="alert(1)">
<p onclick="alert(2)">a calmer inbox</p>"""

WIDTHS = (1280, 390)


# Text wider than its box, inside the body editor (the rest of each page is its own tests').
EDITOR_OVERFLOW = """() => [...document.querySelectorAll('.body-editor *')]
  .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1
          && !['TEXTAREA', 'TRIX-EDITOR'].includes(e.tagName))
  .map(e => e.tagName + ': ' + e.textContent.trim().slice(0, 60))"""


def photograph(page: Page, folder, name: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        if name.startswith("broadcast"):
            fits(page, f"{name} at {width} px")
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
        assert page.evaluate(EDITOR_OVERFLOW) == [], f"{name} at {width} px"
        # caret="initial": hiding it injects a <style>, which the strict CSP (rightly) refuses.
        page.screenshot(path=str(folder / f"formats-{name}-{width}.png"), full_page=True,
                        caret="initial")
    page.set_viewport_size({"width": 1280, "height": 900})


def csp_watch(page: Page) -> list[str]:
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(f"{page.url} {msg.location} {msg.text}")
            if msg.type == "error" or "Content Security Policy" in msg.text else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    return problems


def mode(page: Page, label: str):
    return page.locator(".editor-modes").get_by_label(label, exact=True)


def rich(page: Page):
    return page.locator("trix-editor")


def send_test_and_read(page: Page, smtp_server, to: str, problems: list[str]):
    # The editor's part of the page ran clean; the send card is the send actions' own.
    assert problems == [], "\n".join(problems)
    page.get_by_label("Send a test to").fill(to)
    page.get_by_role("button", name="Send test").click()
    wait_until(lambda: to in smtp_server.recipients(), timeout=20,
               message=f"the test to {to} never arrived")
    message = next(m.message for m in smtp_server.messages if to in m.rcpt_tos)
    html = message.get_body(("html",)).get_content()
    text = message.get_body(("plain",)).get_content()
    problems.clear()
    return html, text


@pytest.fixture
def sending(app, app_config, live_server, smtp_server, worker_factory):
    app_config.update(BASE_URL=live_server.url)
    app.config.update(BASE_URL=live_server.url, SMTP_URL=smtp_server.url)
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street", time_zone="UTC")
    readers = make_list(db.session, 2, name="Readers")
    worker_factory()
    return readers


def draft_for(readers, subject: str) -> int:
    return drafts.create_draft(db.session, list_id=readers.id, subject=subject).id


def saved(broadcast_id: int) -> Broadcast:
    db.session.expire_all()
    return db.session.get(Broadcast, broadcast_id)


def test_one_issue_written_in_each_mode_arrives_as_written(
        page: Page, live_server, owner, smtp_server, sending, screenshot_dir):
    problems = csp_watch(page)
    sign_in(page, live_server.url)

    # Markdown, as before.
    first = draft_for(sending, "Markdown notes")
    page.goto(f"{live_server.url}/broadcasts/{first}/edit")
    expect(mode(page, "Markdown")).to_be_checked()
    page.get_by_label("Body", exact=True).fill(MARKDOWN)
    wait_until(lambda: saved(first).body == MARKDOWN, timeout=10,
               message="the Markdown was never autosaved")
    photograph(page, screenshot_dir, "broadcast-markdown")
    html, text = send_test_and_read(page, smtp_server, "markdown@example.org",
                                    problems)
    assert "<strong>short</strong>" in html and "Hello Reader" in html
    assert "Autumn notes" in text and "- exports are faster" in text

    # Rich text, typed into Trix: heading and list from the toolbar, bold from the keyboard.
    second = draft_for(sending, "Rich notes")
    page.goto(f"{live_server.url}/broadcasts/{second}/edit")
    mode(page, "Rich text").click()
    expect(mode(page, "Rich text")).to_be_checked()
    expect(rich(page)).to_be_visible()
    expect(page.locator("#body")).to_be_hidden()
    editor = rich(page)
    editor.click()
    page.keyboard.type("Autumn notes")
    page.locator("trix-toolbar").get_by_role("button", name="Heading").click()
    page.keyboard.press("Enter")
    page.keyboard.type('Hello {{ name or "friend" }}, a short')
    # "short" selected (where a reader's double-click would put it), then bold from the keyboard.
    editor.evaluate("""e => { const text = e.editor.getDocument().toString();
                              const end = text.lastIndexOf("short") + 5;
                              e.editor.setSelectedRange([end - 5, end]); }""")
    page.keyboard.press("Control+b")
    expect(editor.locator("strong")).to_have_text("short")
    editor.evaluate("e => e.editor.setSelectedRange(e.editor.getDocument().getLength() - 1)")
    bold = page.locator("trix-toolbar").get_by_role("button", name="Bold")
    expect(bold).to_have_attribute("data-trix-active", "")
    bold.click()  # bold off, from the toolbar
    expect(bold).not_to_have_attribute("data-trix-active", "")
    page.keyboard.type(" issue.")
    page.keyboard.press("Enter")
    page.locator("trix-toolbar").get_by_role("button", name="Bullets").click()
    page.keyboard.type("exports are faster")
    page.keyboard.press("Enter")
    page.keyboard.type("a calmer inbox")
    wait_until(lambda: "a calmer inbox" in saved(second).body, timeout=10,
               message="the rich text was never autosaved")
    stored = saved(second)
    assert (stored.editor, stored.body_format) == ("rich", "html")
    assert "<h1>Autumn notes</h1>" in stored.body and "<strong>short</strong>" in stored.body
    assert '{{ name or "friend" }}' in stored.body  # the merge field as typed, not &quot;
    photograph(page, screenshot_dir, "broadcast-rich")
    html, text = send_test_and_read(page, smtp_server, "rich@example.org",
                                    problems)
    assert "<strong>short</strong>" in html and "Hello Reader" in html
    assert re.search(r"<li[^>]*>exports are faster</li>", html), html
    assert "Autumn notes" in text and "Hello Reader" in text and "exports are faster" in text

    # The owner's HTML: tables and inline styles kept; script, form, handlers, http image gone.
    third = draft_for(sending, "HTML notes")
    page.goto(f"{live_server.url}/broadcasts/{third}/edit")
    mode(page, "HTML").click()
    expect(mode(page, "HTML")).to_be_checked()
    expect(page.get_by_text("Kept: tables, inline styles")).to_be_visible()
    expect(page.get_by_text("Removed: scripts, forms, frames")).to_be_visible()
    page.get_by_label("Body", exact=True).fill(OWN_HTML)
    wait_until(lambda: saved(third).body == OWN_HTML, timeout=10,
               message="the HTML was never autosaved")
    assert saved(third).body_format == "html"
    photograph(page, screenshot_dir, "broadcast-html")
    html, text = send_test_and_read(page, smtp_server, "html@example.org",
                                    problems)
    assert "<table" in html and "#b00020" in html and 'align="center"' in html
    assert "<script" not in html and "alert(" not in html and "onerror" not in html
    assert "onclick" not in html and "evil.example" not in html and "tracker.example" not in html
    assert "Hello Reader" in text and "exports are faster" in text and "a calmer inbox" in text
    assert problems == [], "\n".join(problems)


# A 1x1 PNG, served for the made-up media URL (no network here).
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
                         "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def insert_image(page: Page, target: str, alt: str) -> None:
    """What the media picker does when the owner picks an image (the interface between the
    media library and the editors)."""
    page.evaluate("""([target, alt]) => document.dispatchEvent(new CustomEvent(
        "broadside:insert-image", {detail: {target, alt, url: "https://cdn.example/m/abc.png",
                                            width: 300, height: 200}}))""", [target, alt])


def test_switching_converts_and_warns_before_losing_formatting(
        page: Page, live_server, owner, sending, screenshot_dir):
    problems = csp_watch(page)
    page.route("https://cdn.example/**",
               lambda route: route.fulfill(body=PIXEL, content_type="image/png"))
    draft = drafts.create_draft(db.session, list_id=sending.id, subject="Switching",
                                body=MARKDOWN)
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/edit")
    body = page.locator("#body")

    # An image at the cursor, in Markdown.
    body.focus()
    body.press("Control+End")
    insert_image(page, "body", "A chart")
    expect(body).to_have_value(MARKDOWN + "![A chart](https://cdn.example/m/abc.png)")

    # Markdown -> rich text: converted on the server, nothing to lose, no question asked.
    mode(page, "Rich text").click()
    expect(mode(page, "Rich text")).to_be_checked()
    editor = rich(page)
    expect(editor.locator("h1")).to_have_text("Autumn notes")
    expect(editor.locator("strong")).to_have_text("short")
    expect(editor.locator("li")).to_have_count(2)
    expect(editor.locator("img")).to_have_attribute("src", "https://cdn.example/m/abc.png")
    # The toolbar works from the keyboard: its buttons take focus, Enter presses them.
    editor.focus()
    editor.press("Control+End")
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")  # out of the list
    page.keyboard.type("Thanks for reading")
    quote = page.locator("trix-toolbar").get_by_role("button", name="Quote")
    expect(quote).not_to_have_attribute("tabindex", "-1")
    quote.focus()
    page.keyboard.press("Enter")
    expect(editor.locator("blockquote")).to_have_text("Thanks for reading")
    expect(editor).to_be_focused()
    insert_image(page, "body", "Second")
    expect(editor.locator("img")).to_have_count(2)
    # Its alt text is its caption in the editor, and a plain <img> in what is stored.
    expect(editor.locator("figcaption").last).to_have_text("Second")
    wait_until(lambda: 'alt="Second" width="300" height="200"' in saved(draft.id).body,
               timeout=10, message="the image's alt and size were not stored")
    assert "data-trix" not in saved(draft.id).body and 'alt="A chart"' in saved(draft.id).body
    wait_until(lambda: saved(draft.id).editor == "rich", timeout=10,
               message="the switch to rich text was never saved")
    assert '{{ name or "friend" }}' in saved(draft.id).body

    # Rich text -> HTML keeps the HTML; an image goes in as a tag at the cursor.
    mode(page, "HTML").click()
    expect(page.locator(".editor-status")).to_have_text("Now writing in HTML.")
    expect(mode(page, "HTML")).to_be_checked()
    expect(body).to_be_visible()
    expect(editor).to_be_hidden()
    assert "<h1>Autumn notes</h1>" in body.input_value()
    body.focus()
    body.press("Control+End")
    body.type('\n<table><tr><td style="color: #b00020">boxed</td></tr></table>')
    insert_image(page, "body", "Third")
    assert body.input_value().endswith(
        '<img src="https://cdn.example/m/abc.png" alt="Third" width="300" height="200">')

    # HTML -> Markdown would lose the table and its colour: asked first; "keep" changes nothing.
    before = body.input_value()
    mode(page, "Markdown").click()
    dialog = page.get_by_role("dialog", name="Switch and lose formatting?")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Markdown cannot hold")
    expect(dialog).to_contain_text("tables")
    expect(dialog).to_contain_text("inline styles")
    expect(dialog.get_by_role("button", name="Keep writing as before")).to_be_focused()
    page.screenshot(path=str(screenshot_dir / "formats-switch-warning-1280.png"), caret="initial")
    dialog.get_by_role("button", name="Keep writing as before").click()
    expect(dialog).to_be_hidden()
    expect(mode(page, "HTML")).to_be_checked()
    expect(body).to_have_value(before)

    # Escape keeps it too; "switch anyway" converts.
    mode(page, "Markdown").click()
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(mode(page, "HTML")).to_be_checked()
    mode(page, "Markdown").click()
    dialog.get_by_role("button", name="Switch anyway").click()
    expect(mode(page, "Markdown")).to_be_checked()
    expect(body).to_have_value(re.compile(r"^# Autumn notes\n\nHello \{\{ name or \"friend\" \}\}"))
    assert "**short**" in body.input_value() and "<table" not in body.input_value()
    assert "![Third](https://cdn.example/m/abc.png)" in body.input_value()
    wait_until(lambda: saved(draft.id).body_format == "markdown", timeout=10,
               message="the switch back to Markdown was never saved")
    assert problems == [], "\n".join(problems)


def test_a_step_and_a_template_are_written_in_each_mode(
        page: Page, app, live_server, owner, sending, screenshot_dir):
    from broadside.campaigns.automations import service as automations
    from broadside.campaigns.transactional import templates
    from broadside.core.models import AutomationStep, TransactionalTemplate

    problems = csp_watch(page)
    automation = automations.create_automation(db.session, automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": sending.id},
        "steps": [{"delay": "PT0S", "subject": "Welcome", "body": MARKDOWN}]}),
        default_from=app.config["MAIL_FROM"])
    template = templates.create_template(db.session, templates.parse_template(db.session, {
        "name": "Receipt", "subject": "Your receipt", "body": MARKDOWN}),
        default_from=app.config["MAIL_FROM"])
    sign_in(page, live_server.url)

    # A step: each mode photographed; written in rich text and saved.
    page.goto(f"{live_server.url}/automations/{automation.id}/edit")
    step_body = page.locator("#step-1-body")
    photograph(page, screenshot_dir, "step-markdown")
    mode(page, "Rich text").click()
    expect(rich(page).locator("h1")).to_have_text("Autumn notes")
    rich(page).focus()
    rich(page).press("Control+End")
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")  # out of the list
    page.keyboard.type("{% if attributes.vip %}")
    page.keyboard.press("Enter")
    page.keyboard.type("A word for our VIPs.")
    page.keyboard.press("Enter")
    page.keyboard.type("{% endif %}")
    expect(step_body).to_have_value(re.compile(r"\{% endif %\}"))
    photograph(page, screenshot_dir, "step-rich")
    page.get_by_role("button", name="Save", exact=True).last.click()
    expect(page.get_by_text("The automation “Welcome” is saved.")).to_be_visible()
    db.session.expire_all()
    step = db.session.query(AutomationStep).one()
    assert (step.editor, step.body_format) == ("rich", "html")
    assert "{% if attributes.vip %}" in step.body and "<strong>short</strong>" in step.body
    # Reopened in rich text, with the merge fields as typed.
    expect(mode(page, "Rich text")).to_be_checked()
    expect(rich(page)).to_contain_text("{% if attributes.vip %}")
    mode(page, "HTML").click()
    expect(step_body).to_be_visible()
    photograph(page, screenshot_dir, "step-html")

    # A template: each mode; written as HTML and saved.
    page.goto(f"{live_server.url}/settings/transactional/{template.id}")
    photograph(page, screenshot_dir, "template-markdown")
    mode(page, "Rich text").click()
    expect(rich(page).locator("strong")).to_have_text("short")
    photograph(page, screenshot_dir, "template-rich")
    mode(page, "HTML").click()
    expect(page.locator("#body")).to_be_visible()
    page.locator("#body").fill('<p>Paid: <strong>{{ data.amount }}</strong></p>'
                               '<table><tr><td align="right">Total</td></tr></table>')
    photograph(page, screenshot_dir, "template-html")
    page.get_by_role("button", name="Save the template").click()
    db.session.expire_all()
    wait_until(lambda: db.session.get(TransactionalTemplate, template.id).editor == "html",
               timeout=10, message="the template's mode was never saved")
    saved_template = db.session.get(TransactionalTemplate, template.id)
    assert saved_template.body_format == "html" and "<table>" in saved_template.body
    assert problems == [], "\n".join(problems)
