"""The A/B test in Chromium at 1280 and 390 px: the editor's section (hidden until its box is
ticked, saved with the draft, refused at its field), the send page's plan, and a decided
test's result drawn as bars with whiskers, none of them scrolling sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from broadside.campaigns.broadcasts import ab_tests, drafts
from broadside.core.models import Broadcast, Delivery, PersonActivity, Subscriber
from broadside.core.timeutil import utcnow
from tests.browser.steps import sign_in
from tests.helpers import make_list
from webapp import REPO_ROOT
from webapp.extensions import db

pytestmark = pytest.mark.browser

WIDTHS = (1280, 390)
SHOTS = REPO_ROOT / "test-artifacts" / "screenshots" / "abtest"


def photograph(page: Page, name: str, card: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        scroll = page.evaluate("document.documentElement.scrollWidth")
        assert scroll <= width, f"{name} scrolls sideways at {width}px ({scroll}px)"
        page.locator(card).screenshot(path=str(SHOTS / f"ab-{name}-{width}.png"))
    page.set_viewport_size({"width": 1280, "height": 900})


@pytest.fixture
def draft(app) -> Broadcast:
    readers = make_list(db.session, 60, name="Readers")
    readers.per_person_tracking = True
    broadcast = drafts.create_draft(db.session, list_id=readers.id,
                                    subject="Our autumn news from the workshop",
                                    body="# Autumn\n\nHello {{ name }}!")
    broadcast.tracking = "per_person"
    db.session.commit()
    return broadcast


def test_the_owner_sets_up_a_test_and_reads_its_result(page: Page, live_server, owner, draft):
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/edit")
    section = page.locator("#ab-test")
    expect(section).to_be_visible()
    expect(page.locator("#ab-fields")).to_be_hidden()
    page.locator("#ab-on").check()
    expect(page.locator("#ab-fields")).to_be_visible()
    expect(page.locator("#ab-0-subject")).to_have_text("Our autumn news from the workshop")
    page.locator("#ab-1-subject").fill("Autumn is here: five new things in the workshop")
    page.locator("#ab-2").locator("summary").click()
    page.locator("#ab-2-subject").fill("Read this before the first frost")
    page.locator("#ab-2-body").fill("# Frost\n\nA different story.")
    page.locator("#ab-share").fill("30")
    page.locator("#ab-measure-clicks").check()
    page.locator("#ab-wait").fill("6")
    page.locator("#ab-default").select_option("1")
    page.get_by_role("button", name="Save draft").click()
    expect(page.locator(".flash-success")).to_be_visible()
    expect(page.locator("#ab-on")).to_be_checked()
    expect(page.locator("#ab-1-subject")).to_have_value("Autumn is here: five new things in the workshop")
    expect(page.locator("#ab-measure-clicks")).to_be_checked()
    db.session.expire_all()
    saved = db.session.get(Broadcast, draft.id).ab_test
    assert saved["share"] == 30 and saved["default"] == 1 and len(saved["variants"]) == 3
    photograph(page, "editor", "#ab-test")
    # A test copy of any variant: the editor's test form offers each by its letter and subject.
    expect(page.locator("#test_variant option")).to_have_count(3)
    expect(page.locator("#test_variant")).to_contain_text("Variant C: Read this before the first frost")
    page.locator("#test_variant").select_option("C")
    photograph(page, "test-copy", "form.test-send")

    # A share out of range: said at its field, nothing saved.
    page.locator("#ab-share").fill("80")
    page.get_by_role("button", name="Save draft").click()
    expect(page.locator("#ab-share-error")).to_contain_text("from 5 to 50")
    expect(page.locator("#ab-share")).to_have_attribute("aria-invalid", "true")
    photograph(page, "editor-refused", "#ab-test")
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).ab_test["share"] == 30

    page.goto(f"{live_server.url}/broadcasts/{draft.id}/send")
    expect(page.locator("#ab-split")).to_contain_text("About 18 readers (30 % of the audience)")
    photograph(page, "send-plan", "#ab-plan")

    decide(draft.id, [3, 14, 5])
    page.goto(f"{live_server.url}/broadcasts/{draft.id}")
    result = page.locator("#ab-result")
    expect(result).to_be_visible()
    expect(page.locator("#ab-phase")).to_contain_text("variant B went to the rest")
    expect(page.locator("#ab-verdict")).to_contain_text("clearly the highest")
    # Each bar is drawn: its whiskers sit inside the track, around the rate.
    for letter in "ABC":
        box = page.locator(f"#ab-variant-{letter} svg.ab-chart").bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 10
    photograph(page, "result", "#ab-result")

    # Where a test is not possible, the reason stands instead of the fields.
    other = drafts.create_draft(db.session, list_id=draft.list_id, subject="In two languages",
                                body="Hello", versions=[{"locale": "de", "subject": "Hallo",
                                                         "body": "Hallo"}])
    page.goto(f"{live_server.url}/broadcasts/{other.id}/edit")
    expect(page.locator("#ab-refusal")).to_contain_text("versions in other languages")
    expect(page.locator("#ab-on")).to_have_count(0)
    photograph(page, "editor-not-possible", "#ab-test")


def decide(broadcast_id: int, hits: list[int], sent: int = 6) -> None:
    """The worker's writes: the split, the test's copies sent and clicked, the decision."""
    broadcast = db.session.get(Broadcast, broadcast_id)
    people = db.session.scalars(select(Subscriber.id).order_by(Subscriber.id)).all()
    rows = [Delivery(broadcast_id=broadcast_id, subscriber_id=person, list_id=broadcast.list_id,
                     variant=n // sent if n < sent * len(hits) else ab_tests.REST,
                     status="sent" if n < sent * len(hits) else "pending")
            for n, person in enumerate(people)]
    db.session.add_all(rows)
    db.session.flush()
    sent_counts = [sent * 5] * len(hits)  # the figures the decision was made on
    for variant, count in enumerate(hits):
        for row in [r for r in rows if r.variant == variant][:min(count, sent)]:
            db.session.add(PersonActivity(broadcast_id=broadcast_id, delivery_id=row.id,
                                          kind="click", position=0))
    figures = [ab_tests.VariantFigures(n, sent_counts[n], h) for n, h in enumerate(hits)]
    verdict = ab_tests.judge(figures, 1)
    broadcast.status, broadcast.ab_seed = "sent", 99
    broadcast.ab_winner, broadcast.ab_decided_at = verdict.winner, utcnow()
    broadcast.ab_result = ab_tests.result_record(figures, verdict, "clicks")
    db.session.commit()
