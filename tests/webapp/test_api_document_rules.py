"""The server keeps the rules its OpenAPI document states, for every operation the document
lists (read from /api/openapi.json, not from a hand-made list: a new endpoint is checked the
day it is documented):

- an id beyond what the database holds is 404 for every method (it was 405 for PUT, PATCH and
  DELETE), and every 405 says in `Allow` what the path takes;
- a query parameter the operation does not document is 422; `after` starts at 0 and `limit`
  stays within its documented bounds, or 422;
- a body with `additionalProperties: false` refuses a field it does not list;
- `null` is refused where the schema does not allow it;
- an integer field takes `2.0` (JSON Schema's integer) and refuses `1.5`.
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from broadside.core.models import Owner
from broadside.mail.attachments import store
from tests.helpers import make_list, start_broadcast
from tests.media_images import still
from webapp.extensions import db

METHODS = ("get", "post", "put", "patch", "delete")
BEYOND = ("2147483648", "99999999999999999999")
DOCUMENTATION = "/api/openapi.json"  # the document itself: public, takes nothing


def document(client) -> dict[str, Any]:
    return client.get(DOCUMENTATION).json


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method.upper(), path, item[method]) for path, item in doc["paths"].items()
            for method in METHODS if method in item and path != DOCUMENTATION]


def resolved(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def types_of(doc: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    schema = resolved(doc, schema)
    kinds = schema.get("type", [])
    found = {kinds} if isinstance(kinds, str) else set(kinds)
    for choice in schema.get("oneOf", []) + schema.get("anyOf", []):
        found |= types_of(doc, choice)
    return found


def with_ids(path: str, ids: dict[str, int]) -> str:
    for name, value in ids.items():
        path = path.replace("{" + name + "}", str(value))
    return path


def call(client, headers, method: str, url: str, body: Any = None):
    return client.open(url, method=method, headers=headers, json=body)


def json_bodies(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(method, path, body schema, example) for every operation that takes a JSON body."""
    found = []
    for method, path, op in operations(doc):
        content = op.get("requestBody", {}).get("content", {}).get("application/json")
        if content:
            found.append((method, path, resolved(doc, content["schema"]), content["example"]))
    assert len(found) >= 10  # the enumeration found the bodies
    return found


@pytest.fixture
def world(client, api_headers) -> dict[str, int]:
    """One of each thing a path or an example names, so ids in them are real."""
    weekly = make_list(db.session, 2)
    sent = start_broadcast(client.application, weekly, enqueue=False)
    ids = {"list_id": weekly.id, "broadcast_id": sent.id}
    made = {
        "segment_id": ("/api/segments", {"name": "Everyone", "rules": {"all": [
            {"field": "list", "op": "is_on", "value": weekly.id}]}}),
        "identity_id": ("/api/identities", {"name": "Product", "from": "P <p@product.example>"}),
        "subscriber_id": ("/api/subscribers", {"email": "ann@example.com",
                                               "lists": [weekly.id]}),
        "automation_id": ("/api/automations", {"name": "Hello", "trigger": {
            "type": "joined_list", "list_id": weekly.id}, "steps": [
            {"subject": "Hi", "body": "Hello", "delay": "PT0S"}]}),
        "endpoint_id": ("/api/webhooks", {"url": "https://93.184.216.34/hook",
                                          "events": ["subscriber.created"]}),
        "template_id": ("/api/transactional/templates", {"name": "Password reset",
                                                         "subject": "Reset", "body": "Code"}),
    }
    for name, (url, body) in made.items():
        response = client.post(url, headers=api_headers, json=body)
        assert response.status_code == 201, (url, response.json)
        ids[name] = response.json["id"]
    draft = client.post("/api/broadcasts", headers=api_headers,
                        json={"subject": "Draft", "body": "B", "list_id": weekly.id})
    ids["broadcast_id"] = draft.json["id"]  # a draft: PATCH and the test send take it
    sent = client.post("/api/transactional", headers=api_headers,
                       json={"template": ids["template_id"], "to": "cy@example.com"})
    assert sent.status_code == 202, sent.json
    ids["message_id"] = sent.json["id"]
    ids["import_id"] = ids["bulk_id"] = 1  # routed before they are looked up
    ids["attachment_id"] = store(db.session, name="a.txt", data=b"hello\n", uploaded_by=None).id
    invited = client.post("/api/users", headers=api_headers,
                          json={"email": "dee@example.com", "role": "viewer"})
    assert invited.status_code == 201, invited.json
    ids["invitation_id"] = invited.json["id"]
    colleague = Owner(email="eve@example.com", password_hash="!", role="writer")
    db.session.add(colleague)
    db.session.commit()
    ids["user_id"] = colleague.id
    image = client.post("/api/media", headers=api_headers, content_type="multipart/form-data",
                        data={"file": (io.BytesIO(still("PNG", 40, 30)), "a.png")})
    assert image.status_code == 201, image.json
    ids["media_id"] = image.json["id"]
    return ids


