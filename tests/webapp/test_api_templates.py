"""GET /api/templates and /api/templates/{id}: the built-ins by their key, the owner's by their
number, as the OpenAPI document describes them."""

from __future__ import annotations

from broadside.core.models import MessageTemplate
from webapp.extensions import db


def test_templates_over_the_api(client, api_headers):
    db.session.add(MessageTemplate(name="Ours", body="Hi [[block: Sign-off]]",
                                   design_overrides={"colour": "#aa3300", "font": "gone"}))
    db.session.commit()
    listing = client.get("/api/templates", headers=api_headers)
    assert listing.status_code == 200
    items = listing.get_json()["items"]
    assert [t["id"] for t in items] == ["newsletter", "announcement", "letter", 1]
    ours = items[3]
    assert ours["built_in"] is False and ours["design"] == {"colour": "#aa3300"}
    assert "body" not in ours and ours["created_at"].endswith("Z")
    assert items[1]["format"] == "html" and items[1]["design"] is None

    one = client.get("/api/templates/1", headers=api_headers).get_json()
    assert one["body"] == "Hi [[block: Sign-off]]"
    letter = client.get("/api/templates/letter", headers=api_headers).get_json()
    assert letter["built_in"] is True and letter["body"].startswith("Dear {{ name")
    missing = client.get("/api/templates/2", headers=api_headers)
    assert missing.status_code == 404 and missing.get_json()["error"] == "There is no such template."
    assert client.get("/api/templates?page=2", headers=api_headers).status_code == 422
