"""The main pages as a viewer and as a writer see them, in Chromium at 1280 px and at 390 px.

A viewer reads the dashboard, a broadcast and Settings with no control that changes anything
(no form that posts, no htmx request that changes, no link to a change page, no button but
a search's or a disclosure's),
and the pages still fit a phone. A writer's draft is an editor with a Save and a test send to
their own address only, and no Send. Each page is photographed at both widths for review
(test-artifacts/screenshots/roles-*.png).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.steps import fits
from tests.helpers import OWNER_PASSWORD
from tests.installation import seed_installation

pytestmark = pytest.mark.browser

WIDTHS = (1280, 390)
# Anything in the page's main part that would change something (the header's sign-out aside).
CHANGES = ("main form[method=post i], main [hx-post], main [hx-put], main [hx-patch], "
           "main [hx-delete], main a[href$='/send'], main a[href*='/new'], "
           "main a[href$='/delete'], main a[href*='/import']")

# One's own account is everyone's (`self`): a viewer makes their own (read-only) API token.
OWN = "/settings/tokens"
# The visible buttons of the main part that would submit anything but a search (a GET form)
# or one's own token.
PRESSABLE = """() => [...document.querySelectorAll('main button')]
  .filter(b => b.checkVisibility() && b.type !== 'button'
    && !(b.form && (b.form.getAttribute('method') || 'get').toLowerCase() === 'get')
    && !(b.form && b.form.getAttribute('action') === '/settings/tokens'))
  .map(b => b.textContent.trim())"""



def changing_controls(page: Page) -> list[str]:
    """What the page's main part offers that would change something."""
    found = page.locator(CHANGES)
    shown = [found.nth(i).evaluate("e => e.outerHTML.slice(0, 120)") for i in range(found.count())]
    return [html for html in shown if f'action="{OWN}"' not in html] + page.evaluate(PRESSABLE)


def sign_in_as(page: Page, base_url: str, email: str) -> None:
    page.goto(base_url + "/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(OWNER_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()


def pages(seed: dict[str, int]) -> dict[str, str]:
    return {"dashboard": "/", "broadcast-draft": f"/broadcasts/{seed['draft']}",
            "broadcast-sent": f"/broadcasts/{seed['sent']}", "broadcasts": "/broadcasts/",
            "settings": "/settings/", "subscribers": "/subscribers/", "automations": "/automations/",
            "subscriber": f"/subscribers/{seed['subscriber_id']}", "list": f"/lists/{seed['list_id']}"}


def look(page: Page, base_url: str, role: str, name: str, path: str, screenshot_dir) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(base_url + path)
        page.wait_for_load_state("networkidle")
        fits(page, f"{role}'s {name} at {width} px")
        page.screenshot(path=str(screenshot_dir / f"roles-{role}-{name}-{width}.png"), full_page=True)


@pytest.fixture
def installation(app, run_worker_burst) -> dict[str, int]:
    return seed_installation(app, run_worker_burst)


def test_a_viewer_sees_no_button_that_changes_anything_and_the_pages_fit_a_phone(
    page: Page, live_server, installation, make_person, screenshot_dir
):
    viewer = make_person("viewer", "viewer@example.com")
    sign_in_as(page, live_server.url, viewer.email)
    for name, path in pages(installation).items():
        look(page, live_server.url, "viewer", name, path, screenshot_dir)
        assert changing_controls(page) == [], f"the viewer's {name} offers a change"
    # What a viewer reads instead: the sender's values as text, and who changes them.
    page.goto(live_server.url + "/settings/")
    expect(page.locator("#only-managers")).to_have_text("Only owners and admins change these settings.")
    expect(page.locator("#sender-values")).to_contain_text("Acme Weekly")
    page.goto(live_server.url + f"/broadcasts/{installation['draft']}")
    expect(page.get_by_label("Subject")).to_be_disabled()
    expect(page.locator("#only-writers")).to_be_visible()


def test_a_writer_edits_a_draft_tests_to_their_own_address_and_cannot_send(
    page: Page, live_server, installation, make_person, screenshot_dir
):
    writer = make_person("writer", "writer@example.com")
    sign_in_as(page, live_server.url, writer.email)
    for name, path in pages(installation).items():
        look(page, live_server.url, "writer", name, path, screenshot_dir)
    page.goto(live_server.url + f"/broadcasts/{installation['draft']}")
    expect(page.get_by_role("button", name="Save draft")).to_be_visible()
    to = page.get_by_label("Send a test to")
    expect(to).to_have_value(writer.email)
    expect(to).not_to_be_editable()
    expect(page.locator("#send-link")).to_have_count(0)
    expect(page.get_by_text("Only owners, admins and senders send or schedule a broadcast.")).to_be_visible()
    # An automation that is on opens read-only, saying who turns it off; one that is off saves.
    page.goto(live_server.url + f"/automations/{installation['automation_on']}/edit")
    expect(page.locator("#live-read-only")).to_be_visible()
    expect(page.get_by_role("button", name="Save", exact=True)).to_have_count(0)
    page.goto(live_server.url + f"/automations/{installation['automation_off']}/edit")
    expect(page.get_by_role("button", name="Save", exact=True)).to_be_visible()
