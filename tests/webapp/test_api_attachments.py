"""Attachments over the API, on SQLite and PostgreSQL: `POST /api/attachments` (a multipart
`file`) with the type decided from the bytes, `GET` its details, `"attachments": [id, …]` on
broadcasts, automation steps and transactional templates (checked: 422 naming the bad id or
the total over 10 MB), a transactional API message and an automation's welcome arriving with
the file, and a file still in use refused deletion (409)."""

from __future__ import annotations

from email import message_from_bytes, policy

import pytest
from urllib3 import encode_multipart_formdata

from broadside.audience.subscribers import service as subscribers
from broadside.core.models import MailingList
from tests import attachment_files as files
from webapp.extensions import db


def upload(client, headers, name: str, data: bytes):
    # Encoded here: the test client spools a large form to a temporary file it never closes.
    body, content_type = encode_multipart_formdata([("file", (name, data))])
    return client.post("/api/attachments", headers=headers, content_type=content_type,
                       data=body)


def test_an_upload_answers_its_id_name_size_and_type(client, api_headers):
    answer = upload(client, api_headers, "Programme 2027.pdf", files.PDF)
    assert answer.status_code == 201, answer.json
    assert {k: answer.json[k] for k in ("name", "size", "content_type")} == {
        "name": "Programme 2027.pdf", "size": len(files.PDF), "content_type": "application/pdf"}
    shown = client.get(f"/api/attachments/{answer.json['id']}", headers=api_headers)
    assert shown.status_code == 200 and shown.json == answer.json
    assert client.get("/api/attachments/999999", headers=api_headers).status_code == 404


@pytest.mark.parametrize(("name", "data", "said"), [
    ("fake.pdf", b"<html>hello</html>", "is named .pdf but its content is not a PDF"),
    ("tool.exe", b"MZ", "does not send .exe files"),
    ("../cv.pdf", files.PDF, "without folders"),
])
def test_a_refused_upload_is_422_naming_the_file(client, api_headers, name, data, said):
    answer = upload(client, api_headers, name, data)
    assert answer.status_code == 422
    assert said in answer.json["error"] and answer.json["field"] == "file"


def test_an_upload_without_a_file_says_how_to_send_one(client, api_headers):
    answer = client.post("/api/attachments", headers=api_headers, json={"name": "x"})
    assert answer.status_code == 422 and '"file"' in answer.json["error"]


def test_broadcasts_take_attachments_checked_and_keep_them_while_used(client, api_headers):
    pdf = upload(client, api_headers, "a.pdf", files.PDF).json["id"]
    big = upload(client, api_headers, "big.txt", b"a" * (6 * 1024 * 1024)).json["id"]
    bigger = upload(client, api_headers, "bigger.txt", b"b" * (5 * 1024 * 1024)).json["id"]
    weekly = client.post("/api/lists", headers=api_headers, json={"name": "Weekly"}).json["id"]

    refused = client.post("/api/broadcasts", headers=api_headers, json={
        "list_id": weekly, "subject": "Hi", "body": "x", "attachments": [pdf, 424242]})
    assert refused.status_code == 422 and "no attachment 424242" in refused.json["error"]
    assert refused.json["field"] == "attachments"
    assert client.get("/api/broadcasts", headers=api_headers).json["items"] == []  # nothing made

    created = client.post("/api/broadcasts", headers=api_headers, json={
        "list_id": weekly, "subject": "Hi", "body": "x", "attachments": [pdf]})
    assert created.status_code == 201 and created.json["attachments"] == [pdf]
    one = f"/api/broadcasts/{created.json['id']}"
    assert client.get(one, headers=api_headers).json["attachments"] == [pdf]

    over = client.patch(one, headers=api_headers, json={"attachments": [big, bigger]})
    assert over.status_code == 422
    assert over.json["error"] == ("The attachments come to 11.0 MB; a message carries at most "
                                  "10.0 MB in all.")
    patched = client.patch(one, headers=api_headers, json={"attachments": [big, pdf]})
    assert patched.status_code == 200 and patched.json["attachments"] == [big, pdf]

    in_use = client.delete(f"/api/attachments/{pdf}", headers=api_headers)
    assert in_use.status_code == 409 and "used by a broadcast" in in_use.json["error"]
    assert client.delete(f"/api/attachments/{bigger}", headers=api_headers).status_code == 204
    assert client.get(f"/api/attachments/{bigger}", headers=api_headers).status_code == 404


