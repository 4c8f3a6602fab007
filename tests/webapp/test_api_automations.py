"""The automations API, held to its contract on SQLite and PostgreSQL: create, list, read
with each step's counts, replace (a new revision for changed content), enable, disable,
delete; every refusal is a JSON error naming the problem and writes nothing; and the welcome
hooks of the subscribers API and of the CSV import."""

from __future__ import annotations

import io

import pytest
from sqlalchemy import func, select

from broadside.audience.transfer import importer
from broadside.campaigns.automations import entering
from broadside.core import accounts
from broadside.core.models import (
    Automation,
    AutomationEntry,
    AutomationMessage,
    AutomationRevision,
    Import,
    Subscriber,
    Subscription,
    WebhookMessage,
)
from broadside.webhooks import endpoints
from tests.helpers import make_list
from webapp.extensions import db

# Every email prints a postal address: automations need Settings' to be enabled and to send.
pytestmark = pytest.mark.usefixtures("postal_address")

STEPS = [{"delay": "PT0S", "subject": "Welcome, {{ name }}", "body": "Glad you came."},
         {"delay": "P3D", "subject": "Three tips", "preheader": "Start here", "body": "1. Read"}]
ZERO = {"pending": 0, "sending": 0, "sent": 0, "skipped": 0, "failed": 0, "unknown": 0}


def welcome_body(list_id: int, name: str = "Welcome", steps=None, **extra) -> dict:
    return {"name": name, "trigger": {"type": "joined_list", "list_id": list_id},
            "steps": STEPS if steps is None else steps, **extra}


def create(client, headers, body):
    return client.post("/api/automations", headers=headers, json=body)


def automation_count() -> int:
    return db.session.scalar(select(func.count()).select_from(Automation)) or 0


def entries(automation_id: int | None = None) -> list[tuple[int, str]]:
    query = select(AutomationEntry.subscriber_id, AutomationEntry.source)
    if automation_id is not None:
        query = query.where(AutomationEntry.automation_id == automation_id)
    return sorted(tuple(row) for row in db.session.execute(query))


def person_id(email: str) -> int:
    return db.session.scalar(select(Subscriber.id).where(Subscriber.email == email))


def enabled_welcome(client, headers, list_id: int, name: str = "Welcome") -> int:
    created = create(client, headers, welcome_body(list_id, name))
    assert created.status_code == 201, created.json
    automation_id = created.json["id"]
    assert client.post(f"/api/automations/{automation_id}/enable", headers=headers).status_code == 200
    return automation_id


# ---------------------------------------------------------------- the round trip

