"""The System page's "backups" line, once BACKUP_DIR is set: when the last backup was taken,
and a warning when none is newer than BACKUP_MAX_AGE_HOURS; at a desktop width and on a phone,
nothing scrolls sideways and no text leaves its box."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.steps import sign_in
from tests.browser.test_identities_pages import WIDTHS, fits
from webapp import REPO_ROOT

pytestmark = pytest.mark.browser
SHOTS = REPO_ROOT / "test-artifacts" / "screenshots" / "backup"


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_system_page_says_when_the_last_backup_was_taken(page: Page, app, live_server, owner,
                                                             size, tmp_path):
    folder = tmp_path / "backups"
    app.config["BACKUP_DIR"] = str(folder)
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/system/")
    warning = page.locator('[data-check="backups"]')
    expect(warning).to_contain_text(f"no backup in {folder} yet")
    expect(warning).to_have_class("check check-warn")  # "!", as `doctor` prints it
    expect(warning.locator(".mark")).to_have_text("!")
    fits(page, f"the System page at {size} before any backup")  # a long folder path wraps
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"system-no-backup-{size}.png"), full_page=True)
    result = app.test_cli_runner().invoke(args=["backup", str(folder / "nightly-2026-12-06.tar.gz")])
    assert result.exit_code == 0, result.output
    page.reload()
    line = page.locator('[data-check="backups"]')
    expect(line).to_have_class("check check-ok")
    expect(line).to_contain_text("nightly-2026-12-06.tar.gz")
    expect(line).to_contain_text("without secrets")
    fits(page, f"the System page at {size}")
    page.screenshot(path=str(SHOTS / f"system-backups-{size}.png"), full_page=True)
