"""A broadcast's A/B test over the API, on both databases: given on POST and PATCH (null
removes it, `default` a letter), refused with a 422 naming the field and nothing written,
409 once sent, shown by GET with the result of a decided test, and described by the
OpenAPI document (the responses validated against it)."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator
from sqlalchemy import func, select

from broadside.campaigns.broadcasts import ab_tests
from broadside.core.models import AuditEntry, Broadcast, MailingList
from webapp.apidocs.document import DOCUMENT
from webapp.extensions import db

TEST = {"variants": [{"subject": "Hi"}, {"subject": "Hello there", "body": "Other body"}],
        "share": 10, "measure": "clicks", "wait_hours": 2, "default": "B"}
STORED = {"variants": [{"subject": "Hi", "preheader": "", "body": ""},
                       {"subject": "Hello there", "preheader": "", "body": "Other body"}],
          "share": 10, "measure": "clicks", "wait_hours": 2, "default": "B"}


@pytest.fixture
def news(app) -> MailingList:
    mailing_list = MailingList(name="News", per_person_tracking=True)
    db.session.add(mailing_list)
    db.session.commit()
    return mailing_list


def valid(schema_name: str, instance) -> None:
    """`instance` fits the document's schema (its references resolved against the document)."""
    schema = {**DOCUMENT["components"]["schemas"][schema_name], "components": DOCUMENT["components"]}
    errors = [e.message for e in Draft202012Validator(schema).iter_errors(instance)]
    assert not errors, errors


def test_a_test_is_given_shown_changed_and_removed(client, api_headers, news):
    created = client.post("/api/broadcasts", headers=api_headers, json={
        "list_id": news.id, "subject": "Hi", "body": "Hello", "ab_test": TEST})
    assert created.status_code == 201, created.json
    broadcast_id = created.json["id"]
    detail = client.get(f"/api/broadcasts/{broadcast_id}", headers=api_headers).json
    assert detail["ab_test"] == STORED and detail["ab_result"] is None
    valid("BroadcastDetail", detail)
    # The subject changes: variant A with it. Four variants, the default by letter.
    patched = client.patch(f"/api/broadcasts/{broadcast_id}", headers=api_headers, json={
        "subject": "Hey", "ab_test": {"variants": [{}, {"subject": "B"}, {"subject": "C"},
                                                   {"subject": "D", "preheader": "P"}],
                                      "default": "D"}})
    assert patched.status_code == 200, patched.json
    valid("Broadcast", patched.json)
    assert patched.json["ab_test"] == {
        "variants": [{"subject": "Hey", "preheader": "", "body": ""},
                     {"subject": "B", "preheader": "", "body": ""},
                     {"subject": "C", "preheader": "", "body": ""},
                     {"subject": "D", "preheader": "P", "body": ""}],
        "share": 20, "measure": "opens", "wait_hours": 4, "default": "D"}
    again = client.patch(f"/api/broadcasts/{broadcast_id}", headers=api_headers,
                         json={"subject": "Hey you"})
    assert again.json["ab_test"]["variants"][0]["subject"] == "Hey you"
    listed = client.get("/api/broadcasts", headers=api_headers).json["items"][0]
    assert listed["ab_test"]["default"] == "D"
    edits = audited(broadcast_id)
    removed = client.patch(f"/api/broadcasts/{broadcast_id}", headers=api_headers,
                           json={"ab_test": None})
    assert removed.status_code == 200 and removed.json["ab_test"] is None
    assert audited(broadcast_id) == edits + 1  # audited as any other edit of the draft


def audited(broadcast_id: int) -> int:
    return db.session.scalar(select(func.count()).select_from(AuditEntry).where(
        AuditEntry.action == "broadcast.edit", AuditEntry.object_id == str(broadcast_id)))