def filled(example: Any, ids: dict[str, int]) -> Any:
    """The document's example with its ids replaced by `world`'s."""
    if isinstance(example, dict):
        return {key: ids[key] if key in ids and isinstance(value, int)
                else [ids["list_id"]] if key == "lists" else filled(value, ids)
                for key, value in example.items()}
    if isinstance(example, list):
        return [filled(item, ids) for item in example]
    return example


def names(message: str, field: str) -> bool:
    message = message.lower()
    return field.lower() in message or field.replace("_", " ").lower() in message


# ------------------------------------------------------------------ routing

def test_an_id_beyond_the_database_is_404_for_every_method(client, api_headers):
    checked = 0
    for method, path, _ in operations(document(client)):
        if "{" not in path:
            continue
        for huge in BEYOND:
            url = with_ids(path, {name: huge for name in ("automation_id", "broadcast_id",
                                                          "identity_id", "import_id", "list_id",
                                                          "segment_id", "subscriber_id",
                                                          "bulk_id", "endpoint_id",
                                                          "template_id", "message_id", "code",
                                                          "user_id", "invitation_id",
                                                          "attachment_id", "media_id")})
            assert "{" not in url, url
            response = call(client, api_headers, method, url, {} if method != "GET" else None)
            assert response.status_code == 404, (method, url, response.status_code)
            assert set(response.json) == {"error"}
            checked += 1
    assert checked >= 40


def test_every_405_says_what_the_path_allows(client, api_headers):
    checked = 0
    for path, item in document(client)["paths"].items():
        documented = {m.upper() for m in METHODS if m in item}
        allowed = documented | {"OPTIONS"} | ({"HEAD"} if "GET" in documented else set())
        url = with_ids(path, {name: "1" for name in ("automation_id", "broadcast_id",
                                                      "identity_id", "import_id", "list_id",
                                                      "segment_id", "subscriber_id", "bulk_id",
                                                      "endpoint_id", "template_id",
                                                      "message_id", "code", "user_id",
                                                      "invitation_id", "attachment_id",
                                                      "media_id")})
        for method in {m.upper() for m in METHODS} - documented:
            response = call(client, api_headers, method, url)
            assert response.status_code == 405, (method, path)
            assert set(response.headers.get("Allow", "").split(", ")) == allowed, (method, path)
            if path != DOCUMENTATION:
                assert set(response.json) == {"error"}
            checked += 1
    assert checked >= 50


# ------------------------------------------------------------------ query strings