def test_create_read_replace_enable_disable_and_delete(client, api_headers):
    weekly = make_list(db.session, 0).id
    created = create(client, api_headers, welcome_body(weekly, "  Welcome   series "))
    assert created.status_code == 201
    body = created.json
    assert set(body) == {"id", "name", "status", "pause_reason", "trigger", "priority",
                         "record_only", "identity_id", "entered", "created_at", "updated_at", "steps",
                         "feed"}
    assert body["feed"] is None  # a feed trigger's only
    assert body["name"] == "Welcome series"  # spaces collapsed
    assert body["status"] == "disabled" and body["pause_reason"] is None
    assert body["trigger"] == {"type": "joined_list", "list_id": weekly}
    assert (body["priority"], body["record_only"], body["entered"]) == (0, False, 0)
    assert body["created_at"].endswith("Z") and body["updated_at"].endswith("Z")
    first, second = body["steps"]
    assert set(first) == {"id", "position", "delay", "delay_seconds", "subject", "preheader",
                          "body", "format", "text", "revision_id", "codes", "attachments", "versions",
                          "counts"}
    assert (first["position"], first["delay"], first["delay_seconds"]) == (1, "PT0S", 0)
    assert (second["position"], second["delay"], second["delay_seconds"]) == (2, "P3D", 3 * 86400)
    assert second["subject"] == "Three tips" and second["preheader"] == "Start here"
    assert first["preheader"] == "" and first["body"] == "Glad you came."
    assert isinstance(first["revision_id"], int) and first["revision_id"] != second["revision_id"]
    assert first["counts"] == ZERO and second["counts"] == ZERO
    automation_id = body["id"]
    one = f"/api/automations/{automation_id}"

    assert client.get(one, headers=api_headers).json == body
    assert client.get("/api/automations", headers=api_headers).json == [body]

    # Replaced: the first step unchanged keeps its revision; the second's new content gets
    # a new one; a third step is added.
    replaced = client.put(one, headers=api_headers, json={
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly},
        "priority": 7, "record_only": False,
        "steps": [STEPS[0], {**STEPS[1], "body": "1. Read\n2. Write", "delay": "p2d"},
                  {"delay": "P1W", "subject": "A week in", "body": "How is it going?"}]})
    assert replaced.status_code == 200, replaced.json
    after = replaced.json
    assert (after["id"], after["name"], after["priority"]) == (automation_id, "Welcome", 7)
    assert [s["id"] for s in after["steps"][:2]] == [first["id"], second["id"]]  # by position
    assert after["steps"][0]["revision_id"] == first["revision_id"]
    assert after["steps"][1]["revision_id"] not in (None, second["revision_id"])
    assert after["steps"][1]["delay"] == "P2D" and after["steps"][1]["delay_seconds"] == 2 * 86400
    assert after["steps"][2]["position"] == 3 and after["steps"][2]["delay_seconds"] == 7 * 86400
    assert client.get(one, headers=api_headers).json == after

    enabled = client.post(one + "/enable", headers=api_headers)
    assert enabled.status_code == 200 and enabled.json["status"] == "enabled"
    again = client.post(one + "/enable", headers=api_headers)  # idempotent
    assert again.status_code == 200 and again.json["status"] == "enabled"
    disabled = client.post(one + "/disable", headers=api_headers)
    assert disabled.status_code == 200 and disabled.json["status"] == "disabled"
    assert client.post(one + "/disable", headers=api_headers).json["status"] == "disabled"

    assert client.delete(one, headers=api_headers).status_code == 204
    for method, path in (("get", one), ("put", one), ("delete", one), ("post", one + "/enable"),
                         ("post", one + "/disable")):
        gone = getattr(client, method)(path, headers=api_headers, json=welcome_body(weekly))
        assert gone.status_code == 404, (method, path)
        assert gone.json == {"error": "There is no such automation."}
    assert client.get("/api/automations", headers=api_headers).json == []
    # Kept for the send log, as deleted; its name is free again.
    assert db.session.get(Automation, automation_id).status == "deleted"
    assert create(client, api_headers, welcome_body(weekly, "Welcome")).status_code == 201


def test_a_segment_trigger_and_the_order_of_the_list(client, api_headers):
    weekly = make_list(db.session, 0).id
    segment = client.post("/api/segments", headers=api_headers, json={
        "name": "Everyone", "rules": {"all": [{"field": "list", "op": "is_on", "value": weekly}]}})
    low = create(client, api_headers, welcome_body(weekly, "Low", priority=-5)).json["id"]
    campaign = create(client, api_headers, {
        "name": "Win back", "trigger": {"type": "segment", "segment_id": segment.json["id"],
                                        "every_hours": 24},
        "priority": 10, "steps": [{"delay": "PT12H", "subject": "We miss you", "body": "x"}]})
    assert campaign.status_code == 201, campaign.json
    assert campaign.json["trigger"] == {"type": "segment", "segment_id": segment.json["id"],
                                        "every_hours": 24}
    plain = create(client, api_headers, welcome_body(weekly, "Plain")).json["id"]
    listed = client.get("/api/automations", headers=api_headers).json
    assert [a["id"] for a in listed] == [campaign.json["id"], plain, low]  # highest priority first
    # every_hours is optional: 12.
    other = create(client, api_headers, {
        "name": "Other", "trigger": {"type": "segment", "segment_id": segment.json["id"]},
        "steps": []})
    assert other.json["trigger"]["every_hours"] == 12 and other.json["steps"] == []


