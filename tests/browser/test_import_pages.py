"""The import in Chromium, at a desktop width and on a phone: the form asks how these people
agreed to receive mail and refuses to guess; the report lists each rejected row as uploaded
(awkward ones too) beside its line and reason, the warnings, the skips, and offers the CSV to
fix and upload again. Nothing may scroll sideways and no text may leave its box."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.audience import lists as lists
from broadside.core.models import Subscriber, Subscription
from tests.browser.steps import sign_in
from webapp.extensions import db

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": 1280, "phone": 390}

CSV = (
    "email,name,city,notes\n"
    "ann@example.com,Ann Lee,Paris,\n"
    'not-an-address,"Lee, Bob",Rome,"a note, with a comma"\n'
    "cy@example.com,Cy\n"                                              # missing columns: fine
    "ann@example.com,Ann again,Lyon,\n"                                # duplicate
    "dee@example.com,Dee,Oslo,x,y\n"                                   # extra fields
    "eve@example.com," + "Evangeline " * 22 + ",Bern,\n"               # name shortened
    "left@example.com,Left,Kiel,\n"                                    # unsubscribed: skipped
    "an.address.far.too.long.for.any.phone.screen.to.show.in.one.piece@example,X,Graz,\n"
).encode() + b"fay@example.com,F\xe4y,K\xf6ln,\n"                     # Latin-1, not UTF-8


OVERFLOWING = """() => [...document.querySelectorAll(`main p, main dd, main dt, main li, main td,
  main th, main label, main small, main h1, main h2, main legend, main button, main .button,
  main code`)]
  .filter(e => e.offsetParent !== null && !e.closest('.table-wrap') && e.scrollWidth > e.clientWidth + 1)
  .concat([...document.querySelectorAll('main .table-wrap')].filter(e => e.scrollWidth > e.clientWidth + 1))
  .map(e => e.tagName + ': ' + e.textContent.trim().slice(0, 60))"""


def fits(page: Page, what: str) -> None:
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, \
        f"{what} scrolls sideways"
    assert page.evaluate(OVERFLOWING) == [], f"{what}: text out of its box"


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_import_form_and_its_report_fit_a_desktop_and_a_phone(
        page: Page, live_server, owner, size, screenshot_dir, tmp_path):
    weekly = lists.create_list(db.session, "Monthly news")
    left = Subscriber(email="left@example.com", name="Left", attributes={})
    db.session.add(left)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=left.id, list_id=weekly.id, status="unsubscribed"))
    db.session.commit()
    upload = tmp_path / "people.csv"
    upload.write_bytes(CSV)

    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/subscribers/import?list={weekly.id}")
    choice = page.get_by_role("group", name="How did these people agree to receive mail?")
    expect(choice.get_by_role("radio", name="They already opted in")).not_to_be_checked()
    expect(choice.get_by_role("radio", name="Ask them to confirm")).not_to_be_checked()
    fits(page, "the import form")
    page.screenshot(path=str(screenshot_dir / f"import-form-{size}.png"), full_page=True)

    # No choice: refused, with the message beside the question, the list kept.
    page.get_by_label("CSV file").set_input_files(str(upload))
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_text("Choose how these people agreed to receive mail")).to_be_visible()
    expect(page.get_by_label("Into list")).to_have_value(str(weekly.id))
    fits(page, "the import form with its error")
    page.screenshot(path=str(screenshot_dir / f"import-form-no-choice-{size}.png"), full_page=True)

    page.get_by_label("CSV file").set_input_files(str(upload))
    page.get_by_role("radio", name="They already opted in").check()
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_text("The import is finished.")).to_be_visible()
    counts = page.locator("#import-counts")
    for figure in ("3 imported", "0 updated", "1 skipped", "5 rejected", "1 warning"):
        expect(counts).to_contain_text(figure)
    expect(page.get_by_text("1 skipped because they unsubscribed from this list")).to_be_visible()

    rejected = page.locator("#rejections table")
    expect(rejected.locator("tbody tr")).to_have_count(5)
    expect(page.get_by_role("heading", name="Rejected rows (5)")).to_be_visible()
    row = rejected.locator("tr", has_text="'not-an-address'")
    expect(row).to_contain_text("Lee, Bob")                          # a quoted comma, one cell
    expect(row).to_contain_text("a note, with a comma")
    expect(rejected.locator("tr", has_text="duplicate of line 2")).to_contain_text("Ann again")
    expect(rejected.locator("tr", has_text="not valid UTF-8")).to_contain_text("F\ufffdy")
    expect(rejected.locator("tr", has_text="5 fields")).to_contain_text("extra: y")
    expect(page.locator("#warnings")).to_contain_text(
        "line 7: name shortened to 200 characters (it had 241)")
    fits(page, "the import report")
    page.screenshot(path=str(screenshot_dir / f"import-report-{size}.png"), full_page=True)

    link = page.get_by_role("link", name="Download the rejected rows (CSV)")
    download = page.request.get(live_server.url + link.get_attribute("href"))
    lines = download.text().splitlines()
    assert lines[0] == "rejected_line,rejected_reason,email,name,city,notes"
    assert lines[1].endswith(',not-an-address,"Lee, Bob",Rome,"a note, with a comma"')


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize("size", list(WIDTHS))
def test_a_running_import_shows_its_exact_total(page: Page, live_server, owner, size,
                                                screenshot_dir):
    """A million-row import half way: the rows read of the file's counted rows, a bar at the
    exact share (the worker counted the file before writing; nothing estimated)."""
    from broadside.core.models import Import

    weekly = lists.create_list(db.session, "Monthly news")
    record = Import(list_id=weekly.id, filename="everyone-we-ever-met.csv", status="running",
                    size_bytes=61_000_000, consent="opted_in", total_rows=1_000_000,
                    processed_rows=420_000, imported=415_000, updated=3_000,
                    skipped_suppressed=1_200, rejected=800,
                    header={"delimiter": ",", "columns": ["email", "name"]})
    db.session.add(record)
    db.session.commit()
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/subscribers/imports/{record.id}")
    expect(page.get_by_text("420,000 of 1,000,000 rows read.")).to_be_visible()
    expect(page.get_by_role("progressbar", name="Import progress")).to_have_attribute("value", "42")
    fits(page, "a running import")
    page.screenshot(path=str(screenshot_dir / f"import-running-{size}.png"), full_page=True)


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_welcome_box_says_before_the_upload_and_after_whether_anyone_is_welcomed(
        page: Page, live_server, owner, app, size, screenshot_dir, tmp_path, postal_address):
    from broadside.campaigns.automations import service as automations

    bare = lists.create_list(db.session, "Product announcements").id
    greeted = lists.create_list(db.session, "Monthly news").id
    data = automations.parse_input({
        "name": "Hello and welcome", "trigger": {"type": "joined_list", "list_id": greeted},
        "steps": [{"delay": "PT0S", "subject": "Hi", "body": "Welcome."}]})
    automations.enable(db.session, automations.create_automation(
        db.session, data, default_from=app.config["MAIL_FROM"]).id)
    upload = tmp_path / "people.csv"
    upload.write_bytes(b"email,name\nann@example.com,Ann\n\nbob@example.com,Bob\n,\n")

    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/subscribers/import?list={greeted}")
    hint = page.locator("#welcome-hint")
    expect(hint).to_have_text("Welcome series on this list: Hello and welcome.")
    # Another list: the line is asked again, before anything is uploaded.
    page.get_by_label("Into list").select_option(str(bare))
    expect(page.locator("#welcome-hint")).to_contain_text(
        "No enabled welcome automation on this list: nobody would get one.")
    page.get_by_role("checkbox", name="Send the welcome series").check()
    fits(page, "the import form with no welcome series")
    page.screenshot(path=str(screenshot_dir / f"import-form-no-welcome-{size}.png"),
                    full_page=True)

    page.get_by_label("CSV file").set_input_files(str(upload))
    page.get_by_role("radio", name="They already opted in").check()
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_text("The import is finished.")).to_be_visible()
    expect(page.locator("#welcome-outcome")).to_have_text(
        "Nobody got the welcome series you asked for: this list had no enabled welcome "
        "automation when the import ran.")
    expect(page.locator("#empty-rows")).to_have_text("2 empty rows were skipped (lines 3, 5).")
    fits(page, "the import result with nobody welcomed")
    page.screenshot(path=str(screenshot_dir / f"import-result-no-welcome-{size}.png"),
                    full_page=True)
