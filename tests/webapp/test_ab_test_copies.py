"""A test copy of one A/B variant: the owner sees B (its subject, its own body) before any
reader does, from the editor's "Send a test" and from the API, as the draft holds it and,
once sent, as Send froze it. A letter the test does not have is refused at its field and
nothing is queued. Through the real worker and the real SMTP server."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Broadcast, MailingList, TransactionalMessage
from tests.helpers import csrf_token_from, make_list
from webapp.extensions import db, get_jobs

TEST = {"variants": [{"subject": "Hi"}, {"subject": "Hello there", "body": "The other body."}],
        "share": 10, "measure": "clicks", "wait_hours": 2, "default": "A"}
HTMX = {"HX-Request": "true"}


@pytest.fixture
def news(app) -> MailingList:
    """An empty list that tracks per person (an A/B test needs it)."""
    news = make_list(db.session, 0, "News")
    news.per_person_tracking = True
    db.session.commit()
    return news


def queued() -> int:
    return db.session.scalar(select(func.count()).select_from(TransactionalMessage))


def copies(smtp_server) -> dict[str, str]:
    """Each received test copy's subject -> its plain-text part."""
    return {m.message["Subject"]: m.message.get_body(("plain",)).get_content()
            for m in smtp_server.messages}


def test_the_api_sends_a_copy_of_the_variant_asked_for(app, client, api_headers, news, smtp_server,
                                                        run_worker_burst):
    made = client.post("/api/broadcasts", headers=api_headers, json={
        "list_id": news.id, "subject": "Hi", "body": "The first body.", "ab_test": TEST}).json["id"]
    test = f"/api/broadcasts/{made}/test"
    as_b = client.post(test, headers=api_headers, json={"email": "me@example.com", "variant": "B"})
    assert as_b.status_code == 202 and as_b.json["variant"] == "B", as_b.json
    assert client.post(test, headers=api_headers, json={"email": "me@example.com"}).json["variant"] == "A"
    for wrong in ("C", "b", "", 1, "AB"):
        refused = client.post(test, headers=api_headers, json={"email": "me@example.com", "variant": wrong})
        assert refused.status_code == 422 and refused.json["field"] == "variant", (wrong, refused.json)
    assert queued() == 2
    run_worker_burst()
    got = copies(smtp_server)
    assert set(got) == {"[Test B] Hello there", "[Test A] Hi"}
    assert "The other body." in got["[Test B] Hello there"] and "The first body." in got["[Test A] Hi"]

    # Sent (to nobody yet: the list is empty): the copy is of the variant as Send froze it,
    # whatever the draft's test said before.
    db.session.get(Broadcast, made).tracking = "per_person"  # the editor's choice; an A/B test needs it
    db.session.commit()
    send_broadcast(db.session, made, default_from=app.config["MAIL_FROM"], jobs=get_jobs())
    run_worker_burst()
    smtp_server.messages.clear()
    assert client.post(test, headers=api_headers, json={"email": "me@example.com",
                                                        "variant": "B"}).status_code == 202
    run_worker_burst()
    assert list(copies(smtp_server)) == ["[Test B] Hello there"]


def test_without_a_test_there_is_no_variant_to_ask_for(client, api_headers, news, smtp_server,
                                                      run_worker_burst):
    made = client.post("/api/broadcasts", headers=api_headers, json={
        "list_id": news.id, "subject": "Plain", "body": "x"}).json["id"]
    refused = client.post(f"/api/broadcasts/{made}/test", headers=api_headers,
                          json={"email": "me@example.com", "variant": "B"})
    assert refused.status_code == 422 and "A/B test" in refused.json["error"]
    assert client.post(f"/api/broadcasts/{made}/test", headers=api_headers,
                       json={"email": "me@example.com", "variant": "A"}).status_code == 202
    run_worker_burst()
    assert list(copies(smtp_server)) == ["[Test] Plain"]


def test_the_editor_offers_each_variant_for_a_test_copy(logged_in_client, client, api_headers, news,
                                                        smtp_server, run_worker_burst):
    made = client.post("/api/broadcasts", headers=api_headers, json={
        "list_id": news.id, "subject": "Hi", "body": "The first body.", "ab_test": TEST}).json["id"]
    page = logged_in_client.get(f"/broadcasts/{made}/edit")
    assert '<select id="test_variant" name="variant"' in page.text
    assert "Variant B: Hello there" in page.text
    token = csrf_token_from(page.text)
    answer = logged_in_client.post(f"/broadcasts/{made}/test", headers=HTMX, data={
        "csrf_token": token, "to_email": "owner@example.com", "variant": "B"})
    assert "Test queued" in answer.text
    wrong = logged_in_client.post(f"/broadcasts/{made}/test", headers=HTMX, data={
        "csrf_token": token, "to_email": "owner@example.com", "variant": "D"})
    assert "Choose a variant of this broadcast" in wrong.text and queued() == 1
    run_worker_burst()
    assert list(copies(smtp_server)) == ["[Test B] Hello there"]

    plain = client.post("/api/broadcasts", headers=api_headers, json={
        "list_id": news.id, "subject": "Plain", "body": "x"}).json["id"]
    assert 'name="variant"' not in logged_in_client.get(f"/broadcasts/{plain}/edit").text
