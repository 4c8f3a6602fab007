"""The owner's pages in German (long words) at 1280 and 390 px: nothing scrolls sideways, no
text leaves its box, and on a phone the navigation still fits once its menu is opened. The
dashboard, System, Media, Templates, a transactional template, a broadcast's analytics and the
404 page; photographed under test-artifacts/screenshots (BROADSIDE_SHOTS names another
folder)."""

from __future__ import annotations

import os
from pathlib import Path

from playwright.sync_api import Page, expect

from broadside.campaigns.content import blocks
from tests.browser.steps import sign_in
from tests.browser.test_every_page import LAYOUT_PROBLEMS
from tests.webapp.test_analytics_rates import sent_with
from webapp.extensions import db

WIDTHS = (1280, 390)
NAVIGATION_FITS = """() => {
  const problems = [];
  for (const a of document.querySelectorAll('.nav-menu[open] nav a, .nav-menu[open] nav button')) {
    const box = a.getBoundingClientRect();
    if (box.right > innerWidth + 1 || box.left < -1) problems.push('off the screen: ' + a.textContent.trim());
    if (a.scrollWidth > a.clientWidth + 1) problems.push('text out of its box: ' + a.textContent.trim());
  }
  return problems;
}"""


def look(page: Page, folder: Path, name: str, *, menu: bool = False) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_load_state("networkidle")
        problems = page.evaluate(LAYOUT_PROBLEMS)
        assert not problems, (name, width, problems)
        page.screenshot(path=str(folder / f"de-{name}-{width}.png"), full_page=True)
        if menu and width < 600:
            page.locator(".nav-menu summary").click()
            expect(page.locator(".nav-menu nav").get_by_role("link", name="Zustellbarkeit")).to_be_visible()
            assert not page.evaluate(NAVIGATION_FITS)
            assert not page.evaluate(LAYOUT_PROBLEMS)
            page.screenshot(path=str(folder / f"de-{name}-menu-{width}.png"), full_page=False)
            page.locator(".nav-menu summary").click()


def test_the_owners_pages_in_german_at_desktop_and_phone_widths(
        page: Page, app, live_server, owner, screenshot_dir):
    folder = Path(os.environ.get("BROADSIDE_SHOTS") or screenshot_dir)
    folder.mkdir(parents=True, exist_ok=True)
    broadcast_id = sent_with(app, "aggregate", sent=3, days=[
        {"opens": 2, "clicks": 1, "bot_opens": 1, "bot_clicks": 1}, {"opens": 1}, {"clicks": 1}])
    blocks.create_block(db.session, name="Grußformel", body="Herzliche Grüße")
    sign_in(page, live_server.url)
    page.set_extra_http_headers({"Accept-Language": "de-DE,de;q=0.9"})
    base = live_server.url

    page.goto(base + "/")
    expect(page.get_by_role("heading", name="Übersicht", exact=True)).to_be_visible()
    expect(page.locator("#sending-banner")).to_contain_text("Der Versand steht still")
    look(page, folder, "dashboard", menu=True)

    page.goto(base + "/system/")
    expect(page.get_by_role("heading", name="System", exact=True)).to_be_visible()
    look(page, folder, "system")

    page.goto(base + "/media/")
    expect(page.get_by_role("heading", name="Ein Bild hochladen")).to_be_visible()
    look(page, folder, "media")

    page.goto(base + "/templates/")
    expect(page.get_by_role("heading", name="Newsletter mit Abschnitten")).to_be_visible()
    look(page, folder, "templates")

    page.goto(base + "/settings/transactional/new")
    page.get_by_label("Name", exact=True).fill("Passwort zurücksetzen")
    page.get_by_label("Betreff").fill("Ihr neues Passwort, {{ name }}")
    page.locator("#body").fill("Hallo {{ name }},\n\nIhr Link: {{ data.link }}")
    page.get_by_role("button", name="Vorlage speichern").click()
    expect(page.get_by_role("heading", name="Vorschau und Test")).to_be_visible()
    look(page, folder, "transactional")

    page.goto(base + f"/broadcasts/{broadcast_id}#analytics")
    expect(page.get_by_role("heading", name="Öffnungen und Klicks")).to_be_visible()
    page.locator("#analytics").scroll_into_view_if_needed()
    look(page, folder, "analytics")

    page.goto(base + "/gibt-es-nicht")
    expect(page.get_by_role("heading", name="Nicht gefunden")).to_be_visible()
    look(page, folder, "404")


def test_french_fits_too(page: Page, app, live_server, owner, screenshot_dir):
    """French is long as well (and writes a space before : and ;)."""
    folder = Path(os.environ.get("BROADSIDE_SHOTS") or screenshot_dir)
    broadcast_id = sent_with(app, "aggregate", sent=3, days=[{"opens": 2, "clicks": 1}])
    sign_in(page, live_server.url)
    page.set_extra_http_headers({"Accept-Language": "fr"})
    for name, path, heading in (("dashboard", "/", "Tableau de bord"),
                                ("system", "/system/", "Système"),
                                ("media", "/media/", "Médias"),
                                ("templates", "/templates/", "Modèles"),
                                ("analytics", f"/broadcasts/{broadcast_id}", "Ouvertures et clics")):
        page.goto(live_server.url + path)
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            assert not page.evaluate(LAYOUT_PROBLEMS), (name, width)
            page.screenshot(path=str(folder / f"fr-{name}-{width}.png"), full_page=True)
