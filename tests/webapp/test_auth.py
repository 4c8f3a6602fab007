import pytest

from broadside.models import Owner
from tests.helpers import OWNER_EMAIL, OWNER_PASSWORD, csrf_token_from
from webapp.extensions import db


def test_setup_creates_first_owner_then_disappears(client):
    assert client.get("/").headers["Location"].startswith("/login")
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
    assert db.session.query(Owner).one().email == "me@example.com"
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


def test_login_is_throttled_per_account(client, owner):
    token = csrf_token_from(client.get("/login").text)
    for _ in range(5):
        client.post("/login", data={"email": OWNER_EMAIL, "password": "nope", "csrf_token": token})
    # Even the right password is refused while the account is throttled.
    response = client.post(
        "/login", data={"email": OWNER_EMAIL, "password": OWNER_PASSWORD, "csrf_token": token}
    )
    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.text


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
    response = client.get("/favicon.ico")
    assert response.status_code == 404
    assert "Set-Cookie" not in response.headers
    response = client.get("/u/garbage-token")
    assert "Set-Cookie" not in response.headers


def test_proxy_count_makes_per_ip_limits_count_clients(app_config):
    from webapp import create_app
    from webapp.extensions import db

    app = create_app({**app_config, "TRUSTED_PROXY_COUNT": "1"}, environ={})
    seen = []

    @app.route("/whoami-ip")
    def whoami_ip():
        from flask import request

        seen.append(request.remote_addr)
        return "ok"

    whoami_ip.broadside_public = True
    app.test_client().get("/whoami-ip", headers={"X-Forwarded-For": "203.0.113.9"})
    with app.app_context():
        db.engine.dispose()
    assert seen == ["203.0.113.9"]
