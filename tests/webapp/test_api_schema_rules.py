"""Rules the API enforces that JSON Schema can state are in the document, not only in its
prose, and the server agrees with each: the document refuses the body, and so does the API
(422, naming the field), while a body the document accepts is accepted.

tests/webapp/test_api_schemathesis.py checks the same at large, with generated data."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from broadside.core import transport_urls
from broadside.core.transport_urls import MAX_URL
from broadside.delivery.identities import service
from tests.helpers import make_list
from webapp.apidocs.document import DOCUMENT
from webapp.apidocs.identities import TRANSPORT_PATTERN
from webapp.extensions import db


def valid(schema: str, body: Any) -> bool:
    return Draft202012Validator({"$ref": f"#/components/schemas/{schema}",
                                 "components": DOCUMENT["components"]}).is_valid(body)


def test_a_patch_must_change_something(client, api_headers):
    assert not valid("SubscriberPatch", {}) and valid("SubscriberPatch", {"name": "Ann"})
    assert not valid("BroadcastPatch", {}) and valid("BroadcastPatch", {"subject": "Hi"})
    weekly = make_list(db.session, 1).id
    draft = client.post("/api/broadcasts", headers=api_headers,
                        json={"list_id": weekly, "subject": "Hi", "body": "x"}).json["id"]
    for path in ("/api/subscribers/1", f"/api/broadcasts/{draft}"):
        refused = client.patch(path, headers=api_headers, json={})
        assert refused.status_code == 422 and "Nothing to change" in refused.json["error"], path


def test_a_broadcast_goes_to_a_list_or_a_segment_not_both(client, api_headers):
    both = {"list_id": 1, "segment_id": 1, "subject": "Hi", "body": "x"}
    assert not valid("BroadcastInput", both)
    assert not valid("BroadcastInput", {"subject": "Hi", "body": "x"})
    assert valid("BroadcastInput", {"list_id": 1, "subject": "Hi", "body": "x"})
    assert not valid("BroadcastPatch", {"list_id": 1, "segment_id": 2})
    assert valid("BroadcastPatch", {"list_id": 1, "segment_id": None})  # null clears it

    weekly = make_list(db.session, 1).id
    segment = client.post("/api/segments", headers=api_headers, json={"name": "All", "rules": {
        "all": [{"field": "list", "op": "is_on", "value": weekly}]}}).json["id"]
    both = {**both, "list_id": weekly, "segment_id": segment}
    refused = client.post("/api/broadcasts", headers=api_headers, json=both)
    assert refused.status_code == 422 and "not both" in refused.json["error"]
    neither = client.post("/api/broadcasts", headers=api_headers, json={"subject": "Hi", "body": "x"})
    assert neither.status_code == 422 and "'list_id' or 'segment_id'" in neither.json["error"]
    draft = client.post("/api/broadcasts", headers=api_headers,
                        json={"list_id": weekly, "subject": "Hi", "body": "x"}).json["id"]
    refused = client.patch(f"/api/broadcasts/{draft}", headers=api_headers,
                           json={"list_id": weekly, "segment_id": segment})
    assert refused.status_code == 422 and "not both" in refused.json["error"]


def identity(name: str = "Product", sender: str = "Product <p@acme.example>") -> dict[str, Any]:
    return {"name": name, "from": sender, "transport": "outbox://"}


def test_no_identity_may_be_called_default(client, api_headers):
    for name in ("default", "Default", "DEFAULT  "):
        assert not valid("IdentityInput", identity(name)), name
        refused = client.post("/api/identities", headers=api_headers, json=identity(name))
        assert refused.status_code == 422 and "“default”" in refused.json["error"], name
    assert valid("IdentityInput", identity("Defaults"))
    assert client.post("/api/identities", headers=api_headers,
                       json=identity("Defaults")).status_code == 201


FROMS_ACCEPTED = ("p@acme.example", "Product <p@acme.example>", " Ada <ada@example.com> ",
                  '"Acme, Inc." <news@acme.example>', "Zoë SS <zoe@mail.example.de>",
                  "first.middle.last+tag@sub.acme.example")
FROMS_REFUSED = ("Broadside <newsletter@localhost>", "news@acme", "a@b.test", "a@shop.local",
                 "Acme <news@acme.\nexample>", "Acme, Inc. <news@acme.example>",
                 "Acme <news@acme.example", "<>", "Acme news@acme.example", "x@-acme.example")


def test_the_from_has_one_pattern_in_the_document_and_the_server(client, api_headers):
    schema = DOCUMENT["components"]["schemas"]["IdentityInput"]["properties"]["from"]
    assert schema["pattern"] == service.FROM_PATTERN
    for number, sender in enumerate(FROMS_ACCEPTED):
        assert valid("IdentityInput", identity(sender=sender)), sender
        created = client.post("/api/identities", headers=api_headers,
                              json=identity(f"Accepted {number}", sender))
        assert created.status_code == 201, (sender, created.json)
    for sender in FROMS_REFUSED:
        assert not valid("IdentityInput", identity(sender=sender)), sender
        refused = client.post("/api/identities", headers=api_headers, json=identity(sender=sender))
        assert refused.status_code == 422 and re.search("From|address", refused.json["error"]), sender
    # A line break at the very end too (ECMA's `$`, which the document's readers use, ends the
    # text there; Python's `re.search`, which jsonschema uses, lets one newline through).
    refused = client.post("/api/identities", headers=api_headers,
                          json=identity(sender="Acme <news@acme.example>\n"))
    assert refused.status_code == 422 and "From" in refused.json["error"]


def test_a_list_id_past_the_id_range_is_no_list(client, api_headers):
    """Found by tests/webapp/test_api_schemathesis.py: on PostgreSQL such an id in `lists`
    answered 500 (integer out of range) instead of naming the list that does not exist."""
    response = client.post("/api/subscribers", headers=api_headers,
                           json={"email": "ann@example.com", "lists": [2**31, 20339332566931]})
    assert response.status_code == 422 and "There is no list with id 2147483648" in response.json["error"]
    assert client.get("/api/subscribers", headers=api_headers).json["items"] == []


def test_a_condition_has_the_value_its_operator_needs(client, api_headers):
    def rules(*conditions: dict[str, Any]) -> dict[str, Any]:
        return {"name": "Some", "rules": {"all": list(conditions)}}

    refused = [{"field": "name", "op": "contains"}, {"field": "list", "op": "is_on"},
               {"field": "joined", "op": "within_days"},
               {"field": "joined", "op": "before", "value": 30},
               {"field": "joined", "op": "within_days", "value": "2026-01-31"},
               {"field": "email", "op": "ends_with", "value": " \x85"},
               {"field": "attributes.city", "op": "contains", "value": None},
               {"field": "attributes.city", "op": "exists", "value": "x"},
               {"field": "attributes.age", "op": "gt", "value": "many"},
               {"field": "attributes.\x07", "op": "exists"}, {"field": "attributes. ", "op": "exists"}]
    for condition in refused:
        assert not valid("SegmentInput", rules(condition)), condition
        response = client.post("/api/segments", headers=api_headers, json=rules(condition))
        assert response.status_code == 422 and "Condition 1" in response.json["error"], condition
    accepted = [{"field": "attributes.city", "op": "exists"},
                {"field": "attributes.age", "op": "gt", "value": " 4.5 "},
                {"field": "attributes.city", "op": "equals", "value": 7},
                {"field": "attributes.day", "op": "before", "value": "2026-01-31"}]
    for number, condition in enumerate(accepted):
        assert valid("SegmentInput", rules(condition)), condition
        body = {**rules(condition), "name": f"Some {number}"}
        assert client.post("/api/segments", headers=api_headers, json=body).status_code == 201, condition


def test_addresses_and_attribute_names_the_server_refuses_are_refused_by_the_document(
        client, api_headers):
    for email in ("ann@example.test", "ann@localhost", "ann@shop.LOCAL"):
        assert not valid("SubscriberInput", {"email": email}), email
        assert client.post("/api/subscribers", headers=api_headers,
                           json={"email": email}).status_code == 422, email
    for attributes in ({"": 1}, {"  ": 1}, {" Email ": 1}, {"name": "x"}, {"city": "x" * 1001}):
        assert not valid("SubscriberInput", {"email": "ann@example.com", "attributes": attributes})
        response = client.post("/api/subscribers", headers=api_headers,
                               json={"email": "ann@example.com", "attributes": attributes})
        assert response.status_code == 422, attributes
    assert valid("SubscriberInput", {"email": "ann@example.com", "attributes": {"city": "Berlin"}})


def test_a_bulk_action_takes_ids_or_a_filter(client, api_headers):
    weekly = make_list(db.session, 1).id
    both = {"action": "add", "list_id": weekly, "ids": [1], "filter": {"q": "reader"}}
    assert not valid("BulkInput", both)
    assert not valid("BulkInput", {"action": "add", "list_id": weekly})
    assert valid("BulkInput", {"action": "add", "list_id": weekly, "ids": [1]})
    for body in (both, {"action": "add", "list_id": weekly}):
        response = client.post("/api/subscribers/bulk", headers=api_headers, json=body)
        assert response.status_code == 422 and "not both" in response.json["error"], body


@settings(max_examples=400, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.from_regex(TRANSPORT_PATTERN, fullmatch=True).filter(lambda url: len(url) <= MAX_URL))
def test_every_transport_url_the_document_allows_is_one_the_server_takes(url):
    transport_urls.check_transport_url(url)  # raises TransportUrlError when it refuses one


def test_transport_urls_the_server_refuses_are_refused_by_the_document(client, api_headers):
    for url in ("outbox:", "0000", "http://smtp.example.com", "smtp://", "ses://KEY@eu-west-1",
                "postmark://TOKEN@host.example", "mailgun://KEY@localhost", "smtp://h?x=1",
                "resend://KEY@?stream=s", "postmark://T@?endpoint=http://169.254.169.254"):
        assert not valid("IdentityInput", {**identity(), "transport": url}), url
        refused = client.post("/api/identities", headers=api_headers,
                              json={**identity(), "transport": url})
        assert refused.status_code == 422, url
    assert valid("IdentityInput", {**identity(), "transport": " smtps://u:p%2Fw@mail.example.com:465 "})


def test_a_named_identitys_from_as_shown_is_one_the_api_accepts(client, api_headers):
    shown = []
    for number, sender in enumerate(("Zoë Brandt <zoe@acme.example>", '"Acme, Inc." <n@acme.example>')):
        created = client.post("/api/identities", headers=api_headers,
                              json=identity(f"Shown {number}", sender)).json
        assert valid("Identity", created), created
        shown.append(created)
        again = client.put(f"/api/identities/{created['id']}", headers=api_headers,
                           json={"name": created["name"], "from": created["from"]})
        assert again.status_code == 200 and again.json == created, again.json  # unchanged
    # As typed: not the header's encoded word (=?utf-8?q?Zo=C3=AB...?=), which a PUT would
    # have stored as the name.
    assert [i["from"] for i in shown] == ["Zoë Brandt <zoe@acme.example>",
                                          '"Acme, Inc." <n@acme.example>']
    assert not valid("Identity", {**shown[0], "from": "Broadside <newsletter@localhost>"})
    # The default's is the environment's, shown as it is (here the stock placeholder).
    default = client.get("/api/identities", headers=api_headers).json[0]
    assert default["default"] and valid("Identity", default)
