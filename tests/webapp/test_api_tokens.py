from broadside.core.models import ApiToken
from tests.helpers import csrf_token_from
from webapp.extensions import db


def test_bearer_token_authenticates(client, api_headers):
    response = client.get("/api/whoami", headers=api_headers)
    assert response.status_code == 200
    assert response.json["token"] == "tests"
    assert "Set-Cookie" not in response.headers


def test_tokens_are_stored_hashed(app, api_headers):
    plain = api_headers["Authorization"].split()[1]
    stored = db.session.query(ApiToken).one()
    assert plain not in (stored.token_hash, stored.prefix) and len(stored.token_hash) == 64


def test_missing_wrong_and_malformed_tokens_get_401_json(client, api_headers):
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"},
                    {"Authorization": "Bearer " + "x" * 5000}):
        response = client.get("/api/whoami", headers=headers)
        assert response.status_code == 401
        assert "error" in response.json


def test_api_ignores_the_session_cookie(logged_in_client):
    assert logged_in_client.get("/api/whoami").status_code == 401


def test_revoked_token_is_refused(logged_in_client, api_headers):
    token = db.session.query(ApiToken).one()
    page = logged_in_client.get("/settings/")
    assert token.prefix in page.text
    response = logged_in_client.post(
        f"/settings/tokens/{token.id}/revoke", data={"csrf_token": csrf_token_from(page.text)}
    )
    assert response.status_code == 302
    assert logged_in_client.get("/api/whoami", headers=api_headers).status_code == 401


def test_create_token_in_browser_shows_it_once(logged_in_client):
    page = logged_in_client.get("/settings/")
    response = logged_in_client.post(
        "/settings/tokens", data={"name": "zapier", "csrf_token": csrf_token_from(page.text)}
    )
    assert response.status_code == 303
    assert 'id="new-token">bs_' in logged_in_client.get(response.headers["Location"]).text
    empty = logged_in_client.post(
        "/settings/tokens", data={"name": "", "csrf_token": csrf_token_from(page.text)}
    )
    assert empty.status_code == 422


def test_api_answers_a_wrong_method_with_a_json_error(client, api_headers):
    response = client.post("/api/whoami", headers=api_headers, data="x")
    assert response.status_code == 405
    assert response.json["error"]
