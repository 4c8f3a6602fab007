"""What a subscriber's browser loads around a public page: the favicon (at /favicon.ico too, where
browsers look for it when a page names none) and the owner's design font, and none of it sets a
cookie."""

from __future__ import annotations

from broadside.audience import lists
from broadside.mail import design
from tests.helpers import make_token
from tests.webapp.test_design import save_look
from tests.webapp.test_unsubscribe import add_list, add_subscriber
from webapp.extensions import db


def test_favicon_ico_is_the_icon_and_sets_no_cookie(client):
    answer = client.get("/favicon.ico")
    assert answer.status_code == 200
    assert answer.mimetype == "image/vnd.microsoft.icon"
    assert answer.data[:4] == b"\0\0\1\0"  # an ICO file's header: reserved 0, type 1 (icon)
    assert answer.data.count(b"\x89PNG") == 3  # drawn at 16, 32 and 48 pixels
    assert "Set-Cookie" not in answer.headers
    assert answer.cache_control.public and answer.cache_control.max_age


def test_a_subscribers_page_links_a_served_favicon_and_sets_no_cookie(client):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    page = client.get(f"/u/{make_token(alice, weekly)}")
    assert page.status_code == 200 and "Set-Cookie" not in page.headers
    assert 'href="data:,"' not in page.text
    assert '<link rel="icon" href="/favicon.ico" sizes="32x32">' in page.text
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page.text
    for icon in ("/favicon.ico", "/static/favicon.svg"):
        answer = client.get(icon)
        answer.close()  # a static file is streamed from its open file
        assert answer.status_code == 200 and "Set-Cookie" not in answer.headers


def test_the_public_pages_take_the_design_font(logged_in_client, client):
    save_look(logged_in_client, colour="#aa3300", font="mono")
    weekly = lists.create_list(db.session, "Rocket News", signup_enabled=True).id

    page = client.get(f"/join/{weekly}")
    assert "/brand/theme/aa3300.css?font=mono" in page.text
    theme = client.get("/brand/theme/aa3300.css?font=mono")
    assert f"--font: {design.FONTS['mono'][1]};" in theme.text
    assert "Set-Cookie" not in theme.headers

    assert client.get("/brand/theme/aa3300.css?font=comic-sans").status_code == 404
    assert "--font" not in client.get("/brand/theme/aa3300.css").text  # a page cached before: its colour only