def test_get_shows_each_steps_counts_and_who_entered(app, client, api_headers):
    weekly = make_list(db.session, 3)
    automation_id = enabled_welcome(client, api_headers, weekly.id)
    people = list(db.session.scalars(select(Subscriber.id).order_by(Subscriber.id)))
    assert entering.enter_joined(db.session, weekly.id, people, source="joined") == 3
    db.session.commit()
    one = f"/api/automations/{automation_id}"

    shown = client.get(one, headers=api_headers).json
    assert shown["entered"] == 3
    assert [s["counts"] for s in shown["steps"]] == [{**ZERO, "pending": 3}] * 2
    assert client.get("/api/automations", headers=api_headers).json == [shown]

    # New content for step 2 reaches its messages not yet due; step 3 removed: skipped.
    client.put(one, headers=api_headers, json=welcome_body(weekly.id, steps=[
        STEPS[0], {**STEPS[1], "subject": "Four tips"}, {"delay": "P5D", "subject": "x", "body": "y"}]))
    replaced = client.put(one, headers=api_headers, json=welcome_body(weekly.id, steps=[
        STEPS[0], {**STEPS[1], "subject": "Five tips"}]))
    assert replaced.status_code == 200
    step_two = replaced.json["steps"][1]
    assert step_two["subject"] == "Five tips"
    revisions = set(db.session.scalars(select(AutomationMessage.revision_id)
                                       .where(AutomationMessage.step_id == step_two["id"])))
    assert revisions == {step_two["revision_id"]}
    assert db.session.get(AutomationRevision, step_two["revision_id"]).subject == "Five tips"
    assert [s["counts"] for s in replaced.json["steps"]] == [{**ZERO, "pending": 3}] * 2

    # Deleting skips what was pending; the counts say so (read from the rows).
    assert client.delete(one, headers=api_headers).status_code == 204
    statuses = db.session.execute(select(AutomationMessage.status, func.count())
                                  .where(AutomationMessage.automation_id == automation_id)
                                  .group_by(AutomationMessage.status)).all()
    assert dict(statuses) == {"skipped": 6}


def test_record_only_needs_no_step_but_others_do(client, api_headers):
    weekly = make_list(db.session, 0).id
    empty = create(client, api_headers, welcome_body(weekly, "Empty", steps=[])).json["id"]
    refused = client.post(f"/api/automations/{empty}/enable", headers=api_headers)
    assert refused.status_code == 422 and "at least one step" in refused.json["error"]
    assert db.session.get(Automation, empty).status == "disabled"
    logged = create(client, api_headers, welcome_body(weekly, "Log", steps=[], record_only=True))
    assert logged.json["record_only"] is True
    enabled = client.post(f"/api/automations/{logged.json['id']}/enable", headers=api_headers)
    assert enabled.status_code == 200 and enabled.json["status"] == "enabled"


# ---------------------------------------------------------------- refusals

@pytest.mark.parametrize(("change", "message"), [
    ({"colour": "red"}, "Unknown field 'colour'"),
    ({"steps": None}, "steps must be a list"),
    ({"name": "   "}, "Give the name"),
    ({"name": 5}, "The name must be text"),
    ({"name": "x" * 201}, "The name is too long"),
    ({"trigger": {"type": "opened", "list_id": 1}}, "The trigger must be"),
    ({"trigger": "weekly"}, "The trigger must be"),
    ({"trigger": {"type": "joined_list", "list_id": 999}}, "There is no list with id 999"),
    ({"trigger": {"type": "joined_list", "list_id": "1"}}, "list_id must be a list's id"),
    ({"trigger": {"type": "joined_list", "list_id": 2**31}},
     "list_id must be an id: a whole number from 1 to 2147483647"),
    ({"trigger": {"type": "segment", "segment_id": 2**63}},
     "segment_id must be an id: a whole number from 1 to 2147483647"),
    ({"trigger": {"type": "segment", "segment_id": 999}}, "There is no segment with id 999"),
    ({"trigger": {"type": "joined_list", "list_id": 1, "every_hours": 3}},
     'A "joined_list" trigger has only type and list_id'),
    ({"priority": 10**6}, "priority must be a whole number from -1000 to 1000"),
    ({"priority": 1.5}, "priority must be a whole number"),
    ({"priority": True}, "priority must be a whole number"),
    ({"record_only": "yes"}, "record_only must be true or false"),
    ({"steps": [{"delay": "P1M", "subject": "x", "body": "y"}]},
     "Step 1: the delay 'P1M' uses years or months"),
    ({"steps": [STEPS[0], {"delay": "3 days", "subject": "x", "body": "y"}]},
     "Step 2: the delay '3 days' is not a duration"),
    ({"steps": [{"delay": "P400D", "subject": "x", "body": "y"}]}, "longer than 366 days"),
    ({"steps": [{"delay": 60, "subject": "x", "body": "y"}]}, "Step 1: the delay must be"),
    ({"steps": [{"subject": "  ", "body": "y"}]}, "Give the subject of step 1"),
    ({"steps": [STEPS[0], {"subject": "x", "bdy": "y"}]}, "Step 2: unknown field bdy"),
    ({"steps": [STEPS[0], "hello"]}, "Step 2 must be an object"),
    ({"steps": [{"subject": "Hi {{ name", "body": "y"}]}, "Step 1:"),
    ({"steps": [STEPS[0]] * 21}, "at most 20 steps"),
])
def test_a_bad_body_is_422_with_a_message_and_writes_nothing(client, api_headers, change, message):
    weekly = make_list(db.session, 0).id
    response = create(client, api_headers, {**welcome_body(weekly), **change})
    assert response.status_code == 422, response.json
    assert message in response.json["error"], response.json
    assert automation_count() == 0


