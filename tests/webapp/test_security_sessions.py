"""Sessions you can end, on SQLite and PostgreSQL: Settings -> Security lists your own
sessions (the browser in words, the network it signed in from, this browser marked); ending
one, or all others, signs those browsers out at once (their cookie stops working); the idle
limit is Settings'; a new password or a change of two-factor ends the others and keeps this
browser signed in."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from broadside.core import browser_words, owner_sessions
from broadside.core.models import OwnerSession, SiteSettings
from broadside.core.timeutil import utcnow
from tests.helpers import OWNER_EMAIL, OWNER_PASSWORD
from tests.webapp.two_factor_steps import (
    CHROME_ANDROID,
    FIREFOX_LINUX,
    SAFARI_IPHONE,
    code_step,
    enrol,
    get,
    password_step,
    post,
    signed_in,
)
from webapp.extensions import db

NEW_PASSWORD = "a brand new passphrase"


def browser_from(app, user_agent: str, address: str):
    client = app.test_client()
    client.environ_base.update({"HTTP_USER_AGENT": user_agent, "REMOTE_ADDR": address})
    assert password_step(client, OWNER_EMAIL).status_code == 302
    return client


def end_buttons(page: str) -> list[str]:
    return re.findall(r'action="/settings/security/sessions/([0-9a-f]+)/end"', page)


@pytest.mark.parametrize(("agent", "words"), [
    (FIREFOX_LINUX, "Firefox on Linux"),
    (CHROME_ANDROID, "Chrome on Android"),
    (SAFARI_IPHONE, "Safari on iPhone"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) "
     "Version/17.5 Safari/605.1.15", "Safari on macOS"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0", "Edge on Windows"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like "
     "Gecko) CriOS/126.0 Mobile/15E148 Safari/604.1", "Chrome on iPhone"),
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 "
     "Safari/537.36 OPR/111.0", "Opera on Linux"),
    ("curl/8.5.0", "Unknown browser"),
    ("", "Unknown browser"),
])
def test_a_user_agent_in_words(agent, words):
    assert browser_words.describe(agent) == words


@pytest.mark.parametrize(("address", "network"), [
    ("203.0.113.77", "203.0.113.0/24"), ("2001:db8:abcd:12::1", "2001:db8:abcd::/48"),
    ("::ffff:198.51.100.9", "198.51.100.0/24"), ("fe80::1%eth0", "fe80::/48"),
    ("", ""), ("not an address", ""), (None, ""),
])
def test_a_network_not_an_address(address, network):
    assert owner_sessions.network_of(address) == network


def test_sessions_are_listed_with_browser_words_and_network(app, owner, make_person):
    laptop = browser_from(app, FIREFOX_LINUX, "203.0.113.77")
    browser_from(app, CHROME_ANDROID, "2001:db8:abcd:12::1")
    somebody = make_person("viewer", "viewer@example.com")
    other = app.test_client()
    password_step(other, somebody.email)
    page = get(laptop, "/settings/security/").text
    assert "Firefox on Linux" in page and "Chrome on Android" in page
    assert "203.0.113.0/24" in page and "2001:db8:abcd::/48" in page
    assert "203.0.113.77" not in page
    assert "a network, not a location" in page
    assert page.count("this browser") == 1 and page.index("Firefox on Linux") < page.index(
        "Chrome on Android")  # this browser first
    assert len(end_buttons(page)) == 1  # the other one; never this browser's, never another's
    hashes = db.session.scalars(select(OwnerSession.token_hash)).all()
    assert not any(h in page for h in hashes)  # the key is not the token's hash


def test_ending_one_session_signs_that_browser_out(app, owner):
    laptop = browser_from(app, FIREFOX_LINUX, "203.0.113.77")
    phone = browser_from(app, CHROME_ANDROID, "198.51.100.2")
    tablet = browser_from(app, SAFARI_IPHONE, "198.51.100.3")
    page = get(laptop, "/settings/security/").text
    phone_key = next(k for k in end_buttons(page)
                     if page.index(k) > page.index("Chrome on Android") > page.index(k) - 2000)
    ended = post(laptop, f"/settings/security/sessions/{phone_key}/end", {},
                 page="/settings/security/")
    assert ended.status_code == 303
    assert not signed_in(phone)
    assert signed_in(laptop) and signed_in(tablet)
    again = post(laptop, f"/settings/security/sessions/{phone_key}/end", {},
                 page="/settings/security/")
    assert again.status_code == 303
    assert "already ended" in get(laptop, again.location).text
    for key in ("zz" * 8, "0" * 64, "x"):
        assert post(laptop, f"/settings/security/sessions/{key}/end", {},
                    page="/settings/security/").status_code == 303
    assert signed_in(laptop) and signed_in(tablet)


def test_someone_elses_session_cannot_be_ended(app, owner, make_person):
    viewer = make_person("viewer", "viewer@example.com")
    theirs = app.test_client()
    password_step(theirs, viewer.email)
    mine = browser_from(app, FIREFOX_LINUX, "203.0.113.77")
    their_key = db.session.scalar(select(OwnerSession.token_hash).where(
        OwnerSession.owner_id == viewer.id))[:16]
    post(mine, f"/settings/security/sessions/{their_key}/end", {}, page="/settings/security/")
    assert signed_in(theirs)


def test_ending_all_others_keeps_this_browser(app, owner):
    laptop = browser_from(app, FIREFOX_LINUX, "203.0.113.77")
    others = [browser_from(app, CHROME_ANDROID, "198.51.100.2"),
              browser_from(app, SAFARI_IPHONE, "198.51.100.3")]
    answer = post(laptop, "/settings/security/sessions/end-others", {},
                  page="/settings/security/")
    assert answer.status_code == 303
    assert signed_in(laptop)
    assert not any(signed_in(other) for other in others)
    page = get(laptop, "/settings/security/").text
    assert end_buttons(page) == [] and "End all other sessions" not in page


def test_the_idle_limit_is_settings(app, owner):
    laptop = browser_from(app, FIREFOX_LINUX, "203.0.113.77")
    answer = post(laptop, "/settings/security/policy", {"idle_hours": "1"},
                  page="/settings/security/")
    assert answer.status_code == 303
    assert db.session.get(SiteSettings, 1).session_idle_hours == 1
    db.session.execute(update(OwnerSession).values(last_seen_at=utcnow() - timedelta(minutes=50)))
    db.session.commit()
    assert signed_in(laptop)
    db.session.execute(update(OwnerSession).values(last_seen_at=utcnow() - timedelta(minutes=61)))
    db.session.commit()
    assert not signed_in(laptop)


def test_the_cookie_outlives_the_longest_idle_limit(app):
    assert app.permanent_session_lifetime >= timedelta(days=90)


def test_a_new_password_ends_the_others_and_keeps_this_browser(app, owner):
    laptop = browser_from(app, FIREFOX_LINUX, "203.0.113.77")
    phone = browser_from(app, CHROME_ANDROID, "198.51.100.2")
    wrong = post(laptop, "/settings/security/password",
                 {"current_password": "not my password", "password": NEW_PASSWORD,
                  "confirm": NEW_PASSWORD}, page="/settings/security/")
    assert wrong.status_code == 422 and "That is not your current password." in wrong.text
    differ = post(laptop, "/settings/security/password",
                  {"current_password": OWNER_PASSWORD, "password": NEW_PASSWORD,
                   "confirm": NEW_PASSWORD + "!"}, page="/settings/security/")
    assert differ.status_code == 422 and "The passwords differ." in differ.text
    assert signed_in(phone)
    changed = post(laptop, "/settings/security/password",
                   {"current_password": OWNER_PASSWORD, "password": NEW_PASSWORD,
                    "confirm": NEW_PASSWORD}, page="/settings/security/")
    assert changed.status_code == 303
    assert signed_in(laptop) and not signed_in(phone)
    assert db.session.scalar(select(OwnerSession.network)) == "203.0.113.0/24"
    assert password_step(app.test_client(), OWNER_EMAIL, password=NEW_PASSWORD).status_code == 302


def test_a_change_of_two_factor_ends_the_others(app, owner):
    laptop = browser_from(app, FIREFOX_LINUX, "203.0.113.77")
    phone = browser_from(app, CHROME_ANDROID, "198.51.100.2")
    _, codes = enrol(laptop)
    assert signed_in(laptop) and not signed_in(phone)

    def phone_signs_in(recovery_code: str):
        client = app.test_client()
        client.environ_base.update({"HTTP_USER_AGENT": CHROME_ANDROID})
        assert password_step(client, OWNER_EMAIL).location == "/login/two-factor"
        assert code_step(client, recovery_code).status_code == 302
        assert signed_in(client)
        return client

    phone = phone_signs_in(codes[0])
    new_codes = post(laptop, "/settings/security/two-factor/recovery-codes/new", {},
                     page="/settings/security/")
    assert new_codes.status_code == 303
    fresh = re.findall(r"<li><code>([A-Z2-7-]{11})</code></li>", get(laptop, new_codes.location).text)
    assert len(fresh) == 10 and codes[1] not in fresh
    assert signed_in(laptop) and not signed_in(phone)
    old = app.test_client()
    password_step(old, OWNER_EMAIL)
    assert code_step(old, codes[1]).status_code == 401  # the old set is void

    phone = phone_signs_in(fresh[0])
    off = post(laptop, "/settings/security/two-factor/off", {"password": OWNER_PASSWORD},
               page="/settings/security/")
    assert off.status_code == 303
    assert signed_in(laptop) and not signed_in(phone)
