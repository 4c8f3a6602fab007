"""API tokens are full or read-only; a read-only one may only read, wherever it was made."""

from __future__ import annotations

import subprocess
import sys

from sqlalchemy import func, select

from broadside.core import accounts
from broadside.core.models import ApiToken, Broadcast
from tests.helpers import csrf_token_from
from webapp import REPO_ROOT
from webapp.extensions import db


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def count_broadcasts() -> int:
    return db.session.scalar(select(func.count()).select_from(Broadcast))


def test_a_read_only_token_reads_but_changes_nothing(client, owner):
    _, token = accounts.create_token(db.session, owner.id, "dashboard", read_only=True)
    assert client.get("/api/whoami", headers=bearer(token)).status_code == 200
    assert client.get("/api/lists", headers=bearer(token)).status_code == 200
    # Every route of the API that changes something (each one answers a full token).
    for method, url in (("post", "/api/lists"), ("post", "/api/subscribers"),
                        ("delete", "/api/subscribers/1"), ("post", "/api/lists/1/import"),
                        ("post", "/api/broadcasts"), ("post", "/api/broadcasts/1/send"),
                        ("post", "/api/broadcasts/1/pause"), ("post", "/api/broadcasts/1/resume"),
                        ("post", "/api/broadcasts/1/cancel"), ("post", "/api/broadcasts/1/test"),
                        ("patch", "/api/broadcasts/1"), ("delete", "/api/broadcasts/1"),
                        ("post", "/api/segments"), ("put", "/api/segments/1"),
                        ("delete", "/api/segments/1"), ("patch", "/api/subscribers/1"),
                        ("post", "/api/subscribers/1/unsubscribe"), ("post", "/api/automations"),
                        ("put", "/api/automations/1"), ("delete", "/api/automations/1"),
                        ("post", "/api/automations/1/enable"),
                        ("post", "/api/automations/1/disable"), ("post", "/api/identities"),
                        ("put", "/api/identities/1"), ("delete", "/api/identities/1"),
                        ("post", "/api/subscribers/bulk"), ("post", "/api/webhooks"),
                        ("delete", "/api/webhooks/1"), ("post", "/api/codes/SAVE-X/redeem"),
                        ("post", "/api/transactional/templates"),
                        ("put", "/api/transactional/templates/1"),
                        ("delete", "/api/transactional/templates/1"),
                        ("post", "/api/transactional"), ("post", "/api/users"),
                        ("patch", "/api/users/1"), ("delete", "/api/users/1"),
                        ("delete", "/api/invitations/1"), ("post", "/api/media"),
                        ("delete", "/api/media/1"),
                        ("post", "/api/attachments"), ("delete", "/api/attachments/1"),
                        ("patch", "/api/lists/1"), ("post", "/api/broadcasts/1/non_openers")):
        response = getattr(client, method)(url, json={"name": "Sneaky", "subject": "x"},
                                           headers=bearer(token))
        assert response.status_code == 403, (method, url)
        assert "read-only" in response.get_json()["error"]
    assert count_broadcasts() == 0
    assert client.get("/api/lists", headers=bearer(token)).get_json() in ([], {"lists": []})


def test_the_test_above_names_every_changing_route(app):
    """A new changing route must be added to the read-only test, so none is forgotten."""
    changing = {rule.rule for rule in app.url_map.iter_rules()
                if rule.rule.startswith("/api/") and set(rule.methods or ()) - {"GET", "HEAD", "OPTIONS"}}
    assert changing == {
        "/api/lists", "/api/subscribers", "/api/subscribers/<int:subscriber_id>",
        "/api/lists/<int:list_id>/import", "/api/broadcasts", "/api/broadcasts/<int:broadcast_id>/send",
        "/api/broadcasts/<int:broadcast_id>/pause", "/api/broadcasts/<int:broadcast_id>/resume",
        "/api/broadcasts/<int:broadcast_id>/cancel", "/api/broadcasts/<int:broadcast_id>/test",
        "/api/broadcasts/<int:broadcast_id>", "/api/segments", "/api/segments/<int:segment_id>",
        "/api/subscribers/<int:subscriber_id>/unsubscribe", "/api/automations",
        "/api/automations/<int:automation_id>", "/api/automations/<int:automation_id>/enable",
        "/api/automations/<int:automation_id>/disable", "/api/identities",
        "/api/identities/<int:identity_id>", "/api/subscribers/bulk", "/api/webhooks",
        "/api/webhooks/<int:endpoint_id>", "/api/codes/<code>/redeem",
        "/api/transactional/templates", "/api/transactional/templates/<int:template_id>",
        "/api/transactional", "/api/users", "/api/users/<int:user_id>",
        "/api/invitations/<int:invitation_id>", "/api/media", "/api/media/<int:media_id>",
        "/api/attachments", "/api/attachments/<int:attachment_id>",
        "/api/lists/<int:list_id>", "/api/broadcasts/<int:broadcast_id>/non_openers",
    }


def test_a_full_token_still_changes_things(client, owner):
    _, token = accounts.create_token(db.session, owner.id, "zapier")
    response = client.post("/api/lists", json={"name": "Weekly"}, headers=bearer(token))
    assert response.status_code in (200, 201)


def test_the_settings_page_creates_either_kind_and_says_which(logged_in_client):
    page = logged_in_client.get("/settings/")
    assert 'value="read"' in page.text and "Read-only: GET requests only" in page.text
    created = logged_in_client.post("/settings/tokens", data={
        "csrf_token": csrf_token_from(page.text), "name": "Reporting", "access": "read"})
    assert created.status_code == 303
    token = db.session.scalar(select(ApiToken).where(ApiToken.name == "Reporting"))
    assert token.read_only is True
    assert '<td data-label="Access">read-only</td>' in logged_in_client.get(created.headers["Location"]).text
    refused = logged_in_client.post("/settings/tokens", data={
        "csrf_token": csrf_token_from(page.text), "name": "Odd", "access": "admin"})
    assert refused.status_code == 422
    assert db.session.scalar(select(ApiToken).where(ApiToken.name == "Odd")) is None


def test_the_cli_creates_a_read_only_token(app_config, owner):
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": app_config["DATABASE_URL"],
           "SECRET_KEY": app_config["SECRET_KEY"], "BROADSIDE_INSTANCE_PATH": app_config["INSTANCE_PATH"],
           "BROADSIDE_NAMESPACE": app_config["BROADSIDE_NAMESPACE"], "REDIS_URL": app_config["REDIS_URL"]}
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "flask", "--app", "webapp", "tokens", *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    created = run("create", "reports", "--read-only")
    assert created.returncode == 0, created.stderr
    assert "read-only" in created.stdout.splitlines()[0]
    listed = run("list")
    assert "\treports\t" in listed.stdout and "\tread-only\tactive" in listed.stdout
