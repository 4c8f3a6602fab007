import time

import pytest
from flask import g

from broadside.core.models import Owner
from tests.helpers import OWNER_EMAIL, OWNER_PASSWORD, csrf_token_from
from tests.own_apps import release
from webapp.extensions import db


def test_setup_creates_first_owner_then_disappears(client):
    # A fresh install: any owner page goes straight to creating the owner, not through /login.
    fresh = client.get("/")
    assert (fresh.status_code, fresh.headers["Location"]) == (302, "/setup")
    assert client.get("/lists/").headers["Location"] == "/setup"
    assert client.get("/login").headers["Location"] == "/setup"
    page = client.get("/setup")
    assert page.status_code == 200
    response = client.post(
        "/setup",
        data={
            "email": "Me@Example.com",
            "password": "long enough pw",
            "confirm": "long enough pw",
            "csrf_token": csrf_token_from(page.text),
        },
    )
    assert response.status_code == 302
    created = db.session.query(Owner).one()
    assert created.email == "me@example.com"
    # scrypt at werkzeug's full cost (N=2^15): the tests' own owner is stored cheaper.
    assert created.password_hash.startswith("scrypt:32768:8:1$")
    assert client.get("/").status_code == 200
    assert client.get("/setup").status_code == 404


def test_setup_rejects_bad_input_and_writes_nothing(client):
    page = client.get("/setup")
    token = csrf_token_from(page.text)
    for data in (
        {"email": "not-an-email", "password": "long enough pw", "confirm": "long enough pw"},
        {"email": "a@example.com", "password": "short", "confirm": "short"},
        {"email": "a@example.com", "password": "long enough pw", "confirm": "different pw!"},
    ):
        response = client.post("/setup", data={**data, "csrf_token": token})
        assert response.status_code == 422
        assert 'class="error"' in response.text
    assert db.session.query(Owner).count() == 0


def test_forms_need_csrf(client, owner):
    response = client.post("/login", data={"email": OWNER_EMAIL, "password": OWNER_PASSWORD})
    assert response.status_code == 400
    assert "expired" in response.text


def test_login_logout(logged_in_client):
    assert logged_in_client.get("/").status_code == 200
    home = logged_in_client.get("/settings/")
    response = logged_in_client.post("/logout", data={"csrf_token": csrf_token_from(home.text)})
    assert response.status_code == 302
    assert logged_in_client.get("/").status_code == 302


def test_wrong_password_is_refused(client, owner):
    token = csrf_token_from(client.get("/login").text)
    response = client.post("/login", data={"email": OWNER_EMAIL, "password": "nope", "csrf_token": token})
    assert response.status_code == 401
    assert "do not match" in response.text


def login_from(client, ip: str, email: str, password: str):
    """POST the login form as the client at `ip` (a fresh CSRF token from that client)."""
    # Every request of a test shares the test's app context, where Flask-WTF keeps the signed
    # token in `g`: forget it, so that a second test client gets a token of its own session.
    g.pop("csrf_token", None)
    g.pop("csrf_valid", None)
    token = csrf_token_from(client.get("/login", environ_base={"REMOTE_ADDR": ip}).text)
    return client.post(
        "/login", data={"email": email, "password": password, "csrf_token": token},
        environ_base={"REMOTE_ADDR": ip},
    )


def test_login_is_throttled_per_account_and_client(client, owner):
    for _ in range(5):
        assert login_from(client, "198.51.100.7", OWNER_EMAIL, "nope").status_code == 401
    # The client that made the failures is refused, even with the right password.
    response = login_from(client, "198.51.100.7", OWNER_EMAIL, OWNER_PASSWORD)
    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.text


def test_an_attacker_cannot_lock_the_owner_out(app, owner):
    attacker, owner_browser = app.test_client(), app.test_client()
    # The attacker exhausts both its per-(account, client) and its per-client allowance.
    for _ in range(25):
        login_from(attacker, "203.0.113.66", OWNER_EMAIL, "guess")
    assert login_from(attacker, "203.0.113.66", OWNER_EMAIL, OWNER_PASSWORD).status_code == 429
    # The owner, from another network, still gets in with the right password.
    response = login_from(owner_browser, "198.51.100.20", OWNER_EMAIL, OWNER_PASSWORD)
    assert response.status_code == 302, response.text
    assert owner_browser.get("/").status_code == 200


@pytest.fixture
def quick_account_slowdown(app_config):
    app_config["LOGIN_ACCOUNT_SLOWDOWN_AFTER"] = 8
    app_config["LOGIN_ACCOUNT_DELAY_SECONDS"] = 0.3


def test_guesses_from_many_networks_slow_the_account_down_but_never_refuse_it(
    quick_account_slowdown, app, owner
):
    attacker = app.test_client()
    for n in range(10):  # every guess from a network of its own, each within its own limits
        assert login_from(attacker, f"203.0.113.{n + 1}", OWNER_EMAIL, "guess").status_code == 401
    owner_browser = app.test_client()
    began = time.perf_counter()
    response = login_from(owner_browser, "198.51.100.20", OWNER_EMAIL, OWNER_PASSWORD)
    # Let in, after the account-wide wait that every attempt now gets.
    assert response.status_code == 302, response.text
    assert time.perf_counter() - began >= 0.3


