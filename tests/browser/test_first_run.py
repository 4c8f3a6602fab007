import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser


def test_first_run_setup_logout_login(page: Page, live_server, screenshot_dir):
    page.goto(live_server.url + "/")
    expect(page).to_have_url(live_server.url + "/setup")
    page.get_by_label("Email").fill("owner@example.com")
    page.get_by_label("Password", exact=True).fill("a long password")
    page.get_by_label("Repeat password").fill("a long password")
    page.get_by_role("button", name="Create owner account").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "dashboard.png"), full_page=True)

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in to Broadside")).to_be_visible()
    assert page.goto(live_server.url + "/setup").status == 404

    page.goto(live_server.url + "/")
    page.get_by_label("Email").fill("owner@example.com")
    page.get_by_label("Password").fill("wrong password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("That email and password do not match.")).to_be_visible()
    page.get_by_label("Password").fill("a long password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
