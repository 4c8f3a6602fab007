"""MAX_IDENTITIES bounds the identities an installation has (beside the default): the API
answers 422 naming the bound past it and writes nothing, two creates at once cannot both pass
it, a deleted identity frees its place, and the identities page says the count and holds back
its form at the bound. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest
from sqlalchemy import func, select

from broadside.core.config import load_config
from broadside.core.models import Identity
from webapp.extensions import db


def body(n: int) -> dict:
    return {"name": f"Identity {n}", "from": f"Team <team{n}@example.com>", "transport": "outbox://"}


def live() -> int:
    db.session.expire_all()
    return db.session.scalar(select(func.count()).select_from(Identity)
                             .where(Identity.status != "deleted")) or 0


@pytest.fixture
def app_config(app_config):
    app_config["MAX_IDENTITIES"] = 3
    return app_config


def test_the_api_refuses_one_past_the_bound_and_a_delete_frees_a_place(client, api_headers):
    made = [client.post("/api/identities", headers=api_headers, json=body(n)) for n in range(3)]
    assert [m.status_code for m in made] == [201, 201, 201]
    refused = client.post("/api/identities", headers=api_headers, json=body(3))
    assert refused.status_code == 422
    error = refused.json["error"]
    assert "3 of its 3 sending identities" in error and "MAX_IDENTITIES" in error
    assert live() == 3
    assert client.delete(f"/api/identities/{made[0].json['id']}", headers=api_headers).status_code == 204
    assert client.post("/api/identities", headers=api_headers, json=body(3)).status_code == 201
    assert live() == 3


def test_parallel_creates_cannot_pass_the_bound(app, api_headers, live_server):
    start = threading.Barrier(6)
    codes: list[int] = []

    def create(n: int) -> None:
        request = urllib.request.Request(
            f"{live_server.url}/api/identities", method="POST", data=json.dumps(body(n)).encode(),
            headers={**api_headers, "Content-Type": "application/json"})
        start.wait()
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                codes.append(response.status)
        except urllib.error.HTTPError as error:
            codes.append(error.code)
            error.close()

    threads = [threading.Thread(target=create, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(codes) == [201, 201, 201, 422, 422, 422]
    assert live() == 3


def test_the_page_says_the_count_and_holds_the_form_back_at_the_bound(logged_in_client, client, api_headers):
    page = logged_in_client.get("/settings/identities/")
    assert "0 of 3 identities besides the default" in page.text
    assert 'action="/settings/identities/#new-identity"' in page.text
    for n in range(3):
        assert client.post("/api/identities", headers=api_headers, json=body(n)).status_code == 201
    full = logged_in_client.get("/settings/identities/")
    assert "3 of 3 identities besides the default" in full.text
    assert 'action="/settings/identities/#new-identity"' not in full.text
    assert "No identity can be added" in full.text and "raise MAX_IDENTITIES" in full.text


def test_the_bound_is_fifty_unless_set(tmp_path):
    assert load_config(tmp_path, {}, {})["MAX_IDENTITIES"] == 50
    assert load_config(tmp_path, {"MAX_IDENTITIES": "7"}, {})["MAX_IDENTITIES"] == 7