def test_ipv6_clients_are_counted_per_64(client, owner):
    # The per-(account, client) limit: five failures from one /64 ...
    for i in range(5):
        assert login_from(client, f"2001:db8:1:2::{i + 1}", OWNER_EMAIL, "nope").status_code == 401
    # ... refuse another address of the same /64, even with the right password,
    assert login_from(client, "2001:db8:1:2::ffff", OWNER_EMAIL, OWNER_PASSWORD).status_code == 429
    # but not a neighbouring /64.
    assert login_from(client, "2001:db8:1:3::1", OWNER_EMAIL, OWNER_PASSWORD).status_code == 302


def test_ipv6_per_client_limit_is_shared_by_the_whole_64(client, owner):
    # The per-client limit (any address typed in): 20 failures spread over one /64 ...
    for i in range(20):
        response = login_from(client, f"2001:db8:7:7::{i + 1:x}", f"nobody{i}@example.com", "x")
        assert response.status_code == 401
    # ... and the next attempt from anywhere in that /64 is refused, whatever address it names;
    refused = login_from(client, "2001:db8:7:7:ffff:ffff:ffff:ffff", "other@example.com", "x")
    assert refused.status_code == 429
    # another /64 of the same /48 is a different client.
    assert login_from(client, "2001:db8:7:8::1", "other@example.com", "x").status_code == 401


def test_session_cookie_flags(logged_in_client):
    cookie = logged_in_client.get_cookie("session")
    assert cookie is not None and cookie.http_only and cookie.same_site == "Lax"


def test_next_parameter_cannot_leave_the_site(client, owner):
    token = csrf_token_from(client.get("/login").text)
    response = client.post(
        "/login?next=//evil.example/x",
        data={"email": OWNER_EMAIL, "password": OWNER_PASSWORD, "csrf_token": token},
    )
    assert response.headers["Location"] == "/"


@pytest.mark.parametrize(
    "target",
    [
        "/\\evil.example",
        "/\\evil.example/x",
        "\\\\evil.example",
        "\\/evil.example",
        "/%5Cevil.example",
        "/%5cevil.example",
        "/%2F%2Fevil.example",
        "https://evil.example/",
        "/\t/evil.example",
        "/\n/evil.example",
        "///evil.example",
    ],
)
def test_next_parameter_refuses_other_hosts_in_disguise(client, owner, target):
    token = csrf_token_from(client.get("/login").text)
    response = client.post(
        "/login", query_string={"next": target},
        data={"email": OWNER_EMAIL, "password": OWNER_PASSWORD, "csrf_token": token},
    )
    assert response.status_code == 302
    assert response.headers["Location"] == "/"


@pytest.mark.parametrize("target", ["/settings/?tab=tokens", "/subscribers/?q=Jo%20Smith%40x"])
def test_next_parameter_keeps_same_site_paths(client, owner, target):
    token = csrf_token_from(client.get("/login").text)
    response = client.post(
        "/login", query_string={"next": target},
        data={"email": OWNER_EMAIL, "password": OWNER_PASSWORD, "csrf_token": token},
    )
    assert response.headers["Location"] == target


@pytest.mark.parametrize("path", ["/", "/settings/"])
def test_owner_pages_redirect_to_login(client, owner, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/login")


def test_htmx_request_without_session_is_told_to_redirect(client, owner):
    response = client.get("/", headers={"HX-Request": "true"})
    assert response.status_code == 401
    assert response.headers["HX-Redirect"] == "/login"


def test_security_headers_on_pages(client):
    response = client.get("/login", follow_redirects=True)
    csp = response.headers["Content-Security-Policy"]
    assert "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"]


def test_anonymous_error_pages_set_no_cookie(client, owner):
    response = client.get("/no-such-page")
    assert response.status_code == 404
    assert "Set-Cookie" not in response.headers
    response = client.get("/u/garbage-token")
    assert "Set-Cookie" not in response.headers


def test_proxy_count_makes_per_ip_limits_count_clients(app_config):
    from webapp import create_app

    app = create_app({**app_config, "TRUSTED_PROXY_COUNT": "1"}, environ={})
    seen = []

    @app.route("/whoami-ip")
    def whoami_ip():
        from flask import request

        seen.append(request.remote_addr)
        return "ok"

    whoami_ip.broadside_public = True
    app.test_client().get("/whoami-ip", headers={"X-Forwarded-For": "203.0.113.9"})
    release(app)
    assert seen == ["203.0.113.9"]


@pytest.mark.parametrize(
    ("remote_addr", "client"),
    [
        ("203.0.113.9", "203.0.113.9"),
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::ffff:203.0.113.9", "203.0.113.9"),
        ("fe80::1%eth0", "fe80::/64"),
        (None, "unknown"),
        ("", "unknown"),
    ],
)
def test_client_key_is_an_ipv4_address_or_an_ipv6_64(remote_addr, client):
    from webapp.throttle import client_key

    assert client_key(remote_addr) == client
