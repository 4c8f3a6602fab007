"""Through Chromium, in German (the owner's choice): the subscribers table, a subscriber's
page, the import page, the segment builder and People, at 1280 and 390 px. German words are
long: nothing may scroll sideways or leave its box. Screenshots go to the reviewers' folder."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect

from broadside.core.models import MailingList, Owner, Subscriber, Subscription
from broadside.core.timeutil import utcnow
from broadside.segments.service import create_segment
from tests.browser.steps import fits, sign_in
from webapp.extensions import db

pytestmark = pytest.mark.browser

RULES = {"all": [{"field": "attributes.stadt", "op": "equals", "value": "Berlin"},
                 {"field": "joined", "op": "within_days", "value": 30}]}


@pytest.fixture
def audience(app) -> int:
    weekly = MailingList(name="Wöchentlicher Rundbrief für Stammleserinnen und Stammleser")
    db.session.add(weekly)
    db.session.flush()
    first = None
    for i, (email, locale) in enumerate([
            ("maximiliane.schmidt-wöhrmann@beispiel-unternehmen.de", "de"),
            ("jean.dupont@exemple.fr", "fr"), ("ana@ejemplo.es", None)]):
        person = Subscriber(email=email, name=email.split("@")[0].title(), locale=locale,
                            attributes={"stadt": "Berlin"})
        db.session.add(person)
        db.session.flush()
        first = first or person.id
        db.session.add(Subscription(subscriber_id=person.id, list_id=weekly.id, status="active",
                                    created_at=utcnow() - timedelta(days=i)))
    db.session.commit()
    create_segment(db.session, "Berliner Stammleserschaft", RULES)
    return first


def test_the_audience_pages_in_german_fit_a_desktop_and_a_phone(page: Page, live_server, owner,
                                                               audience, screenshot_dir):
    sign_in(page, live_server.url)
    db.session.get(Owner, owner.id).locale = "de"
    db.session.commit()
    segment_id = 1
    pages = {"subscribers": "/subscribers/", "subscriber": f"/subscribers/{audience}",
             "import": "/subscribers/import", "segment": f"/segments/{segment_id}/edit",
             "segments": "/segments/", "people": "/settings/people/"}
    for name, path in pages.items():
        page.goto(live_server.url + path)
        expect(page.locator("html")).to_have_attribute("lang", "de")
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(screenshot_dir / f"audience-de-{name}-{width}.png"),
                            full_page=True)
            fits(page, f"{name} at {width} px")
    page.goto(live_server.url + f"/subscribers/{audience}")
    expect(page.locator("#subscriber-language")).to_contain_text("Deutsch")
