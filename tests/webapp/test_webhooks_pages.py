"""Settings -> Webhooks without a browser: a refused form keeps what was typed (422), a new
endpoint shows its secret once, and the secret is shown again only on a POST."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from broadside.core.models import WebhookEndpoint, WebhookMessage
from tests.helpers import csrf_token_from
from webapp.extensions import db


@pytest.fixture(params=["sqlite"])
def backend(request):
    return request.param


def test_a_refused_endpoint_keeps_the_typed_values_and_a_saved_one_shows_its_secret_once(
        logged_in_client):
    page = logged_in_client.get("/settings/webhooks")
    assert page.status_code == 200 and 'id="no-endpoints"' in page.text
    token = csrf_token_from(page.text)
    refused = logged_in_client.post("/settings/webhooks", data={
        "csrf_token": token, "url": "http://10.0.0.8/hook",
        "events": ["delivery.failed", "broadcast.started"]})
    assert refused.status_code == 422
    assert "private, loopback or link-local" in refused.text
    assert 'value="http://10.0.0.8/hook"' in refused.text
    assert 'value="delivery.failed" checked' in refused.text
    assert 'value="broadcast.started" checked' in refused.text
    assert 'value="delivery.sent" checked' not in refused.text
    no_events = logged_in_client.post("/settings/webhooks", data={
        "csrf_token": token, "url": "https://93.184.216.34/hook"})
    assert no_events.status_code == 422 and "at least one" in no_events.text
    assert db.session.scalar(select(func.count()).select_from(WebhookEndpoint)) == 0

    made = logged_in_client.post("/settings/webhooks", data={
        "csrf_token": token, "url": "https://93.184.216.34/hook", "events": ["delivery.failed"]})
    assert made.status_code == 303
    endpoint = db.session.scalar(select(WebhookEndpoint))
    assert endpoint.secret not in made.headers["Location"]
    first = logged_in_client.get(made.headers["Location"])
    assert endpoint.secret in first.text and "Copy its signing secret now" in first.text

    shown = logged_in_client.get(f"/settings/webhooks/{endpoint.id}")
    assert endpoint.secret not in shown.text and "Reveal the signing secret" in shown.text
    revealed = logged_in_client.post(f"/settings/webhooks/{endpoint.id}/secret",
                                     data={"csrf_token": token})
    assert revealed.status_code == 200 and endpoint.secret in revealed.text
    assert logged_in_client.post(f"/settings/webhooks/{endpoint.id}/secret").status_code == 400

    tested = logged_in_client.post(f"/settings/webhooks/{endpoint.id}/test",
                                   data={"csrf_token": token}, follow_redirects=True)
    assert "Test event evt_" in tested.text and "webhook.test" in tested.text
    assert db.session.scalar(select(WebhookMessage.event_type)) == "webhook.test"

    settings = logged_in_client.get("/settings/")
    assert 'href="/settings/webhooks"' in settings.text
    gone = logged_in_client.post(f"/settings/webhooks/{endpoint.id}/delete",
                                 data={"csrf_token": token}, follow_redirects=True)
    assert "deleted" in gone.text
    db.session.expire_all()
    assert db.session.scalar(select(func.count()).select_from(WebhookMessage)) == 0
    assert logged_in_client.get(f"/settings/webhooks/{endpoint.id}").status_code == 404
