"""Steps the two-factor and session tests share: forms submitted as a browser would, codes
computed with pyotp from the secret the enrolment page shows."""

from __future__ import annotations

import re
import time

import pyotp

from tests.helpers import OWNER_PASSWORD, csrf_token_from

FIREFOX_LINUX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
CHROME_ANDROID = ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like "
                  "Gecko) Chrome/126.0.0.0 Mobile Safari/537.36")
SAFARI_IPHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
                 "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1")


def get(client, path: str, **kwargs):
    """One request in an app context of its own, as when served (the test's own context would
    carry Flask-Login's user from one client's request into another's)."""
    with client.application.app_context():
        return client.get(path, **kwargs)


def post(client, path: str, data: dict, *, page: str | None = None, **kwargs):
    """POST a form with the CSRF token of `page` (default: the same path)."""
    token = csrf_token_from(get(client, page or path, **kwargs).text)
    with client.application.app_context():
        return client.post(path, data={**data, "csrf_token": token}, **kwargs)


def password_step(client, email: str, *, password: str = OWNER_PASSWORD, **kwargs):
    return post(client, "/login", {"email": email, "password": password}, **kwargs)


def code_step(client, code: str, **kwargs):
    return post(client, "/login/two-factor", {"code": code}, **kwargs)


def secret_on(page: str) -> str:
    match = re.search(r'data-secret="([A-Z2-7]+)"', page)
    assert match, "no secret on the enrolment page"
    return match.group(1)


def code(secret: str, steps_ahead: int = 0) -> str:
    return pyotp.TOTP(secret).at(time.time() + 30 * steps_ahead)


def enrol(client) -> tuple[str, list[str]]:
    """Turn two-factor on from Settings -> Security: (the secret, the recovery codes)."""
    started = post(client, "/settings/security/two-factor/start", {},
                   page="/settings/security/")
    assert started.status_code == 303, started.text
    page = get(client, "/settings/security/two-factor/enrol")
    assert page.status_code == 200
    secret = secret_on(page.text)
    confirmed = post(client, "/settings/security/two-factor/enrol", {"code": code(secret)})
    assert confirmed.status_code == 303, confirmed.text
    assert confirmed.location.endswith("/settings/security/two-factor/recovery-codes")
    shown = get(client, "/settings/security/two-factor/recovery-codes")
    codes = re.findall(r"<li><code>([A-Z2-7]{5}-[A-Z2-7]{5})</code></li>", shown.text)
    assert len(codes) == 10
    return secret, codes


def signed_in(client) -> bool:
    answer = get(client, "/lists/")
    assert answer.status_code in (200, 302), answer.status_code
    if answer.status_code == 302:
        assert answer.location.startswith("/login"), answer.location
    return answer.status_code == 200
