"""The media library in Chromium: upload by the file picker, by dropping a file and by
pasting one; the library at both widths; the picker beside the broadcast editor, whose pick
and whose upload each dispatch `broadside:insert-image` with the image's URL, alt text and
size (the editor's listener is the formats work's: here the event's detail is read on
document)."""

from __future__ import annotations

import base64

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core.models import Media
from tests.browser.steps import sign_in
from tests.helpers import make_list
from tests.media_images import animated_gif, still
from webapp.extensions import db

pytestmark = pytest.mark.browser

WIDTHS = (1280, 390)

# Hand a file to the page as the browser would: a File in a DataTransfer, dropped on the
# upload zone or pasted.
DROP = """([b64, name, type, selector]) => {
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], name, {type}));
  const zone = document.querySelector(selector);
  for (const kind of ["dragover", "drop"]) {
    zone.dispatchEvent(new DragEvent(kind, {bubbles: true, cancelable: true, dataTransfer: transfer}));
  }
}"""
PASTE = """([b64, name, type]) => {
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], name, {type}));
  document.activeElement.dispatchEvent(new ClipboardEvent("paste",
    {bubbles: true, cancelable: true, clipboardData: transfer}));
}"""
LISTEN = """() => { window.inserted = [];
  document.addEventListener("broadside:insert-image", e => window.inserted.push(e.detail)); }"""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"the page scrolls sideways ({width}px)"


def photograph(page: Page, folder, name: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        no_sideways_scroll(page)
        page.screenshot(path=str(folder / f"media-{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})


def media_named(name: str) -> Media:
    db.session.expire_all()
    return db.session.scalars(select(Media).where(Media.original_name == name)).one()


def test_upload_by_picking_dropping_and_pasting_then_insert_from_the_editor(
        page: Page, app, live_server, owner, screenshot_dir):
    base = live_server.url
    sign_in(page, base)
    page.goto(base + "/media/")
    expect(page.get_by_text("No images yet")).to_be_visible()

    # Picked with the file input, its alt text typed
    page.locator("#media-file").set_input_files(files=[{
        "name": "harbour.jpg", "mimeType": "image/jpeg", "buffer": still("JPEG", 1500, 1000)}])
    page.get_by_label("Alt text", exact=True).fill("The harbour at dawn")
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(page.get_by_text("Uploaded “harbour.jpg”.")).to_be_visible()
    harbour = media_named("harbour.jpg")
    assert (harbour.width, harbour.height, harbour.alt) == (600, 400, "The harbour at dawn")
    expect(page.locator(f"#media-{harbour.id} img")).to_have_js_property("naturalWidth", 600)

    # Dropped on the upload zone
    page.evaluate(DROP, [b64(still("PNG", 800, 300, (10, 160, 90))), "stripes.png", "image/png",
                         "[data-media-drop]"])
    expect(page.get_by_text("Chosen: stripes.png")).to_be_visible()
    expect(page.get_by_label("Alt text", exact=True)).to_be_focused()  # asked next
    page.get_by_label("Alt text", exact=True).fill("Green stripes")
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(page.get_by_text("Uploaded “stripes.png”.")).to_be_visible()
    assert media_named("stripes.png").alt == "Green stripes"

    # Pasted (a screenshot from the clipboard), no alt text: the page says so
    page.get_by_label("Alt text", exact=True).focus()
    page.evaluate(PASTE, [b64(animated_gif(320, 160, 4)), "image.gif", "image/gif"])
    expect(page.get_by_text("Chosen: image.gif")).to_be_visible()
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(page.get_by_text("It has no alt text yet")).to_be_visible()
    assert media_named("image.gif").animated
    expect(page.get_by_text("No alt text", exact=True)).to_have_count(1)

    # Search, and the library at both widths
    page.get_by_label("Search by name or alt text").fill("harbour")
    page.get_by_role("button", name="Search").click()
    expect(page.locator(".media-item")).to_have_count(1)
    page.goto(base + "/media/")
    expect(page.locator(".media-item")).to_have_count(3)
    photograph(page, screenshot_dir, "library")

    # The picker beside the broadcast's body
    weekly = make_list(db.session, 1)
    draft = create_draft(db.session, list_id=weekly.id, subject="November", body="Hello")
    page.goto(f"{base}/broadcasts/{draft.id}/edit")
    page.evaluate(LISTEN)
    page.get_by_role("button", name="Insert image").click()
    dialog = page.get_by_role("dialog", name="Insert an image")
    expect(dialog).to_be_visible()
    expect(dialog.locator(".media-pick")).to_have_count(3)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(screenshot_dir / f"media-picker-{width}.png"))
        box = dialog.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})
    dialog.get_by_label("Search the library").fill("stripes")
    expect(dialog.locator(".media-pick")).to_have_count(1)
    dialog.get_by_role("button", name="stripes.png").click()
    expect(dialog).to_be_hidden()
    expect(page.get_by_role("button", name="Insert image")).to_be_focused()
    stripes = media_named("stripes.png")
    assert page.evaluate("window.inserted") == [{
        "target": "body", "url": f"{app.config['BASE_URL']}/media/{stripes.sha256}.png",
        "alt": "Green stripes", "width": 600, "height": 225}]

    # Uploaded inside the dialog, with its alt text: inserted at once
    page.get_by_role("button", name="Insert image").click()
    dialog.get_by_label("Image").set_input_files(files=[{
        "name": "chart.webp", "mimeType": "image/webp", "buffer": still("WEBP", 500, 250)}])
    dialog.get_by_label("Alt text").fill("Sales by month")
    dialog.get_by_role("button", name="Upload and insert").click()
    expect(dialog).to_be_hidden()
    chart = media_named("chart.webp")
    assert page.evaluate("window.inserted")[1] == {
        "target": "body", "url": f"{app.config['BASE_URL']}/media/{chart.sha256}.webp",
        "alt": "Sales by month", "width": 500, "height": 250}

    # A refusal is said in the dialog, and nothing is inserted
    page.get_by_role("button", name="Insert image").click()
    dialog.get_by_label("Image").set_input_files(files=[{
        "name": "notes.png", "mimeType": "image/png", "buffer": b"just some text, renamed"}])
    dialog.get_by_role("button", name="Upload and insert").click()
    expect(dialog.get_by_role("alert")).to_contain_text("not a PNG, JPEG, GIF or WebP")
    assert len(page.evaluate("window.inserted")) == 2
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()


