"""The API's OpenAPI 3.1 document: valid, complete (every route of the API blueprint and no
other), true to what the API answers (every documented operation is called and its real
answer validated against the documented schema for that status), and readable at
/settings/api-reference, on a desktop and on a phone."""

from __future__ import annotations

import html
import io
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from playwright.sync_api import Page, expect

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.codes import minting
from broadside.core import accounts
from broadside.core.models import Broadcast
from tests.helpers import OWNER_EMAIL, OWNER_PASSWORD, make_list
from tests.media_images import still
from webapp.extensions import db

# <int:segment_id> -> {segment_id}
CONVERTER = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")
METHODS = ("get", "post", "put", "patch", "delete")


def document(client) -> dict[str, Any]:
    response = client.get("/api/openapi.json")  # no token: it is documentation
    assert response.status_code == 200 and response.mimetype == "application/json"
    return response.json


def api_routes(app) -> set[tuple[str, str]]:
    return {(method, CONVERTER.sub(r"{\1}", rule.rule))
            for rule in app.url_map.iter_rules() if rule.endpoint.startswith("api.")
            for method in sorted(set(rule.methods or ()) - {"HEAD", "OPTIONS"})}


def documented(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in doc["paths"].items()
            for method in METHODS if method in item}


def test_the_document_is_valid_openapi_3_1(client):
    doc = document(client)
    assert doc["openapi"].startswith("3.1.")
    validate(doc)  # raises, naming the place, when anything is not OpenAPI 3.1
    schemas = doc["components"]["schemas"]
    assert {"Segment", "Rule", "RuleGroup", "RuleCondition", "Subscriber", "Broadcast",
            "Error"} <= set(schemas)
    assert doc["components"]["securitySchemes"]["bearer"] == {
        **doc["components"]["securitySchemes"]["bearer"], "type": "http", "scheme": "bearer"}
    assert doc["security"] == [{"bearer": []}]


def test_every_api_route_is_described_and_nothing_else(app, client):
    routes = api_routes(app)
    assert ("PATCH", "/api/broadcasts/{broadcast_id}") in routes  # the conversion works
    described = documented(document(client))
    assert routes - described == set(), "routes missing from the document"
    # The document also describes itself (served from the apidocs blueprint, without a token).
    assert described - routes == {("GET", "/api/openapi.json")}, "described but not routed"
    assert {rule.endpoint for rule in app.url_map.iter_rules()
            if rule.rule == "/api/openapi.json"} == {"apidocs.openapi"}
    assert document(client)["paths"]["/api/openapi.json"]["get"]["security"] == []


# ---------------------------------------------------------------- the document tells the truth