@pytest.mark.parametrize(("missing", "message"), [
    ("name", "'name' is required"), ("trigger", "'trigger' is required"),
    ("steps", "'steps' is required"),
])
def test_required_fields(client, api_headers, missing, message):
    weekly = make_list(db.session, 0).id
    body = welcome_body(weekly)
    del body[missing]
    response = create(client, api_headers, body)
    assert response.status_code == 422 and message in response.json["error"]
    assert automation_count() == 0


@pytest.mark.parametrize("raw", [
    "not json", "[1, 2]", '"Welcome"', "{", "null",
    '{"name": "N", "trigger": {"type": "joined_list", "list_id": NaN}, "steps": []}',
    '{"name": "N", "trigger": {"type": "joined_list", "list_id": 1}, "priority": 1e999, "steps": []}',
    '{"name": "N", "trigger": {"type": "joined_list", "list_id": 1}, "priority": '
    + "9" * 5000 + ', "steps": []}',
    '{"name": "N", "steps": ' + "[" * 40 + "]" * 40 + "}",
    # A lone surrogate: valid JSON, but no database stores it (a 500 before).
    '{"name": "N\\ud800", "trigger": {"type": "joined_list", "list_id": 1}, "steps": []}',
    '{"name": "N", "trigger": {"type": "joined_list", "list_id": 1}, '
    '"steps": [{"subject": "\\udfff", "body": "x"}]}',
])
def test_malformed_json_is_422_never_a_500(client, api_headers, raw):
    make_list(db.session, 0)
    response = client.post("/api/automations", data=raw,
                           headers={**api_headers, "Content-Type": "application/json"})
    assert response.status_code == 422 and response.json["error"]
    assert automation_count() == 0


def test_a_json_body_needs_the_json_content_type(client, api_headers):
    weekly = make_list(db.session, 0).id
    response = client.post("/api/automations", data=str(welcome_body(weekly)),
                           headers={**api_headers, "Content-Type": "text/plain"})
    assert response.status_code == 422 and "application/json" in response.json["error"]


def test_names_are_unique_ignoring_case(client, api_headers):
    weekly = make_list(db.session, 0).id
    create(client, api_headers, welcome_body(weekly, "Welcome"))
    other = create(client, api_headers, welcome_body(weekly, "Onboarding")).json["id"]
    taken = create(client, api_headers, welcome_body(weekly, "WELCOME"))
    assert taken.status_code == 409 and "already exists" in taken.json["error"]
    renamed = client.put(f"/api/automations/{other}", headers=api_headers,
                         json=welcome_body(weekly, "welcome"))
    assert renamed.status_code == 409
    assert client.get(f"/api/automations/{other}", headers=api_headers).json["name"] == "Onboarding"
    assert automation_count() == 2


def test_a_refused_replacement_changes_nothing(client, api_headers):
    weekly = make_list(db.session, 0).id
    automation_id = create(client, api_headers, welcome_body(weekly)).json["id"]
    before = client.get(f"/api/automations/{automation_id}", headers=api_headers).json
    for body in (welcome_body(weekly, "Renamed", steps=[STEPS[0], {"subject": "{{ oops", "body": ""}]),
                 welcome_body(weekly, "Renamed", steps=[{"delay": "P1Y", "subject": "x"}]),
                 {**welcome_body(weekly), "steps": "none"}):
        response = client.put(f"/api/automations/{automation_id}", headers=api_headers, json=body)
        assert response.status_code == 422, response.json
    db.session.expire_all()
    assert client.get(f"/api/automations/{automation_id}", headers=api_headers).json == before


@pytest.mark.parametrize(("method", "path"), [
    ("get", "/api/automations/999"), ("put", "/api/automations/999"),
    ("delete", "/api/automations/999"), ("post", "/api/automations/999/enable"),
    ("post", "/api/automations/999/disable"), ("get", f"/api/automations/{2**40}"),
])
def test_an_unknown_automation_is_a_json_404(client, api_headers, method, path):
    weekly = make_list(db.session, 0).id
    response = getattr(client, method)(path, headers=api_headers, json=welcome_body(weekly))
    assert response.status_code == 404 and response.json["error"]