@pytest.fixture
def cdn(app_config):
    """Emails load images over https only: the library's served from a CDN's https base."""
    app_config["MEDIA_URL"] = "https://cdn.example.com/acme/"


def test_the_send_confirmation_warns_of_images_without_alt_text(
        cdn, page: Page, app, live_server, owner, postal_address, screenshot_dir):
    from broadside.mail import media as library

    described = library.upload(db.session, still("PNG", 900, 300), filename="header.png",
                               alt="The Acme header", design_width=600, uploaded_by=None).media
    bare = library.upload(db.session, still("JPEG", 1200, 800, (30, 90, 30)),
                          filename="team-photo-at-the-summer-party-2026.jpg", alt="",
                          design_width=600, uploaded_by=None).media

    def url(media: Media) -> str:
        return library.url_of(media, base_url=app.config["BASE_URL"],
                              media_url=app.config["MEDIA_URL"])
    weekly = make_list(db.session, 3)
    draft = create_draft(db.session, list_id=weekly.id, subject="Summer",
                         body=f"![The Acme header]({url(described)})\n\nHello!\n\n"
                              f"![]({url(bare)})")
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/send")
    card = page.locator(".confirm-images")
    expect(card.get_by_role("heading")).to_have_text("1 image without alt text")
    expect(card).to_contain_text("team-photo-at-the-summer-party-2026.jpg")
    expect(card).not_to_contain_text("header.png")
    expect(card.get_by_role("link", name="Back to the editor")).to_have_attribute(
        "href", f"/broadcasts/{draft.id}/edit")
    expect(page.get_by_role("button", name="Send now")).to_be_visible()  # a warning, no block
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        no_sideways_scroll(page)
        card.screenshot(path=str(screenshot_dir / f"media-confirm-images-{width}.png"))