@pytest.mark.parametrize("test, field, said", [
    ("yes", "ab_test", "must be an object"),
    ({"variants": [{"subject": "Hi"}]}, "ab_test.variants", "from 2 to 4 variants"),
    ({"variants": [{}, {"subject": ""}]}, "ab_test.variants[1].subject", "Variant B needs a subject"),
    ({"variants": [{}, {"subject": 5}]}, "ab_test.variants[1].subject", "must be text"),
    ({"variants": [{}, "B"]}, "ab_test.variants[1]", "must be an object"),
    ({"variants": [{}, {"subject": "Hi"}]}, "ab_test.variants[1].subject", "same"),
    ({"variants": [{"subject": "Other"}, {"subject": "B"}]}, "ab_test.variants[0].subject",
     "Variant A is the broadcast itself"),
    ({"variants": [{"body": "x"}, {"subject": "B"}]}, "ab_test.variants[0].body",
     "Variant A is the broadcast itself"),
    ({"variants": [{}, {"subject": "B"}], "share": 60}, "ab_test.share", "from 5 to 50"),
    ({"variants": [{}, {"subject": "B"}], "share": True}, "ab_test.share", "whole number"),
    ({"variants": [{}, {"subject": "B"}], "measure": "likes"}, "ab_test.measure", "opens or clicks"),
    ({"variants": [{}, {"subject": "B"}], "wait_hours": 100}, "ab_test.wait_hours", "1 to 72"),
    ({"variants": [{}, {"subject": "B"}], "default": "C"}, "ab_test.default", "one of the variants"),
    ({"variants": [{}, {"subject": "B"}], "default": 1}, "ab_test.default", "\"A\" to \"D\""),
    ({"variants": [{}, {"subject": "B"}], "share": "20"}, "ab_test.share", "whole number"),
    ({"variants": [{}, {"subject": "B\nBcc: x"}]}, "ab_test.variants[1].subject", "one line"),
    ({"variants": [{"subject": 7}, {"subject": "B"}]}, "ab_test.variants[0].subject",
     "must be text"),
])
def test_a_refused_test_names_its_field_and_writes_nothing(client, api_headers, news, test,
                                                           field, said):
    before = db.session.query(Broadcast).count()
    refused = client.post("/api/broadcasts", headers=api_headers, json={
        "list_id": news.id, "subject": "Hi", "body": "Hello", "ab_test": test})
    assert refused.status_code == 422, refused.json
    assert refused.json["field"] == field and said in refused.json["error"], refused.json
    assert db.session.query(Broadcast).count() == before  # no draft made
    draft = client.post("/api/broadcasts", headers=api_headers, json={
        "list_id": news.id, "subject": "Hi", "body": "Hello"}).json["id"]
    refused = client.patch(f"/api/broadcasts/{draft}", headers=api_headers,
                           json={"preheader": "Changed", "ab_test": test})
    assert refused.status_code == 422 and refused.json["field"] == field, refused.json
    db.session.expire_all()
    saved = db.session.get(Broadcast, draft)
    assert saved.preheader == "" and saved.ab_test is None  # nothing half-written


def test_a_sent_broadcast_shows_the_result_and_its_test_is_frozen(client, api_headers, news):
    broadcast_id = client.post("/api/broadcasts", headers=api_headers, json={
        "list_id": news.id, "subject": "Hi", "body": "Hello", "ab_test": TEST}).json["id"]
    figures = [ab_tests.VariantFigures(0, 200, 10), ab_tests.VariantFigures(1, 200, 40)]
    verdict = ab_tests.judge(figures, 0)
    broadcast = db.session.get(Broadcast, broadcast_id)
    broadcast.status, broadcast.ab_seed, broadcast.ab_winner = "sent", 7, verdict.winner
    broadcast.ab_result = ab_tests.result_record(figures, verdict, "clicks")
    db.session.commit()
    detail = client.get(f"/api/broadcasts/{broadcast_id}", headers=api_headers).json
    valid("BroadcastDetail", detail)
    result = detail["ab_result"]
    assert result["phase"] == "decided" and result["winner"] == "B" and result["clear"] is True
    assert result["p_value"] == round(verdict.p_value, 6) < 0.05
    low, high = ab_tests.wilson_interval(40, 200)
    assert result["variants"][1] == {"variant": "B", "subject": "Hello there", "sent": 200,
                                     "hits": 40, "rate": 0.2, "low": round(low, 6),
                                     "high": round(high, 6)}
    refused = client.patch(f"/api/broadcasts/{broadcast_id}", headers=api_headers,
                           json={"ab_test": None})
    assert refused.status_code == 409


def test_the_document_describes_the_test():
    schemas = DOCUMENT["components"]["schemas"]
    for name in ("BroadcastInput", "BroadcastPatch", "Broadcast", "BroadcastDetail"):
        assert "ab_test" in schemas[name]["properties"], name
    assert "ab_result" in schemas["BroadcastDetail"]["properties"]
    assert schemas["BroadcastInput"]["properties"]["ab_test"]["properties"]["default"]["enum"] == \
        ["A", "B", "C", "D"]