def test_steps_and_templates_take_attachments_naming_the_bad_one(client, api_headers):
    pdf = upload(client, api_headers, "a.pdf", files.PDF).json["id"]
    weekly = client.post("/api/lists", headers=api_headers, json={"name": "Weekly"}).json["id"]
    automation = {"name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly},
                  "steps": [{"subject": "One", "body": "1"},
                            {"subject": "Two", "body": "2", "attachments": [pdf, 31337]}]}
    refused = client.post("/api/automations", headers=api_headers, json=automation)
    assert refused.status_code == 422
    assert refused.json["error"] == "Step 2: there is no attachment 31337."
    automation["steps"][1]["attachments"] = [pdf]
    made = client.post("/api/automations", headers=api_headers, json=automation)
    assert made.status_code == 201
    assert [s["attachments"] for s in made.json["steps"]] == [[], [pdf]]

    template = {"name": "Receipt", "subject": "Your receipt", "body": "Thanks",
                "attachments": [777]}
    refused = client.post("/api/transactional/templates", headers=api_headers, json=template)
    assert refused.status_code == 422 and refused.json["field"] == "attachments"
    template["attachments"] = [pdf]
    made = client.post("/api/transactional/templates", headers=api_headers, json=template)
    assert made.status_code == 201 and made.json["attachments"] == [pdf]
    assert client.delete(f"/api/attachments/{pdf}", headers=api_headers).status_code == 409


def test_a_transactional_api_message_carries_its_templates_file(client, api_headers, smtp_server,
                                                                run_worker_burst):
    ics = upload(client, api_headers, "ticket.ics", files.ICS).json["id"]
    client.post("/api/transactional/templates", headers=api_headers, json={
        "name": "Ticket", "subject": "Your ticket", "body": "See you {{ data.day }}.",
        "attachments": [ics]})
    sent = client.post("/api/transactional", headers=api_headers,
                       json={"template": "Ticket", "to": "ann@example.com",
                             "data": {"day": "Friday"}})
    assert sent.status_code == 202, sent.json
    run_worker_burst()
    [received] = smtp_server.wait_for(1)
    message = message_from_bytes(received.data, policy=policy.default)
    assert message.get_content_type() == "multipart/mixed"
    assert "See you Friday." in message.get_body(("plain",)).get_content()
    [part] = message.iter_attachments()
    assert (part.get_filename(), part.get_content_type()) == ("ticket.ics", "text/calendar")
    assert part.get_payload(decode=True) == files.ICS


def test_an_automations_welcome_carries_its_steps_file(app, client, api_headers, smtp_server,
                                                       run_worker_burst, postal_address):
    pdf = upload(client, api_headers, "guide.pdf", files.PDF).json["id"]
    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.commit()
    made = client.post("/api/automations", headers=api_headers, json={
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly.id},
        "steps": [{"subject": "Welcome", "body": "Your guide is attached.",
                   "attachments": [pdf]}]})
    assert client.post(f"/api/automations/{made.json['id']}/enable",
                       headers=api_headers).status_code == 200
    subscribers.save_subscriber(db.session, email="ada@example.com", name="Ada",
                                list_ids=[weekly.id], welcome=True)
    db.session.commit()
    run_worker_burst()
    [received] = smtp_server.wait_for(1)
    message = message_from_bytes(received.data, policy=policy.default)
    [part] = message.iter_attachments()
    assert (part.get_filename(), part.get_payload(decode=True)) == ("guide.pdf", files.PDF)
