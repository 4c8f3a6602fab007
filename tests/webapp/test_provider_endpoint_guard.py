"""A provider's `?endpoint=` is refused when an identity is saved (page and API) if it reaches
inside without PROVIDER_ENDPOINTS_ALLOW_PRIVATE=1, and link-local or metadata addresses always;
and a transport URL is shown everywhere without its secrets: an SMTP user name (Postmark's SMTP
login is its server token) by its first 4 characters, an endpoint's own credentials masked
(pages, the API, the System page's configuration, the log's redaction)."""

from __future__ import annotations

import logging
import re
from html import unescape
from urllib.parse import quote

from sqlalchemy import func, select

from broadside.core.logs import RedactFilter, url_passwords
from broadside.core.models import Identity
from tests.helpers import csrf_token_from
from webapp.extensions import db

TOKEN = "0f9a1b2c-3d4e-5f60-7182-93a4b5c6d7e8"  # a Postmark server token, also its SMTP login
RELAY_USER = "relay-user-5d1e"
RELAY_PASS = "relay-pass-9c2b7a"
RELAY_KEY = "k3y-8e1f0a9b7c6d5e4f"
ENDPOINT = f"http://{RELAY_USER}:{RELAY_PASS}@127.0.0.1:9/v1?api_key={RELAY_KEY}&region=eu"
ENDPOINT_Q = quote(ENDPOINT, safe=":/@")  # as written in ?endpoint= (its own ? and & escaped)
SMTP_TOKEN_URL = f"smtp+starttls://{TOKEN}:{TOKEN}@smtp.postmarkapp.com:587"
SECRETS = (TOKEN, RELAY_USER, RELAY_PASS, RELAY_KEY)
BODY = {"name": "Relay", "from": "News <news@acme.example>", "transport": f"postmark://{TOKEN}@"}


def identity_count() -> int:
    return db.session.scalar(select(func.count()).select_from(Identity)) or 0


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, secret


def test_an_endpoint_inside_is_refused_when_saved_through_the_api(app, client, api_headers):
    app.config["PROVIDER_ENDPOINTS_ALLOW_PRIVATE"] = False
    for endpoint, said in [("http://127.0.0.1:8025", "127.0.0.1 (loopback, RFC 1122)"),
                           ("https://10.0.0.8/", "10.0.0.8 (a private network, RFC 1918)"),
                           ("http://[64:ff9b::a00:8]/", "inside NAT64"),
                           ("http://localhost:8025", "localhost resolves to")]:
        response = client.post("/api/identities", headers=api_headers,
                               json={**BODY, "transport": f"postmark://{TOKEN}@?endpoint={endpoint}"})
        assert response.status_code == 422, response.json
        error = response.json["error"]
        assert said in error and "PROVIDER_ENDPOINTS_ALLOW_PRIVATE=1" in error
    assert identity_count() == 0
    # With the flag, the own network is allowed; link-local and metadata never.
    app.config["PROVIDER_ENDPOINTS_ALLOW_PRIVATE"] = True
    for endpoint in ("http://169.254.169.254", "http://[fd00:ec2::254]/", "http://[::ffff:a9fe:a9fe]"):
        response = client.post("/api/identities", headers=api_headers,
                               json={**BODY, "transport": f"postmark://{TOKEN}@?endpoint={endpoint}"})
        assert response.status_code == 422 and "not even with" in response.json["error"]
    assert identity_count() == 0
    created = client.post("/api/identities", headers=api_headers,
                          json={**BODY, "transport": f"postmark://{TOKEN}@?endpoint=http://127.0.0.1:8025"})
    assert created.status_code == 201
    # Replacing the transport is checked the same way.
    app.config["PROVIDER_ENDPOINTS_ALLOW_PRIVATE"] = False
    replaced = client.put(f"/api/identities/{created.json['id']}", headers=api_headers,
                          json={**BODY, "transport": f"postmark://{TOKEN}@?endpoint=http://192.168.1.9"})
    assert replaced.status_code == 422 and "192.168.1.9" in replaced.json["error"]


def test_an_endpoint_inside_is_refused_on_the_page_under_its_field(app, logged_in_client):
    app.config["PROVIDER_ENDPOINTS_ALLOW_PRIVATE"] = False
    page = logged_in_client.get("/settings/identities/")
    response = logged_in_client.post("/settings/identities/", data={
        "csrf_token": csrf_token_from(page.text), "name": "Relay", "from": "News <news@acme.example>",
        "transport": f"postmark://{TOKEN}@?endpoint=http://127.0.0.1:8025", "delay_ms": "200",
        "hourly_limit": "0", "postal_address": "", "webhook_secret": ""})
    assert response.status_code == 422
    assert "PROVIDER_ENDPOINTS_ALLOW_PRIVATE=1" in response.text
    error = re.search(r'<p class="error" id="identity-transport-error" role="alert">([^<]*)</p>',
                      response.text)
    assert error and "127.0.0.1 (loopback, RFC 1122)" in unescape(error.group(1))
    assert identity_count() == 0


def test_an_smtp_login_and_endpoint_credentials_are_masked_on_the_api_and_pages(app, client, api_headers,
                                                                               logged_in_client):
    app.config["SMTP_URL"] = SMTP_TOKEN_URL
    created = client.post("/api/identities", headers=api_headers,
                          json={**BODY, "transport": f"postmark://{TOKEN}@?endpoint={ENDPOINT_Q}"})
    assert created.status_code == 201
    listed = client.get("/api/identities", headers=api_headers)
    assert_no_secret(listed.get_data(as_text=True))
    default, relay = listed.json
    assert default["transport"] == "smtp+starttls://0f9a…:•••@smtp.postmarkapp.com:587"
    assert relay["transport"] == ("postmark://0f9a…@?endpoint=http://rela…:•••@127.0.0.1:9/v1"
                                  "?api_key=•••%26region=eu")
    page = logged_in_client.get("/settings/identities/").text
    assert_no_secret(page)
    assert "smtp+starttls://0f9a…:•••@smtp.postmarkapp.com:587" in page
    assert_no_secret(logged_in_client.get(f"/settings/identities/{relay['id']}/edit").text)


def test_the_system_pages_configuration_masks_a_provider_key_and_its_endpoint(app, logged_in_client):
    app.config["SMTP_URL"] = f"postmark://{TOKEN}@?endpoint={ENDPOINT_Q}"
    checks = logged_in_client.get("/system/checks").text
    assert "SMTP_URL = postmark://0f9a…@?endpoint=" in checks
    assert_no_secret(checks)


def test_the_log_redacts_an_smtp_login_and_an_endpoints_credentials():
    smtp = RedactFilter(url_passwords(SMTP_TOKEN_URL))
    assert TOKEN not in smtp.redact(f"login {TOKEN} refused by smtp.postmarkapp.com")
    transport_url = f"resend://re_k@?endpoint={ENDPOINT_Q}"
    record = logging.LogRecord("broadside.worker", logging.INFO, __file__, 1, "via %s, then %s",
                               (transport_url, ENDPOINT), None)
    RedactFilter(url_passwords(transport_url)).filter(record)
    assert_no_secret(record.getMessage())
