"""The broadcast API's exact contract, over the test client with a bearer token."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core.models import Broadcast, Delivery
from tests.helpers import make_list
from webapp.extensions import db


def create(client, api_headers, list_id, **extra):
    return client.post(
        "/api/broadcasts",
        headers=api_headers,
        json={"list_id": list_id, "subject": "Hi", "body": "**News**", **extra},
    )


def test_create_send_read_and_deliveries(app, client, api_headers, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 3)
    response = create(client, api_headers, weekly.id)
    assert response.status_code == 201 and response.json == {"id": 1, "status": "draft", "identity_id": None,
                                                             "codes": None, "format": "markdown",
                                                             "attachments": [], "versions": [],
                                                             "send_at_local": None}

    response = client.post("/api/broadcasts/1/send", headers=api_headers)
    assert response.status_code == 202 and response.json == {"id": 1, "status": "queued"}
    assert client.post("/api/broadcasts/1/send", headers=api_headers).status_code == 409

    run_worker_burst()
    body = client.get("/api/broadcasts/1", headers=api_headers).json
    assert body == {
        "id": 1,
        "status": "sent",
        "identity_id": None, "codes": None, "format": "markdown", "attachments": [],
        "versions": [], "pause_reason": None, "ab_test": None, "ab_result": None,
        "send_at_local": None,
        "total": 3,
        "counts": {"pending": 0, "sending": 0, "sent": 3, "skipped": 0, "failed": 0, "unknown": 0},
    }
    rows = client.get("/api/broadcasts/1/deliveries?status=sent", headers=api_headers).json
    assert [r["email"] for r in rows] == [f"reader{i:05d}@example.com" for i in range(3)]
    assert set(rows[0]) == {"id", "email", "status", "reason", "attempts"}
    assert client.get("/api/broadcasts/1/deliveries?status=failed", headers=api_headers).json == []


def test_pause_resume_cancel_and_conflicts(app, client, api_headers):
    weekly = make_list(db.session, 2)
    create(client, api_headers, weekly.id)
    assert client.post("/api/broadcasts/1/pause", headers=api_headers).status_code == 409
    client.post("/api/broadcasts/1/send", headers=api_headers)
    response = client.post("/api/broadcasts/1/pause", headers=api_headers)
    assert response.status_code == 200 and response.json == {"id": 1, "status": "paused"}
    assert client.get("/api/broadcasts/1", headers=api_headers).json["pause_reason"]
    assert client.post("/api/broadcasts/1/pause", headers=api_headers).status_code == 409
    assert client.post("/api/broadcasts/1/resume", headers=api_headers).json["status"] == "queued"
    assert client.post("/api/broadcasts/1/cancel", headers=api_headers).json["status"] == "cancelled"
    assert client.post("/api/broadcasts/1/resume", headers=api_headers).status_code == 409
    counts = client.get("/api/broadcasts/1", headers=api_headers).json["counts"]
    assert counts["skipped"] == 2 and counts["pending"] == 0


def test_bad_input_gets_clear_errors_and_writes_nothing(app, client, api_headers):
    weekly = make_list(db.session, 1)
    for payload in (
        {},
        {"list_id": weekly.id, "subject": "x"},
        {"list_id": "1", "subject": "x", "body": ""},
        {"list_id": 999, "subject": "x", "body": ""},
        {"list_id": weekly.id, "subject": "", "body": ""},
        {"list_id": weekly.id, "subject": "a\nb", "body": ""},
        {"list_id": weekly.id, "subject": "x", "body": 5},
    ):
        response = client.post("/api/broadcasts", headers=api_headers, json=payload)
        assert response.status_code == 422, payload
        assert response.json["error"]
    assert client.post("/api/broadcasts", headers=api_headers, data="not json").status_code == 422
    assert db.session.query(Broadcast).count() == 0
    assert client.get("/api/broadcasts/42", headers=api_headers).status_code == 404
    assert client.post("/api/broadcasts/42/send", headers=api_headers).status_code == 404
    create(client, api_headers, weekly.id)
    assert client.get("/api/broadcasts/1/deliveries?status=nope", headers=api_headers).status_code == 422
    assert (
        client.post("/api/broadcasts/1/test", headers=api_headers, json={"email": "nope"}).status_code == 422
    )
    assert client.post("/api/broadcasts", json={"list_id": 1}).status_code == 401


def test_test_send_goes_through_the_transactional_queue(
    app, client, api_headers, smtp_server, run_worker_burst
):
    weekly = make_list(db.session, 0)
    create(client, api_headers, weekly.id)
    response = client.post("/api/broadcasts/1/test", headers=api_headers, json={"email": "me@example.com"})
    assert response.status_code == 202
    run_worker_burst()
    assert smtp_server.recipients() == ["me@example.com"]
    assert smtp_server.messages[0].message["X-Broadside-Kind"] == "test"


def test_two_concurrent_sends_of_one_draft_exactly_one_wins(app, api_headers, live_server):
    weekly = make_list(db.session, 50)
    draft_id = create_draft(db.session, list_id=weekly.id, subject="Race", body="x").id
    codes: list[int] = []
    barrier = threading.Barrier(4)

    def press_send() -> None:
        request = urllib.request.Request(
            f"{live_server.url}/api/broadcasts/{draft_id}/send", method="POST", headers=api_headers
        )
        barrier.wait()
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                codes.append(response.status)
                json.load(response)
        except urllib.error.HTTPError as error:
            codes.append(error.code)
            error.close()

    threads = [threading.Thread(target=press_send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(codes) == [202, 409, 409, 409]
    db.session.expire_all()
    assert db.session.query(Delivery).count() == 50
