"""Steps the browser tests share (import from here, never from a test module)."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.helpers import OWNER_EMAIL, OWNER_PASSWORD


def sign_in(page: Page, base_url: str) -> None:
    """Sign in as the owner through the real form and land on the dashboard."""
    page.goto(base_url + "/login")
    page.get_by_label("Email").fill(OWNER_EMAIL)
    page.get_by_label("Password").fill(OWNER_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
