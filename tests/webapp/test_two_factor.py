"""Two-factor sign-in through the forms, on SQLite and PostgreSQL: enrol from Settings ->
Security (a secret made on the server, its QR code, ten recovery codes shown once), then a
sign-in is a password and a code; a code is accepted once (the same code twice, and two
submissions racing); a recovery code works once; failed codes count in the sign-in throttle;
the owner's "require for everyone" sends a person without it to enrol and nowhere else; the
command line resets it."""

from __future__ import annotations

import re
import threading

import pytest
from sqlalchemy import func, select, update

from broadside.core import two_factor
from broadside.core.models import AuditEntry, Owner, OwnerSession, RecoveryCode, SiteSettings
from tests.helpers import OWNER_EMAIL, OWNER_PASSWORD, Browser, csrf_token_from
from tests.webapp.test_cli import run_cli
from tests.webapp.two_factor_steps import (
    code,
    code_step,
    enrol,
    get,
    password_step,
    post,
    secret_on,
    signed_in,
)
from webapp.auth import pending
from webapp.extensions import db


def person(email: str = OWNER_EMAIL) -> Owner:
    db.session.expire_all()
    return db.session.scalars(select(Owner).where(Owner.email == email)).one()


def test_enrol_then_sign_in_with_password_and_code(app, logged_in_client):
    page = get(logged_in_client, "/settings/security/")
    assert page.status_code == 200 and 'id="two-factor-state">off' in page.text
    started = post(logged_in_client, "/settings/security/two-factor/start", {},
                   page="/settings/security/")
    enrol_page = get(logged_in_client, started.location)
    assert "<svg" in enrol_page.text and "Broadside" in enrol_page.text
    assert OWNER_EMAIL in enrol_page.text
    secret = secret_on(enrol_page.text)
    grouped = " ".join(secret[i:i + 4] for i in range(0, len(secret), 4))
    assert grouped in enrol_page.text
    assert secret_on(get(logged_in_client, started.location).text) == secret  # kept on reload
    wrong = post(logged_in_client, started.location, {"code": "000000" if code(secret) != "000000"
                                                      else "111111"})
    assert wrong.status_code == 422 and "That code is not right" in wrong.text
    assert person().totp_enabled_at is None

    confirming_code = code(secret)
    confirmed = post(logged_in_client, started.location, {"code": confirming_code})
    assert confirmed.status_code == 303
    shown = get(logged_in_client, confirmed.location)
    codes = re.findall(r"<li><code>([A-Z2-7]{5}-[A-Z2-7]{5})</code></li>", shown.text)
    assert len(set(codes)) == 10
    again = get(logged_in_client, confirmed.location)  # shown once
    assert again.status_code == 302 and again.location.endswith("/settings/security/")
    stored = db.session.scalars(select(RecoveryCode.code_hash)).all()
    assert len(stored) == 10 and not any(c.replace("-", "") in h for c in codes for h in stored)
    assert person().totp_secret == secret and person().totp_enabled_at is not None

    post(logged_in_client, "/logout", {}, page="/lists/")
    answer = password_step(logged_in_client, OWNER_EMAIL)
    assert answer.status_code == 302 and answer.location == "/login/two-factor"
    assert not signed_in(logged_in_client)  # the password alone signs nobody in
    # The very code that confirmed the enrolment (computing it again could cross into the next
    # 30 s step, whose code is rightly accepted).
    replay = code_step(logged_in_client, confirming_code)
    assert replay.status_code == 401 and "already used" in replay.text
    assert not signed_in(logged_in_client)
    answer = code_step(logged_in_client, code(secret, steps_ahead=1))
    assert answer.status_code == 302 and answer.location == "/"
    assert signed_in(logged_in_client)


def test_the_same_code_twice_is_refused_the_second_time(app, client, owner):
    secret, _ = enrol(_signed_in_owner(app))
    db.session.execute(update(Owner).values(totp_last_step=None))  # as if enrolled long ago
    db.session.commit()
    first, second = app.test_client(), app.test_client()
    now = code(secret)
    password_step(first, OWNER_EMAIL)
    password_step(second, OWNER_EMAIL)
    assert code_step(first, now).status_code == 302
    refused = code_step(second, now)
    assert refused.status_code == 401
    assert "That code was already used. Wait for your app to show the next one" in refused.text
    assert not signed_in(second)


@pytest.fixture
def roomy_throttle(app_config):
    """Four browsers from one address: room for their passwords and codes (the throttle is
    proven on its own below)."""
    app_config["LOGIN_FAILURES_PER_ACCOUNT_CLIENT"] = 100


