"""The codes on the owner's pages, in Chromium at 1280 and 390 px: the broadcast editor's and
an automation step's "Mint a code per recipient" with its prefix (the preview showing a
sample, never a real code), and a person's page listing their codes with the message, when it
was sent and whether it was redeemed. Screenshots go to test-artifacts/screenshots/codes/."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts import drafts
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.campaigns.codes import redemption
from broadside.core.models import Broadcast, Code, Subscriber
from broadside.core.site_settings import update_settings
from tests.browser.steps import sign_in, table_problems
from tests.helpers import make_list
from webapp import REPO_ROOT
from webapp.extensions import db, get_jobs

pytestmark = pytest.mark.browser
SHOTS = REPO_ROOT / "test-artifacts" / "screenshots" / "codes"


def shoot(page: Page, screenshot_dir: Path, name: str, **options) -> None:
    for folder in (screenshot_dir, SHOTS) if SHOTS.is_dir() else (screenshot_dir,):
        page.screenshot(path=str(folder / name), **options)


def no_sideways_scroll(page: Page) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px"


@pytest.fixture
def settings(app):
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street", time_zone="UTC")


def test_the_editor_mints_codes_with_a_prefix_and_previews_a_sample(
        page: Page, live_server, owner, settings, screenshot_dir):
    draft = drafts.create_draft(db.session, list_id=make_list(db.session, 2, "Spring").id,
                                subject="Spring sale", body="Hi {{ name }}")
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/edit")
    page.get_by_label("Mint a code per recipient").check()
    page.get_by_label("Prefix").fill("spring")
    page.get_by_label("Subject").fill("Your code: {{ code }}")
    expect(page.locator("#preview-subject")).to_have_text("Your code: SPRING-XXXXXXXX (sample code)")
    expect(page.locator("#save-status")).to_contain_text("Saved at")
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).codes_prefix == "SPRING"
    page.reload()
    expect(page.get_by_label("Mint a code per recipient")).to_be_checked()
    expect(page.get_by_label("Prefix")).to_have_value("SPRING")
    page.locator(".codes-field").scroll_into_view_if_needed()
    shoot(page, screenshot_dir, "compose-codes-1280.png")
    # The preview pane by itself (a full-page capture leaves the sandboxed frame blank).
    page.locator(".compose-preview").screenshot(path=str(screenshot_dir / "compose-preview.png"))
    if SHOTS.is_dir():
        page.locator(".compose-preview").screenshot(path=str(SHOTS / "compose-preview-1280.png"))
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    no_sideways_scroll(page)
    page.locator(".codes-field").scroll_into_view_if_needed()
    shoot(page, screenshot_dir, "compose-codes-390.png")

    # Off again, with {{ code }} still in the subject: the editor says why it would not send.
    page.get_by_label("Mint a code per recipient").uncheck()
    expect(page.locator(".compose-preview")).to_contain_text("{{ code }} is filled in only when")


def test_an_automation_step_mints_codes_from_its_editor(page: Page, live_server, owner, settings,
                                                        screenshot_dir):
    weekly = make_list(db.session, 0, "Weekly")
    data = automations.parse_input({"name": "Referrals", "record_only": True,
                                    "trigger": {"type": "joined_list", "list_id": weekly.id},
                                    "steps": [{"delay": "PT0S", "subject": "Invite a friend",
                                               "body": "Your code: {{ code }}"}]})
    with pytest.raises(Exception, match="filled in only when"):
        automations.create_automation(db.session, data, default_from="x@acme.example")
    db.session.rollback()
    data.steps[0].codes_prefix = None
    data.steps[0].body = "Invite a friend."
    automation = automations.create_automation(db.session, data, default_from="x@acme.example")
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/automations/{automation.id}/edit")
    page.get_by_label("Mint a code per recipient").check()
    page.get_by_label("Prefix").fill("ref")
    page.get_by_label("Body").fill("Your code: {{ code }}")
    page.get_by_role("button", name="Save").first.click()
    db.session.expire_all()
    [step] = automations.steps_of(db.session, automation.id)
    assert step.codes_prefix == "REF"
    page.goto(f"{live_server.url}/automations/{automation.id}/edit")
    expect(page.get_by_label("Prefix")).to_have_value("REF")
    page.locator(".codes-field").scroll_into_view_if_needed()
    shoot(page, screenshot_dir, "step-codes-1280.png")
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    no_sideways_scroll(page)
    page.locator(".codes-field").scroll_into_view_if_needed()
    shoot(page, screenshot_dir, "step-codes-390.png")


def test_a_persons_page_lists_their_codes(page: Page, app, live_server, owner, settings,
                                          smtp_server, run_worker_burst, screenshot_dir):
    spring = make_list(db.session, 2, "Spring")
    for subject, prefix in (("Spring sale: 20% off", "SPRING"), ("A thank-you for reading", "THANKS")):
        draft = drafts.create_draft(db.session, list_id=spring.id, subject=subject,
                                    body="Your code: {{ code }}", codes_prefix=prefix)
        send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs())
    run_worker_burst()
    person = db.session.scalars(select(Subscriber).order_by(Subscriber.id)).first()
    theirs = db.session.scalars(select(Code).where(Code.subscriber_id == person.id)
                                .order_by(Code.id)).all()
    assert len(theirs) == 2
    redemption.redeem(db.session, theirs[0].code)

    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/subscribers/{person.id}")
    table = page.locator("#subscriber-codes")
    expect(table).to_contain_text(theirs[0].code)
    expect(table).to_contain_text(theirs[1].code)
    expect(table.get_by_role("row").filter(has_text=theirs[0].code)).to_contain_text("redeemed")
    expect(table.get_by_role("row").filter(has_text=theirs[1].code)).to_contain_text("not yet")
    expect(table).to_contain_text("Spring sale: 20% off")
    page.locator("#codes").scroll_into_view_if_needed()
    shoot(page, screenshot_dir, "person-codes-1280.png")
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    assert table_problems(page, ["#subscriber-codes"]) == []
    page.locator("#codes").scroll_into_view_if_needed()
    shoot(page, screenshot_dir, "person-codes-390.png")