def test_a_read_only_token_reads_automations_but_changes_none(client, owner, api_headers):
    weekly = make_list(db.session, 0).id
    automation_id = create(client, api_headers, welcome_body(weekly)).json["id"]
    _, token = accounts.create_token(db.session, owner.id, "reports", read_only=True)
    read_only = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/automations", headers=read_only).status_code == 200
    assert client.get(f"/api/automations/{automation_id}", headers=read_only).status_code == 200
    one = f"/api/automations/{automation_id}"
    for method, path in (("post", "/api/automations"), ("put", one), ("delete", one),
                         ("post", one + "/enable"), ("post", one + "/disable")):
        response = getattr(client, method)(path, headers=read_only,
                                           json=welcome_body(weekly, "Sneaky"))
        assert response.status_code == 403 and "read-only" in response.json["error"], (method, path)
    shown = client.get(one, headers=read_only).json
    assert (shown["name"], shown["status"]) == ("Welcome", "disabled")
    assert automation_count() == 1


def test_automations_need_a_token(client, app):
    assert client.get("/api/automations").status_code == 401
    assert client.post("/api/automations", json={"name": "x"}).status_code == 401
    assert automation_count() == 0


# ---------------------------------------------------------------- welcome hooks

def test_the_subscribers_api_welcomes_only_when_asked(client, api_headers):
    weekly = make_list(db.session, 0).id
    automation_id = enabled_welcome(client, api_headers, weekly)

    def save(email, **extra):
        return client.post("/api/subscribers", headers=api_headers,
                           json={"email": email, "lists": [weekly], **extra})

    assert save("ann@example.com", welcome=True).status_code == 201
    assert save("bob@example.com").status_code == 201
    assert save("cy@example.com", welcome=False).status_code == 201
    assert entries(automation_id) == [(person_id("ann@example.com"), "joined")]
    # Both steps are written for her, pending.
    assert db.session.scalar(select(func.count()).select_from(AutomationMessage)
                             .where(AutomationMessage.automation_id == automation_id)) == 2
    # Bob is on the list already: saving him again with welcome does not welcome him.
    assert save("bob@example.com", welcome=True).status_code == 200
    assert entries(automation_id) == [(person_id("ann@example.com"), "joined")]
    # A new list for a known person is a join: welcomed there.
    monthly = make_list(db.session, 0, "Monthly").id
    monthly_welcome = enabled_welcome(client, api_headers, monthly, "Monthly welcome")
    assert client.post("/api/subscribers", headers=api_headers, json={
        "email": "bob@example.com", "lists": [weekly, monthly], "welcome": True}).status_code == 200
    assert entries(monthly_welcome) == [(person_id("bob@example.com"), "joined")]
    assert entries(automation_id) == [(person_id("ann@example.com"), "joined")]


@pytest.mark.parametrize("value", ["yes", 1, "true", None, [True]])
def test_welcome_must_be_a_boolean(client, api_headers, value):
    weekly = make_list(db.session, 0).id
    enabled_welcome(client, api_headers, weekly)
    response = client.post("/api/subscribers", headers=api_headers,
                           json={"email": "ann@example.com", "lists": [weekly], "welcome": value})
    message = ("'welcome' cannot be null" if value is None  # null only where documented
               else '"welcome" must be true or false')
    assert response.status_code == 422 and message in response.json["error"]
    assert person_id("ann@example.com") is None
    assert entries() == []


def _prepare_import(client, api_headers) -> tuple[int, int]:
    """A list with Ann on it, Bob known but on another list, and its enabled welcome."""
    weekly = make_list(db.session, 0).id
    other = make_list(db.session, 0, "Other").id
    for email, list_id in (("ann@example.com", weekly), ("bob@example.com", other)):
        assert client.post("/api/subscribers", headers=api_headers,
                           json={"email": email, "lists": [list_id]}).status_code == 201
    return weekly, enabled_welcome(client, api_headers, weekly)


CSV = (b"email,name\nann@example.com,Ann\nbob@example.com,Bob\ncy@example.com,Cy\n"
       b"dee@example.com,Dee\nnot-an-address,X\n")


def _import(client, api_headers, list_id, query="", **fields):
    return client.post(f"/api/lists/{list_id}/import{query}", headers=api_headers,
                       content_type="multipart/form-data",
                       data={"file": (io.BytesIO(CSV), "people.csv"), "consent": "opted_in",
                             **fields})