def test_two_submissions_of_one_code_at_once_sign_in_once(roomy_throttle, app, live_server,
                                                          owner):
    secret, _ = enrol(_signed_in_owner(app))
    db.session.execute(update(Owner).values(totp_last_step=None))
    db.session.commit()
    browsers = [Browser(live_server.url) for _ in range(4)]
    tokens = []
    for browser in browsers:
        token = csrf_token_from(browser.request("GET", "/login")[1])
        status, page = browser.submit("/login", {"email": OWNER_EMAIL, "password": OWNER_PASSWORD,
                                                 "csrf_token": token})
        assert status == 200 and "Two-factor sign-in" in page
        tokens.append(csrf_token_from(page))
    now = code(secret)
    start = threading.Barrier(len(browsers))
    results: list[tuple[int, str]] = []

    def submit(browser: Browser, token: str) -> None:
        start.wait(10)
        results.append(browser.submit("/login/two-factor", {"code": now, "csrf_token": token}))

    threads = [threading.Thread(target=submit, args=pair) for pair in zip(browsers, tokens,
                                                                          strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == len(browsers)
    signed = [page for status, page in results if status == 200 and "Dashboard" in page]
    refused = [page for status, page in results if status == 401]
    assert len(signed) == 1 and len(refused) == len(browsers) - 1, [s for s, _ in results]
    assert all("already used" in page for page in refused)
    assert db.session.scalar(select(func.count()).select_from(OwnerSession)) == 2  # + enroller


def test_a_recovery_code_signs_in_once(app, owner):
    _, codes = enrol(_signed_in_owner(app))
    browser = app.test_client()
    password_step(browser, OWNER_EMAIL)
    answer = code_step(browser, codes[3].lower().replace("-", " "))  # typed loosely
    assert answer.status_code == 302
    assert "you signed in with a recovery code; 9 of them are left" in \
        get(browser, answer.location).text.lower()
    assert signed_in(browser)
    assert two_factor.recovery_codes_left(db.session, owner.id) == 9
    other = app.test_client()
    password_step(other, OWNER_EMAIL)
    again = code_step(other, codes[3])
    assert again.status_code == 401 and "already used" in again.text
    assert not signed_in(other)
    wrong = code_step(other, "AAAAA-AAAAA")
    assert wrong.status_code == 401 and "not right" in wrong.text


def test_failed_codes_count_in_the_sign_in_throttle(app, owner):
    secret, _ = enrol(_signed_in_owner(app))
    browser = app.test_client()
    addr = {"environ_base": {"REMOTE_ADDR": "198.51.100.9"}}
    password_step(browser, OWNER_EMAIL, **addr)  # one attempt, not forgiven until the code
    statuses = [code_step(browser, "123456" if code(secret) != "123456" else "654321",
                          **addr).status_code for _ in range(4)]
    assert statuses == [401] * 4
    refused = code_step(browser, code(secret, steps_ahead=1), **addr)  # even the right code
    assert refused.status_code == 429
    assert "Too many failed sign-ins. Wait 15 minutes, then try again." in refused.text
    assert not signed_in(browser)


def test_the_second_step_needs_a_fresh_pending_sign_in(app, client, owner):
    secret, _ = enrol(_signed_in_owner(app))
    nothing = get(client, "/login/two-factor")
    assert nothing.status_code == 302 and nothing.location == "/login"
    password_step(client, OWNER_EMAIL)
    with client.session_transaction() as stored:
        stored[pending.KEY] = {**stored[pending.KEY],
                               "at": stored[pending.KEY]["at"] - pending.LIFETIME_SECONDS - 1}
    late = get(client, "/login/two-factor")
    assert late.status_code == 302 and late.location == "/login"
    password_step(client, OWNER_EMAIL)
    with client.session_transaction() as stored:  # the password changed since
        stored[pending.KEY] = {**stored[pending.KEY], "epoch": stored[pending.KEY]["epoch"] + 1}
    assert get(client, "/login/two-factor").location == "/login"
    assert not signed_in(client)


def test_require_for_everyone_sends_a_person_without_it_to_enrol_and_nowhere_else(
        app, owner, make_person):
    owner_browser = _signed_in_owner(app)
    refused = post(owner_browser, "/settings/security/policy",
                   {"require_two_factor": "y", "idle_hours": "744"}, page="/settings/security/")
    assert refused.status_code == 422 and "for yourself first" in refused.text
    enrol(owner_browser)
    writer = make_person("writer")
    writer_browser = app.test_client()
    assert password_step(writer_browser, writer.email).status_code == 302
    assert signed_in(writer_browser)  # signed in before the owner requires it
    saved = post(owner_browser, "/settings/security/policy",
                 {"require_two_factor": "y", "idle_hours": "744"}, page="/settings/security/")
    assert saved.status_code == 303
    assert db.session.get(SiteSettings, 1).require_two_factor
    assert not signed_in(writer_browser)  # their session ended with the policy
    assert signed_in(owner_browser)

    answer = password_step(writer_browser, writer.email)
    assert answer.status_code == 302 and answer.location == "/login/two-factor/enrol"
    for path in ("/", "/lists/", "/settings/security/", "/settings/"):
        elsewhere = get(writer_browser, path)
        assert elsewhere.status_code == 302 and elsewhere.location.startswith("/login"), path
    assert get(writer_browser, "/login/two-factor").location == "/login"  # not the code step
    password_step(writer_browser, writer.email)
    page = get(writer_browser, "/login/two-factor/enrol")
    assert page.status_code == 200 and "<svg" in page.text
    secret = secret_on(page.text)
    done = post(writer_browser, "/login/two-factor/enrol", {"code": code(secret)})
    assert done.status_code == 302
    assert done.location.endswith("/settings/security/two-factor/recovery-codes")
    codes_page = get(writer_browser, done.location)
    assert codes_page.text.count("<li><code>") == 10
    assert signed_in(writer_browser)
    assert person(writer.email).totp_enabled_at is not None


def test_the_policy_is_the_owners_and_its_values_are_checked(app, owner, sign_in_as):
    owner_browser = _signed_in_owner(app)
    for hours in ("0", "2161", "abc", "", "1.5", "９"):
        answer = post(owner_browser, "/settings/security/policy", {"idle_hours": hours},
                      page="/settings/security/")
        assert answer.status_code == 422, hours
        assert "whole number of hours from 1 to 2160" in answer.text
    assert db.session.get(SiteSettings, 1) is None or \
        db.session.get(SiteSettings, 1).session_idle_hours == 744
    assert post(owner_browser, "/settings/security/policy", {"idle_hours": "12"},
                page="/settings/security/").status_code == 303
    db.session.expire_all()
    assert db.session.get(SiteSettings, 1).session_idle_hours == 12
    admin = sign_in_as("admin")
    page = get(admin, "/settings/security/")
    assert page.status_code == 200 and 'id="policy"' not in page.text
    assert 'id="policy"' in get(owner_browser, "/settings/security/").text
    answer = post(admin, "/settings/security/policy", {"idle_hours": "1"},
                  page="/settings/security/")
    assert answer.status_code == 403
    db.session.expire_all()
    assert db.session.get(SiteSettings, 1).session_idle_hours == 12


def test_the_command_line_resets_a_lost_device(app, app_config, owner):
    enrol(_signed_in_owner(app))
    result = run_cli(app_config, "users", "reset-two-factor", OWNER_EMAIL.upper())
    assert result.returncode == 0, result.stderr
    assert f"Two-factor sign-in is off for {OWNER_EMAIL}" in result.stdout
    assert person().totp_secret is None and person().totp_enabled_at is None
    assert db.session.scalar(select(func.count()).select_from(RecoveryCode)) == 0
    entry = db.session.scalars(select(AuditEntry).where(
        AuditEntry.action == "person.two_factor_reset")).one()
    assert entry.actor == "command line" and entry.object_id == str(owner.id)
    browser = app.test_client()
    answer = password_step(browser, OWNER_EMAIL)
    assert answer.status_code == 302 and answer.location == "/"  # the password alone again
    unknown = run_cli(app_config, "users", "reset-two-factor", "nobody@example.com")
    assert unknown.returncode != 0
    assert "Nobody signs in as 'nobody@example.com'; nothing was changed." in unknown.stderr


def test_turning_it_off_asks_for_a_code_or_the_password(app, owner):
    browser = _signed_in_owner(app)
    enrol(browser)
    wrong = post(browser, "/settings/security/two-factor/off", {"password": "not it at all"},
                 page="/settings/security/")
    assert wrong.status_code == 422 and "a current code from your app, or your password" in wrong.text
    assert person().totp_enabled_at is not None
    off = post(browser, "/settings/security/two-factor/off", {"password": OWNER_PASSWORD},
               page="/settings/security/")
    assert off.status_code == 303 and person().totp_enabled_at is None
    assert db.session.scalar(select(func.count()).select_from(RecoveryCode)) == 0
    assert signed_in(browser)


def _signed_in_owner(app):
    browser = app.test_client()
    assert password_step(browser, OWNER_EMAIL).status_code == 302
    return browser
