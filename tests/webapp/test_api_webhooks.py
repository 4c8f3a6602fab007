"""`GET/POST /api/webhooks` and `DELETE /api/webhooks/{id}`: the contract of
webapp/api/webhooks.py (SQLite only: nothing here differs between engines)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from broadside.core import accounts
from broadside.core.models import WebhookEndpoint
from broadside.webhooks import endpoints
from webapp.extensions import db


@pytest.fixture(params=["sqlite"])
def backend(request):
    return request.param


def count() -> int:
    return db.session.scalar(select(func.count()).select_from(WebhookEndpoint)) or 0


def test_create_list_and_delete_an_endpoint(client, api_headers):
    made = client.post("/api/webhooks", headers=api_headers, json={
        "url": "https://93.184.216.34/hooks", "events": ["delivery.sent", "subscriber.created"]})
    assert made.status_code == 201, made.json
    endpoint = made.json
    assert endpoint["secret"].startswith("whsec_") and endpoint["status"] == "enabled"
    assert endpoint["events"] == ["subscriber.created", "delivery.sent"]  # in the documented order

    listed = client.get("/api/webhooks", headers=api_headers).json
    assert [e["id"] for e in listed] == [endpoint["id"]]
    assert "secret" not in listed[0]

    assert client.delete(f"/api/webhooks/{endpoint['id']}", headers=api_headers).status_code == 204
    assert client.get("/api/webhooks", headers=api_headers).json == []
    assert client.delete(f"/api/webhooks/{endpoint['id']}", headers=api_headers).status_code == 404


@pytest.mark.parametrize("body, message", [
    ({"url": "https://93.184.216.34/", "events": ["delivery.sent"], "secret": "x"}, "Unknown field"),
    ({"url": "https://93.184.216.34/"}, "list of event names"),
    ({"url": "https://93.184.216.34/", "events": []}, "at least one"),
    ({"url": "https://93.184.216.34/", "events": ["delivery.opened"]}, "Unknown event"),
    ({"url": "https://93.184.216.34/", "events": "delivery.sent"}, "list of event names"),
    ({"url": 42, "events": ["delivery.sent"]}, "must be a string"),
    ({"url": "javascript:alert(1)", "events": ["delivery.sent"]}, "https://"),
    ({"url": "http://127.0.0.1:5000/", "events": ["delivery.sent"]}, "WEBHOOKS_ALLOW_PRIVATE"),
    ({"url": "http://169.254.169.254/", "events": ["delivery.sent"]}, "link-local"),
    ({"url": "https://" + "a" * 2000 + ".example/", "events": ["delivery.sent"]}, "under 2000"),
    ({"url": "https://exa\u0001mple.com/", "events": ["delivery.sent"]}, "control characters"),
    # A NUL, in this field as in any: the one rule for text (tests/webapp/test_text_rule.py).
    ({"url": "https://exa\u0000mple.com/", "events": ["delivery.sent"]}, "'url' holds a NUL"),
    ({"url": "https://" + "a" * 300 + ".example/", "events": ["delivery.sent"]}, "does not resolve"),
])
def test_bad_input_is_refused_with_422_and_writes_nothing(client, api_headers, body, message):
    answer = client.post("/api/webhooks", headers=api_headers, json=body)
    assert answer.status_code == 422, answer.json
    assert message in answer.json["error"]
    assert count() == 0


def test_write_routes_need_a_full_token(client, owner, api_headers):
    _, read_only = accounts.create_token(db.session, owner.id, "reports", read_only=True)
    headers = {"Authorization": f"Bearer {read_only}"}
    assert client.get("/api/webhooks", headers=headers).status_code == 200
    refused = client.post("/api/webhooks", headers=headers, json={
        "url": "https://93.184.216.34/", "events": ["delivery.sent"]})
    assert refused.status_code == 403 and count() == 0
    made = client.post("/api/webhooks", headers=api_headers, json={
        "url": "https://93.184.216.34/", "events": ["delivery.sent"]}).json
    assert client.delete(f"/api/webhooks/{made['id']}", headers=headers).status_code == 403
    assert client.get("/api/webhooks").status_code == 401
    assert count() == 1


SECRET_URL = "https://93.184.216.34:8443/hooks/catch/4711/k9Qx2vLr?token=s3cr3t-value"


def test_a_read_only_token_sees_each_url_masked_to_its_origin(client, logged_in_client, owner,
                                                               api_headers):
    """A receiver's path and query are often its only credential: a read-only token (the kind
    handed to a dashboard) sees the scheme, host and port, nothing of the rest, even where the
    receiver's last answer quoted its path; full tokens and the signed-in owner see it whole."""
    made = client.post("/api/webhooks", headers=api_headers, json={
        "url": SECRET_URL, "events": ["delivery.sent"]}).json
    plain = client.post("/api/webhooks", headers=api_headers, json={
        "url": "http://[2606:4700::1111]/", "events": ["delivery.sent"]}).json
    endpoints.move(db.session, made["id"], "disable", reason=(
        f"Disabled by Broadside: every delivery failed for 1 day. Last error: HTTP 404: Cannot "
        f"POST /hooks/catch/4711/k9Qx2vLr?token=s3cr3t-value (asked for {SECRET_URL})"))
    db.session.commit()
    _, read_only = accounts.create_token(db.session, owner.id, "dashboard", read_only=True)

    seen = client.get("/api/webhooks", headers={"Authorization": f"Bearer {read_only}"})
    assert seen.status_code == 200
    assert [e["url"] for e in seen.json] == ["https://93.184.216.34:8443/•••",
                                              "http://[2606:4700::1111]/•••"]
    assert seen.json[0]["disabled_reason"] == (
        "Disabled by Broadside: every delivery failed for 1 day. Last error: HTTP 404: Cannot "
        "POST /••• (asked for https://93.184.216.34:8443/•••)")
    for part in ("hooks", "4711", "k9Qx2vLr", "s3cr3t"):
        assert part not in seen.text, part

    whole = client.get("/api/webhooks", headers=api_headers).json
    assert [e["url"] for e in whole] == [SECRET_URL, plain["url"]]
    assert SECRET_URL in whole[0]["disabled_reason"]
    page = logged_in_client.get(f"/settings/webhooks/{made['id']}")
    assert page.status_code == 200 and "k9Qx2vLr?token=s3cr3t-value" in page.text