class Contract:
    """Checks real answers against the document and remembers which operations were seen."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.seen: set[tuple[str, str]] = set()

    def schema_validator(self, schema: dict[str, Any]) -> Draft202012Validator:
        # "#/components/..." references resolve against the root: give it the components.
        return Draft202012Validator({**schema, "components": self.doc["components"]})

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        if "$ref" not in node:
            return node
        target: Any = self.doc
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return target

    def check(self, response, method: str, path: str) -> Any:
        operation = self.doc["paths"][path][method.lower()]
        status = str(response.status_code)
        assert status in operation["responses"], (
            f"{method} {path} answered {status}, which the document does not list: {response.data[:200]!r}")
        documented_response = self.resolve(operation["responses"][status])
        if "content" not in documented_response:
            assert response.data == b"", f"{method} {path} {status} should have no body"
        else:
            schema = documented_response["content"]["application/json"]["schema"]
            errors = sorted(self.schema_validator(schema).iter_errors(response.json), key=str)
            assert not errors, f"{method} {path} {status}: {errors[0].message} at {list(errors[0].path)}"
        self.seen.add((method.upper(), path))
        return response.json if response.data else None


def test_every_operation_answers_as_documented(app, client, api_headers, owner, postal_address):
    owner_id = owner.id  # deleting expunges the session's objects
    doc = document(client)
    contract = Contract(doc)

    def call(method: str, template: str, *, headers=api_headers, query: str = "", **kwargs) -> Any:
        """Call one operation (its URL from the documented path) and check the answer."""
        ids = {k: kwargs.pop(k) for k in list(kwargs) if k.endswith("_id") or k == "code"}
        url = template.format(**ids) + query
        response = getattr(client, method.lower())(url, headers=headers, **kwargs)
        return contract.check(response, method, template)

    call("GET", "/api/whoami")
    call("GET", "/api/openapi.json", headers={})
    call("GET", "/api/lists", headers={})  # 401
    weekly = call("POST", "/api/lists", json={"name": "Weekly"})["id"]
    call("POST", "/api/lists", json={"name": "weekly"})  # 409
    call("GET", "/api/lists")
    csv = b"email,name,city\nann@example.com,Ann,Berlin\nnope,X,Y\n"
    imported = call("POST", "/api/lists/{list_id}/import", list_id=weekly,
                    content_type="multipart/form-data",
                    data={"file": (io.BytesIO(csv), "a.csv"), "welcome": "1",
                          "consent": "opted_in"})["import_id"]
    call("GET", "/api/imports/{import_id}", import_id=imported)
    call("GET", "/api/imports/{import_id}", import_id=999999)  # 404
    app.config["API_IMPORT_INLINE_BYTES"] = 10  # a large file: stored, queued, 202
    queued = call("POST", "/api/lists/{list_id}/import", list_id=weekly,
                  content_type="multipart/form-data",
                  data={"file": (io.BytesIO(csv), "b.csv"), "consent": "opted_in"})["import_id"]
    call("GET", "/api/imports/{import_id}", import_id=queued)  # queued: counts still zero
    del app.config["API_IMPORT_INLINE_BYTES"]

    pdf = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
    kept = call("POST", "/api/attachments", content_type="multipart/form-data",
                data={"file": (io.BytesIO(pdf), "programme.pdf")})["id"]
    call("POST", "/api/attachments", content_type="multipart/form-data",  # 422: not a PDF
         data={"file": (io.BytesIO(b"hello"), "fake.pdf")})
    call("GET", "/api/attachments/{attachment_id}", attachment_id=kept)
    call("GET", "/api/attachments/{attachment_id}", attachment_id=999999)  # 404
    gone = call("POST", "/api/attachments", content_type="multipart/form-data",
                data={"file": (io.BytesIO(b"a,b\n1,2\n"), "table.csv")})["id"]
    call("DELETE", "/api/attachments/{attachment_id}", attachment_id=gone)

    person = call("POST", "/api/subscribers", json={
        "email": "bob@example.com", "lists": [weekly], "attributes": {"age": 30}})["id"]
    call("POST", "/api/subscribers", json={"email": "bob@example.com"})  # 200: known
    call("GET", "/api/subscribers", query="?limit=1")
    call("GET", "/api/subscribers", query="?status=nope")  # 422
    call("GET", "/api/subscribers/{subscriber_id}", subscriber_id=person)
    call("PATCH", "/api/subscribers/{subscriber_id}", subscriber_id=person,
         json={"attributes": {"city": "Berlin"}})
    call("PATCH", "/api/subscribers/{subscriber_id}", subscriber_id=person, json={"name": 5})  # 422
    bulk = call("POST", "/api/subscribers/bulk", json={
        "action": "add", "list_id": weekly, "ids": [person]})["id"]
    call("POST", "/api/subscribers/bulk", json={"action": "block", "filter": {"q": "bob"},
                                                "expected": 5})  # 409
    call("POST", "/api/subscribers/bulk", json={"action": "add", "ids": [person]})  # 422
    call("GET", "/api/subscribers/bulk/{bulk_id}", bulk_id=bulk)
    call("GET", "/api/subscribers/bulk/{bulk_id}", bulk_id=999)  # 404

    rules = {"all": [{"field": "attributes.city", "op": "equals", "value": "Berlin"},
                     {"any": [{"field": "joined", "op": "within_days", "value": 30, "list": weekly},
                              {"field": "attributes.age", "op": "exists"},
                              {"field": "last_received", "op": "not_within_days", "value": 7}]}]}
    segment = call("POST", "/api/segments", json={"name": "Berlin", "rules": rules})["id"]
    call("POST", "/api/segments", json={"name": "X", "rules": {"all": []}})  # 422
    call("GET", "/api/segments")
    call("GET", "/api/segments/{segment_id}", segment_id=segment)
    call("GET", "/api/segments/{segment_id}", segment_id=999)  # 404
    call("PUT", "/api/segments/{segment_id}", segment_id=segment,
         json={"name": "Berliners", "rules": rules})
    call("GET", "/api/segments/{segment_id}/count", segment_id=segment)

    auto = "/api/automations/{automation_id}"
    welcome = {"name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly},
               "steps": [{"delay": "PT0S", "subject": "Hi {{ name }}", "body": "x"},
                         {"delay": "P3D", "subject": "Tips", "preheader": "p", "body": "y"}]}
    automation = call("POST", "/api/automations", json=welcome)["id"]
    call("POST", "/api/automations", json={**welcome, "name": "WELCOME"})  # 409
    call("POST", "/api/automations", json={**welcome, "steps": [{"delay": "P1M"}]})  # 422
    campaign = call("POST", "/api/automations", json={
        "name": "Berliners", "trigger": {"type": "segment", "segment_id": segment},
        "priority": 3, "steps": []})["id"]
    call("POST", auto + "/enable", automation_id=campaign)  # 422: no step
    call("POST", auto + "/enable", automation_id=automation)
    call("POST", "/api/subscribers", json={"email": "cy@example.com", "lists": [weekly],
                                           "welcome": True})
    assert call("GET", auto, automation_id=automation)["entered"] == 1
    call("GET", auto, automation_id=999)  # 404
    call("PUT", auto, automation_id=automation, json={**welcome, "steps": welcome["steps"][:1]})
    call("POST", auto + "/disable", automation_id=automation)
    call("GET", "/api/automations")

    one = "/api/broadcasts/{broadcast_id}"
    draft = call("POST", "/api/broadcasts", json={
        "segment_id": segment, "subject": "Hi", "body": "x", "skip_if_received_within_hours": 24})["id"]
    call("PATCH", one, broadcast_id=draft, json={"list_id": weekly})
    call("PATCH", one, broadcast_id=draft, json={"attachments": [kept]})
    call("PATCH", one, broadcast_id=draft, json={"attachments": [999999]})  # 422: no such file
    call("POST", one + "/test", broadcast_id=draft, json={"email": "me@example.com"})
    call("POST", one + "/pause", broadcast_id=draft)  # 409: a draft
    call("POST", one + "/send", broadcast_id=draft)
    call("POST", one + "/pause", broadcast_id=draft)
    call("PATCH", one, broadcast_id=draft, json={"subject": "Late"})  # 409
    call("DELETE", one, broadcast_id=draft)  # 409
    call("DELETE", "/api/attachments/{attachment_id}", attachment_id=kept)  # 409: in use
    call("DELETE", "/api/segments/{segment_id}", segment_id=segment)
    call("POST", one + "/resume", broadcast_id=draft)
    call("POST", one + "/cancel", broadcast_id=draft)
    call("GET", one, broadcast_id=draft)
    call("GET", one + "/deliveries", broadcast_id=draft)
    call("GET", "/api/broadcasts", query="?limit=1")
    assert call("GET", "/api/broadcasts")["items"][0]["status"] == "cancelled"
    gone = call("POST", "/api/broadcasts", json={"list_id": weekly, "subject": "G", "body": ""})["id"]
    call("DELETE", one, broadcast_id=gone)
    resend = one + "/non_openers"
    call("POST", resend, broadcast_id=draft, json={"subject": "Again"})  # 409: never sent
    call("POST", resend, broadcast_id=999999, json={"subject": "Again"})  # 404

    a_list = "/api/lists/{list_id}"
    call("GET", a_list, list_id=weekly)
    call("GET", a_list, list_id=999999)  # 404
    call("PATCH", a_list, list_id=weekly, json={"tracking": "people"})
    call("PATCH", a_list, list_id=weekly, json={"tracking": "always"})  # 422
    call("PATCH", a_list, list_id=999999, json={"tracking": "off"})  # 404

    coded = call("POST", "/api/broadcasts", json={"list_id": weekly, "subject": "{{ code }}",
                                                  "body": "", "codes": {"prefix": "SAVE"}})["id"]
    call("POST", "/api/broadcasts", json={"list_id": weekly, "subject": "S", "body": "",
                                          "codes": {"prefix": "save"}})  # 422
    call("POST", one + "/send", broadcast_id=coded)
    [code] = minting.mint(db.session, minting.DELIVERY, [minting.ToMint(
        1, None, "SAVE", broadcast_id=coded)]).values()  # as its first claim would
    db.session.commit()
    call("GET", "/api/codes/{code}", code=code)
    call("GET", "/api/codes/{code}", code="SAVE-NOTACODE")  # 404
    call("POST", "/api/codes/{code}/redeem", code=code)
    call("POST", "/api/codes/{code}/redeem", code=code)  # 409
    call("POST", "/api/codes/{code}/redeem", code="SAVE-NOTACODE")  # 404

    ident = "/api/identities/{identity_id}"
    identity = call("POST", "/api/identities", json={
        "name": "Product", "from": "Acme <p@acme.example>", "transport": "postmark://TOKEN-123456@",
        "webhook_secret": "whsec-1"})["id"]
    call("POST", "/api/identities", json={"name": "product", "from": "p@acme.example"})  # 409
    call("POST", "/api/identities", json={"name": "X", "from": "p@acme.example", "delay": 1})  # 422
    call("GET", "/api/identities")
    call("GET", ident, identity_id=identity)
    call("GET", ident, identity_id=999)  # 404
    call("PUT", ident, identity_id=identity, json={"name": "Product", "from": "p@acme.example"})
    used = call("POST", "/api/broadcasts", json={"list_id": weekly, "subject": "I", "body": "",
                                                  "identity_id": identity})["id"]
    call("DELETE", ident, identity_id=identity)  # 409: a draft uses it
    call("DELETE", one, broadcast_id=used)
    call("DELETE", ident, identity_id=identity)

    leave = "/api/subscribers/{subscriber_id}/unsubscribe"
    call("POST", leave, subscriber_id=person, json={"list_id": weekly})
    other = make_list(db.session, 0, "Other").id
    call("POST", leave, subscriber_id=person, json={"list_id": other})  # 404: never on it
    _, token = accounts.create_token(db.session, owner_id, "reports", read_only=True)
    call("DELETE", "/api/subscribers/{subscriber_id}", subscriber_id=person,
         headers={"Authorization": f"Bearer {token}"})  # 403
    call("DELETE", "/api/subscribers/{subscriber_id}", subscriber_id=person)

    # The segment is the campaign's trigger, so deleting it above was refused (409); once the
    # campaign is gone, it can go.
    assert call("GET", auto, automation_id=campaign)["trigger"]["segment_id"] == segment
    call("DELETE", auto, automation_id=campaign)
    call("DELETE", "/api/segments/{segment_id}", segment_id=segment)
    call("DELETE", auto, automation_id=automation)
    call("DELETE", auto, automation_id=automation)  # 404

    hook = "/api/webhooks/{endpoint_id}"
    endpoint = call("POST", "/api/webhooks", json={
        "url": "https://93.184.216.34/hooks", "events": ["delivery.sent"]})["id"]
    call("POST", "/api/webhooks", json={"url": "http://127.0.0.1/", "events": ["delivery.sent"]})  # 422
    call("GET", "/api/webhooks")
    call("DELETE", hook, endpoint_id=endpoint)
    call("DELETE", hook, endpoint_id=endpoint)  # 404

    library = "/api/media/{media_id}"

    def image_form(data: bytes) -> dict[str, Any]:
        return {"content_type": "multipart/form-data",
                "data": {"file": (io.BytesIO(data), "a.png"), "alt": "Stripes"}}
    picture = still("PNG", 700, 300)
    image = call("POST", "/api/media", **image_form(picture))
    call("POST", "/api/media", **image_form(picture))  # 200: the same file
    call("POST", "/api/media", **image_form(b"not an image"))  # 422
    call("GET", "/api/media", query="?limit=1")
    holder = create_draft(db.session, list_id=weekly, subject="Pictures",
                          body=f"![]({image['url']})").id
    call("DELETE", library, media_id=image["id"])  # 409: a draft uses it
    held = db.session.get(Broadcast, holder)
    held.body = "No picture."
    db.session.commit()
    call("DELETE", library, media_id=image["id"])
    call("DELETE", library, media_id=image["id"])  # 404

    tx = "/api/transactional/templates/{template_id}"
    reset = {"name": "Password reset", "subject": "Reset", "body": "Code {{ data.code }}",
             "essential": True}
    made = call("POST", "/api/transactional/templates", json=reset)["id"]
    call("POST", "/api/transactional/templates", json=reset)  # 409
    call("POST", "/api/transactional/templates", json={**reset, "name": ""})  # 422
    call("GET", "/api/transactional/templates")
    call("GET", tx, template_id=made)
    call("GET", tx, template_id=999)  # 404
    call("PUT", tx, template_id=made, json={**reset, "subject": "Reset now"})
    call("PUT", tx, template_id=999, json=reset)  # 404
    call("PUT", tx, template_id=made, json={**reset, "body": "{{ x"})  # 422
    keyed = {**api_headers, "Idempotency-Key": "one"}
    message = call("POST", "/api/transactional", headers=keyed,
                   json={"template": "Password reset", "to": "ann@example.com",
                         "data": {"code": "1"}})["id"]
    call("POST", "/api/transactional", headers=keyed,
         json={"template": made, "to": "ann@example.com", "data": {"code": "2"}})  # 409
    call("POST", "/api/transactional", json={"template": "Nope", "to": "a@example.com"})  # 404
    call("POST", "/api/transactional", json={"template": made, "to": "nope"})  # 422
    call("GET", "/api/transactional/{message_id}", message_id=message)
    call("GET", "/api/transactional/{message_id}", message_id=999)  # 404
    call("DELETE", tx, template_id=made)
    call("DELETE", tx, template_id=made)  # 404
    call("GET", "/api/audit", query="?limit=2&action=broadcast")
    call("GET", "/api/audit", query="?since=nope")  # 422

    invited = call("POST", "/api/users", json={"email": "new@example.com", "role": "viewer"})
    call("POST", "/api/users", json={"email": OWNER_EMAIL, "role": "viewer"})  # 409
    call("POST", "/api/users", json={"email": "new@example.com", "role": "emperor"})  # 422
    call("GET", "/api/users")
    person = "/api/users/{user_id}"
    call("GET", person, user_id=owner_id)
    call("GET", person, user_id=999)  # 404
    call("PATCH", person, user_id=owner_id, json={"role": "admin"})  # 409: the last owner
    call("PATCH", person, user_id=owner_id, json={"role": "emperor"})  # 422
    call("PATCH", person, user_id=owner_id, json={"role": "owner"})
    call("DELETE", person, user_id=owner_id)  # 409: the last owner
    call("DELETE", person, user_id=999)  # 404
    call("DELETE", "/api/invitations/{invitation_id}", invitation_id=invited["id"])
    call("DELETE", "/api/invitations/{invitation_id}", invitation_id=999)  # 404

    call("GET", "/api/templates")
    call("GET", "/api/templates/{template_id}", template_id="letter")
    call("GET", "/api/templates/{template_id}", template_id="999")  # 404

    assert contract.seen == documented(doc), "operations never called here"


def test_every_changing_operation_refuses_a_read_only_token(client, owner):
    """Found from the document (which matches the routes, above): a new write is covered."""
    doc = document(client)
    _, token = accounts.create_token(db.session, owner.id, "reports", read_only=True)
    writes = sorted((method, path) for method, path in documented(doc) if method != "GET")
    assert ("PATCH", "/api/broadcasts/{broadcast_id}") in writes and len(writes) >= 17
    for method, path in writes:
        url = re.sub(r"{[^}]+}", "1", path)
        response = getattr(client, method.lower())(url, headers={"Authorization": f"Bearer {token}"},
                                                    json={"name": "Sneaky", "list_id": 1})
        assert response.status_code == 403 and "read-only" in response.json["error"], (method, path)
        assert "403" in doc["paths"][path][method.lower()]["responses"], (method, path)


def test_every_example_in_the_document_fits_its_schema(client):
    doc = document(client)
    contract = Contract(doc)
    checked = 0
    for path, item in doc["paths"].items():
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            media = [operation.get("requestBody", {}).get("content", {}).get("application/json")]
            media += [contract.resolve(r).get("content", {}).get("application/json")
                      for r in operation["responses"].values()]
            for entry in media:
                if entry and "example" in entry:
                    errors = list(contract.schema_validator(entry["schema"]).iter_errors(entry["example"]))
                    assert not errors, f"{method} {path}: {errors[0].message}"
                    checked += 1
    assert checked > 30


def test_the_rule_schema_refuses_what_the_rules_refuse(client):
    contract = Contract(document(client))
    group = contract.schema_validator({"$ref": "#/components/schemas/RuleGroup"})
    good = {"all": [{"field": "attributes.city", "op": "equals", "value": "Berlin"},
                    {"any": [{"field": "list", "op": "is_on", "value": 1},
                             {"field": "joined", "op": "before", "value": "2026-01-31", "list": 2}]}]}
    assert group.is_valid(good)
    for bad in ({"all": []}, {"all": [], "any": []}, {"every": [good]},
                {"all": [{"field": "email", "op": "gt", "value": "a"}]},
                {"all": [{"field": "shoe_size", "op": "equals", "value": "9"}]},
                {"all": [{"field": "email", "op": "equals", "value": "a", "list": 3}]},
                {"all": [{"field": "list", "op": "is_on", "value": "one"}]}):
        assert not group.is_valid(bad), bad


# ---------------------------------------------------------------- the reference page

def test_the_reference_page_needs_a_sign_in(client, owner):
    anonymous = client.get("/settings/api-reference")
    assert anonymous.status_code == 302 and "/login" in anonymous.headers["Location"]
    assert client.get("/api/openapi.json").status_code == 200  # the document needs nothing


def test_the_reference_page_shows_every_operation(logged_in_client):
    doc = document(logged_in_client)
    response = logged_in_client.get("/settings/api-reference")
    assert response.status_code == 200
    page = html.unescape(response.text)
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                operation = item[method]
                assert f'id="op-{operation["operationId"]}"' in page, (method, path)
                assert operation["summary"] in page
    assert page.count('class="path">/api/segments/{segment_id}</code>') == 6  # 3 in the index, 3 entries
    # A request body example, pretty-printed, and the parameters of the filtered list.
    assert '"field": "attributes.city",' in page
    assert "<code>segment_id</code>" in page and "in query" in page
    assert 'id="schema-RuleCondition"' in page and "is_not_on" in page
    assert 'href="/api/openapi.json"' in page
    # Strict CSP: no inline style or script on the page.
    assert " style=" not in response.text and "<script>" not in response.text
    assert "style-src 'self'" in response.headers["Content-Security-Policy"]

    settings = logged_in_client.get("/settings/")
    assert 'href="/settings/api-reference"' in settings.text


@pytest.mark.browser
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_reference_page_never_scrolls_sideways(page: Page, live_server, owner, screenshot_dir):
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(live_server.url + "/login")
    page.get_by_label("Email").fill(OWNER_EMAIL)
    page.get_by_label("Password").fill(OWNER_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.goto(live_server.url + "/settings/")
    page.get_by_role("link", name="API reference").click()
    expect(page.get_by_role("heading", name="API reference", exact=True)).to_be_visible()
    # The page is tens of thousands of pixels long: screenshots are of the screen, not the
    # whole page (a full-page one takes over 30 s on a loaded machine); the sideways check
    # below measures the whole document.
    page.screenshot(path=str(screenshot_dir / "api-reference-desktop.png"))
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 844})
        page.locator("#op-createSegment").scroll_into_view_if_needed()
        page.screenshot(path=str(screenshot_dir / f"api-reference-{width}.png"))
        scroll_width = page.evaluate("document.documentElement.scrollWidth")
        assert scroll_width <= width, f"the page scrolls sideways at {width}px ({scroll_width}px)"
    # The examples scroll inside their own box instead, each within the screen.
    rightmost = page.eval_on_selector_all(
        "pre.example", "all => Math.max(...all.map(e => e.getBoundingClientRect().right))")
    assert 0 < rightmost <= 390
    example = page.locator("#op-createSegment pre.example").first
    assert example.evaluate("e => getComputedStyle(e).overflowX") == "auto"
    page.screenshot(path=str(screenshot_dir / "api-reference-phone.png"))
