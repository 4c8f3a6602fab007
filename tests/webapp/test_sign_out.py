"""Signing out ends the session on the server: a copy of the cookie taken before (another
machine, a backup of the browser's profile) gets the sign-in page afterwards, while the
owner's other browsers stay signed in; a new password ends them all; only a hash of each
browser's token is stored. On SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from sqlalchemy import func, select, update

from broadside.core import accounts, owner_sessions
from broadside.core.models import OwnerSession
from broadside.core.timeutil import utcnow
from tests.helpers import OWNER_EMAIL, OWNER_PASSWORD, csrf_token_from
from webapp.extensions import db
from webapp.security import BROWSER_SESSION

NEW_PASSWORD = "a brand new passphrase"


def get(client, path: str):
    """One request in an app context of its own, as when served (the test's own context
    would carry Flask-Login's user from one client's request into another's)."""
    with client.application.app_context():
        return client.get(path)


def post(client, path: str, data: dict):
    with client.application.app_context():
        return client.post(path, data=data)


def sign_in(client) -> None:
    token = csrf_token_from(get(client, "/login").text)
    answer = post(client, "/login", {"email": OWNER_EMAIL, "password": OWNER_PASSWORD,
                                     "csrf_token": token})
    assert answer.status_code == 302 and answer.location == "/"


def sign_out(client):
    token = csrf_token_from(get(client, "/lists/").text)
    return post(client, "/logout", {"csrf_token": token})


def signed_in(client) -> bool:
    answer = get(client, "/lists/")
    assert answer.status_code in (200, 302)
    if answer.status_code == 302:
        assert answer.location.startswith("/login")
    return answer.status_code == 200


def copy_of(app, client):
    """Another browser holding a copy of this one's session cookie, byte for byte."""
    cookie = client.get_cookie(app.config.get("SESSION_COOKIE_NAME", "session"))
    thief = app.test_client()
    thief.set_cookie(cookie.key, cookie.value, domain=cookie.domain or "localhost")
    return thief


def rows() -> int:
    db.session.expire_all()
    return db.session.scalar(select(func.count()).select_from(OwnerSession)) or 0


def test_a_copied_cookie_gets_the_sign_in_page_once_its_browser_signs_out(app, owner):
    laptop = app.test_client()
    sign_in(laptop)
    thief = copy_of(app, laptop)
    assert signed_in(thief)  # a copy works while the session is open: that is what a cookie is

    answer = sign_out(laptop)
    assert answer.status_code == 302 and answer.location == "/login"
    assert "You are signed out" in get(laptop, "/login").text
    assert not signed_in(laptop)
    page = get(thief, "/lists/")
    assert page.status_code == 302 and page.location == "/login?next=/lists/"
    assert "Sign in to Broadside" in get(thief, page.location).text
    assert rows() == 0


def test_signing_out_one_browser_leaves_the_others_signed_in(app, owner):
    laptop, phone = app.test_client(), app.test_client()
    sign_in(laptop)
    sign_in(phone)
    assert rows() == 2
    sign_out(laptop)
    assert not signed_in(laptop) and signed_in(phone)
    assert rows() == 1


def test_only_a_hash_of_each_browsers_token_is_stored(app, client, owner):
    sign_in(client)
    with client.session_transaction() as stored:
        token = stored[BROWSER_SESSION]
    [row] = db.session.scalars(select(OwnerSession)).all()
    assert row.owner_id == owner.id and token not in row.token_hash
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()


def test_a_new_password_ends_every_browsers_session_and_its_row(app, owner):
    laptop, phone = app.test_client(), app.test_client()
    sign_in(laptop)
    sign_in(phone)
    accounts.set_password(db.session, owner.id, NEW_PASSWORD)  # as `owner reset-password` does
    assert rows() == 0
    assert not signed_in(laptop) and not signed_in(phone)


def test_a_session_the_server_does_not_hold_is_signed_out(app, client, owner):
    """Sessions from before the server kept them (no token), and tokens it never made or has
    ended, count as signed out whatever the signed cookie says."""
    sign_in(client)
    for user_id, token in ((f"{owner.id}:0", None), (str(owner.id), None),
                           (f"{owner.id}:0", "made-up-token"), (f"{owner.id}:0", 42),
                           (f"{owner.id}:0", "x" * 5000), (f"{owner.id}:1", "keep")):
        with client.session_transaction() as stored:
            stored["_user_id"] = user_id
            if token == "keep":
                continue
            stored.pop(BROWSER_SESSION, None)
            if token is not None:
                stored[BROWSER_SESSION] = token
        assert not signed_in(client), (user_id, token)


def test_a_session_left_unused_longer_than_the_idle_limit_has_ended(app, client, owner):
    sign_in(client)
    lifetime = owner_sessions.idle_limit_of(db.session)  # Settings -> Security's
    db.session.execute(update(OwnerSession).values(last_seen_at=utcnow() - lifetime
                                                   + timedelta(minutes=1)))
    db.session.commit()
    assert signed_in(client)  # used within the lifetime: it counts, and is seen again now
    db.session.expire_all()
    assert db.session.scalar(select(OwnerSession.last_seen_at)) > utcnow() - timedelta(minutes=1)
    db.session.execute(update(OwnerSession).values(last_seen_at=utcnow() - lifetime
                                                   - timedelta(minutes=1)))
    db.session.commit()
    assert not signed_in(client)
    # The next sign-in clears what closed browsers left behind.
    sign_in(app.test_client())
    assert rows() == 1


def test_a_session_is_noted_as_used_at_most_every_few_minutes(app, owner):
    token = owner_sessions.open_session(db.session, owner.id, idle_limit=timedelta(days=31))
    opened = db.session.scalar(select(OwnerSession.last_seen_at))
    soon = opened + owner_sessions.TOUCH_EVERY - timedelta(seconds=1)
    later = opened + owner_sessions.TOUCH_EVERY + timedelta(seconds=1)
    for now, noted in ((soon, opened), (later, later)):
        found = owner_sessions.owner_of(db.session, owner.id, 0, token,
                                        idle_limit=timedelta(days=31), now=now)
        assert found is not None and found[1] == opened
        owner_sessions.seen(db.session, token, found[1], now=now)
        db.session.expire_all()
        assert db.session.scalar(select(OwnerSession.last_seen_at)) == noted