@pytest.mark.parametrize("value", ["1", "true"])
def test_an_import_with_welcome_enters_exactly_the_people_it_added(client, api_headers, value):
    weekly, automation_id = _prepare_import(client, api_headers)
    response = _import(client, api_headers, weekly, welcome=value)
    assert response.status_code == 200, response.json
    assert response.json["imported"] == 3 and len(response.json["rejected"]) == 1
    added = sorted((person_id(e), "import") for e in ("bob@example.com", "cy@example.com",
                                                      "dee@example.com"))
    assert entries(automation_id) == added  # not Ann: she was on the list already
    assert db.session.scalar(select(Import.welcome)) is True


def test_each_kind_of_import_batch_welcomes_and_announces_exactly_the_people_it_added(
        monkeypatch, client, api_headers):
    """Batches of two: only new addresses (PostgreSQL writes them in one statement), a known
    person on the list with a new one, two known people from another list, a last new one;
    then the same file again. The welcome entries and the `subscriber.created` webhook events
    are the people each batch put on the list, and a re-import makes none."""
    monkeypatch.setattr(importer, "BATCH_SIZE", 2)
    weekly, automation_id = _prepare_import(client, api_headers)
    other = db.session.scalar(select(Subscription.list_id)
                              .where(Subscription.list_id != weekly).limit(1))
    assert client.post("/api/subscribers", headers=api_headers,
                       json={"email": "eve@example.com", "lists": [other]}).status_code == 201
    endpoint = endpoints.create(db.session, "https://93.184.216.34/hooks",
                                ["subscriber.created"], allow_private=True)
    csv = (b"email,name\nn1@example.com,N1\nn2@example.com,N2\nann@example.com,Ann\n"
           b"n3@example.com,N3\nbob@example.com,Bob\neve@example.com,Eve\nn4@example.com,N4\n")

    def send():
        return client.post(f"/api/lists/{weekly}/import", headers=api_headers,
                           content_type="multipart/form-data",
                           data={"file": (io.BytesIO(csv), "people.csv"),
                                 "consent": "opted_in", "welcome": "1"})

    response = send()
    assert response.status_code == 200, response.json
    assert (response.json["imported"], response.json["updated"]) == (6, 1)
    added = sorted(person_id(e) for e in ("n1@example.com", "n2@example.com", "n3@example.com",
                                          "bob@example.com", "eve@example.com",
                                          "n4@example.com"))
    assert entries(automation_id) == [(i, "import") for i in added]
    rows = db.session.scalars(select(WebhookMessage).where(
        WebhookMessage.endpoint_id == endpoint.id)).all()
    assert sorted(r.subscriber_id for r in rows) == added
    for row in rows:
        assert row.event_type == "subscriber.created"
        assert row.data["list_id"] == weekly and row.data["source"] == "import"
        assert row.data["status"] == "active"
        assert row.data["subscriber"]["id"] == row.subscriber_id
        assert row.data["subscriber"]["email"] == db.session.get(
            Subscriber, row.subscriber_id).email
    response = send()
    assert (response.json["imported"], response.json["updated"]) == (0, 7)
    assert entries(automation_id) == [(i, "import") for i in added]
    assert db.session.scalar(select(func.count()).select_from(WebhookMessage)) == len(rows)


@pytest.mark.parametrize("fields", [{}, {"welcome": "0"}, {"welcome": "false"}])
def test_an_import_without_welcome_enters_nobody(client, api_headers, fields):
    weekly, _ = _prepare_import(client, api_headers)
    response = _import(client, api_headers, weekly, **fields)
    assert response.status_code == 200 and response.json["imported"] == 3
    assert entries() == []


@pytest.mark.parametrize(("query", "fields", "message"), [
    ("", {"welcome": "maybe"}, '"welcome" must be 1, 0, true or false'),
    ("", {"welcome": ""}, '"welcome" must be 1, 0, true or false'),
    ("", {"welcome": ["1", "0"]}, '"welcome" must be 1, 0, true or false'),
    ("?welcome=1", {}, "as a form field"),
])
def test_a_bad_welcome_on_an_import_is_422_and_imports_nothing(client, api_headers, query,
                                                                fields, message):
    weekly, _ = _prepare_import(client, api_headers)
    response = _import(client, api_headers, weekly, query, **fields)
    assert response.status_code == 422 and message in response.json["error"], response.json
    assert person_id("cy@example.com") is None
    assert db.session.scalar(select(func.count()).select_from(Import)) == 0
    assert db.session.scalar(select(func.count()).select_from(Subscription)
                             .where(Subscription.list_id == weekly)) == 1
    assert entries() == []