def test_a_query_parameter_the_document_does_not_list_is_422(client, api_headers, world):
    for method, path, op in operations(document(client)):
        documented = {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
        assert "zz_unknown" not in documented
        response = call(client, api_headers, method, with_ids(path, world) + "?zz_unknown=1")
        assert response.status_code == 422, (method, path, response.status_code)
        assert "Unknown query parameter 'zz_unknown'" in response.json["error"], (method, path)


def test_paging_is_one_rule_on_every_list(client, api_headers, world):
    paged = [(path, op) for method, path, op in operations(document(client))
             if {"after", "limit"} <= {p["name"] for p in op.get("parameters", [])}]
    assert len(paged) >= 3
    for path, op in paged:
        schemas = {p["name"]: p["schema"] for p in op["parameters"]}
        assert schemas["after"]["minimum"] == 0 and schemas["limit"]["minimum"] == 1, path
        top = schemas["limit"]["maximum"]
        url = with_ids(path, world)
        for query, status in ((f"limit={top}", 200), ("limit=1&after=0", 200),
                              (f"limit={top + 1}", 422), ("limit=0", 422), ("after=-1", 422),
                              ("limit=1.0", 422), ("after=2147483648", 422)):
            response = client.get(f"{url}?{query}", headers=api_headers)
            assert response.status_code == status, (path, query, response.json)
            if status == 422:
                assert "must be a whole number from" in response.json["error"], (path, query)


# ------------------------------------------------------------------ bodies

def test_a_closed_body_refuses_a_field_it_does_not_list(client, api_headers, world):
    closed = [(m, p, e) for m, p, schema, e in json_bodies(document(client))
              if schema.get("additionalProperties") is False]
    assert len(closed) >= 10
    for method, path, example in closed:
        body = {**filled(example, world), "zz_unknown": 1}
        response = call(client, api_headers, method, with_ids(path, world), body)
        assert response.status_code == 422, (method, path, response.json)
        assert "zz_unknown" in response.json["error"], (method, path, response.json)


def test_null_is_refused_where_the_schema_does_not_allow_it(client, api_headers, world):
    doc = document(client)
    checked = 0
    for method, path, schema, example in json_bodies(doc):
        for field, field_schema in schema.get("properties", {}).items():
            if "null" in types_of(doc, field_schema):
                continue
            body = {**filled(example, world), field: None}
            response = call(client, api_headers, method, with_ids(path, world), body)
            # (The rest of the body is the document's example, with real ids: valid.)
            assert response.status_code == 422, (method, path, field, response.json)
            checked += 1
    assert checked >= 40


def test_an_integer_field_takes_a_whole_float_and_refuses_a_fraction(client, api_headers, world):
    doc = document(client)
    checked = 0
    for method, path, schema, example in json_bodies(doc):
        for field, field_schema in schema.get("properties", {}).items():
            if "integer" not in types_of(doc, field_schema):
                continue
            base = filled(example, world)
            whole = base.get(field) if isinstance(base.get(field), int) else 1
            url = with_ids(path, world)
            fraction = call(client, api_headers, method, url, {**base, field: whole + 0.5})
            assert fraction.status_code == 422, (method, path, field, fraction.json)
            assert names(fraction.json["error"], field), (method, path, field, fraction.json)
            # 2.0 is answered as 2 is: refused only when 2 is, and in the same words.
            as_float = call(client, api_headers, method, url, {**base, field: float(whole)})
            as_int = call(client, api_headers, method, url, {**base, field: whole})
            if as_float.status_code == 422:
                assert as_int.status_code == 422, (method, path, field, as_float.json)
                assert as_float.json == as_int.json, (method, path, field)
            checked += 1
    assert checked >= 12


def test_a_whole_float_is_stored_as_the_integer(client, api_headers, world):
    response = client.patch(f"/api/broadcasts/{world['broadcast_id']}", headers=api_headers,
                            json={"list_id": float(world["list_id"]),
                                  "skip_if_received_within_hours": 48.0})
    assert response.status_code == 200, response.json
    assert response.json["list_id"] == world["list_id"]
    assert response.json["skip_if_received_within_hours"] == 48
    assert isinstance(response.json["skip_if_received_within_hours"], int)
