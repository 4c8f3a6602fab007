"""Test sends fill their merge fields from a subscriber the owner picks (by default the newest
active person the broadcast or automation reaches, else the sample Alex), and say whose
details they used: for broadcasts, automation steps, and over the API. An unknown or erased
address is refused under the field, and nothing is queued."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from broadside.audience.subscribers import service as subscribers
from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts import drafts
from broadside.core.models import (
    Automation,
    AutomationStep,
    Broadcast,
    MailingList,
    Subscriber,
    Subscription,
    TransactionalMessage,
)
from tests.helpers import csrf_token_from
from tests.webapp import test_send_flow
from webapp.extensions import db

HTMX = {"HX-Request": "true"}
audience = test_send_flow.audience  # the fixture


@pytest.fixture
def draft(audience) -> Broadcast:
    """The send flow's audience (Ann, Bob and Cy active, Cy the newest; then Dee unsubscribed,
    Eve bounced and Fay unconfirmed, newer still: none of them the default), each with a city."""
    for person in db.session.scalars(select(Subscriber)):
        person.attributes = {"city": f"{person.email[0].upper()}-town"}
    db.session.commit()
    return drafts.create_draft(db.session, list_id=audience.id,
                               subject="Hello {{ name }} of {{ attributes.city }}", body="Hi.")


def send(client, broadcast_id: int, **fields):
    token = csrf_token_from(client.get(f"/broadcasts/{broadcast_id}/edit").text)
    return client.post(f"/broadcasts/{broadcast_id}/test", headers=HTMX,
                       data={"csrf_token": token, "to_email": "me@example.org", **fields})


def queued() -> list[TransactionalMessage]:
    db.session.expire_all()
    return list(db.session.scalars(select(TransactionalMessage).order_by(TransactionalMessage.id)))


def test_the_editor_offers_the_newest_active_person_by_default(logged_in_client, draft):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit").text
    field = re.search(r'<input type="email" id="fill_from"[^>]*>', page).group(0)
    assert 'value="cy@example.com"' in field and 'list="fill_from-people"' in field
    assert '<label for="fill_from">Fill merge fields from</label>' in page
    assert "the newest active person it goes to, Cy." in page
    suggestions = page.split('<datalist id="fill_from-people">')[1].split("</datalist>")[0]
    assert re.findall(r'value="([^"]+)"', suggestions) == [
        "cy@example.com", "bob@example.com", "ann@example.com"]


def test_left_empty_it_fills_in_the_newest_active_person_and_says_so(logged_in_client, draft):
    response = send(logged_in_client, draft.id, fill_from="")
    assert response.status_code == 200
    assert "Merge fields filled in with Cy&#39;s details (cy@example.com)." in response.text
    [message] = queued()
    assert message.subject == "[Test] Hello Cy of C-town"
    assert message.to_email == "me@example.org"


def test_a_picked_subscriber_fills_the_merge_fields(logged_in_client, draft):
    response = send(logged_in_client, draft.id, fill_from=" ANN@example.com ")
    assert "Merge fields filled in with Ann&#39;s details (ann@example.com)." in response.text
    assert queued()[0].subject == "[Test] Hello Ann of A-town"
    # Anyone the owner has, even off this audience (Dee left the list).
    send(logged_in_client, draft.id, fill_from="dee@example.com")
    assert queued()[1].subject == "[Test] Hello Dee of D-town"


@pytest.mark.parametrize("how", ["unknown", "erased", "not an address"])
def test_an_unknown_or_erased_subscriber_is_refused_under_the_field(logged_in_client, draft, how):
    typed = {"unknown": "zed@example.com", "erased": "bob@example.com",
             "not an address": "bob at example"}[how]
    draft_id = draft.id
    if how == "erased":
        bob = db.session.scalar(select(Subscriber.id).where(Subscriber.email == "bob@example.com"))
        subscribers.erase(db.session, bob)
    response = send(logged_in_client, draft_id, fill_from=typed)
    assert response.status_code == 200  # htmx swaps no 4xx
    field = re.search(r'<div class="field test-fill has-error" id="fill_from-field" hx-swap-oob="true">'
                      r'.*?</div>', response.text, re.S)
    assert field, response.text
    assert 'aria-invalid="true"' in field.group(0) and f'value="{typed}"' in field.group(0)
    error = re.search(r'<p class="error" id="fill_from-error" role="alert">(.*?)</p>',
                      field.group(0)).group(1)
    if how == "not an address":
        assert "not a valid email address" in error
    else:
        assert f"No subscriber has the address {typed}" in error and "erased" in error
    assert "Test not sent" not in response.text  # the refusal is the field's, said once
    assert queued() == []


def test_with_nobody_active_the_sample_reader_fills_them(logged_in_client, app):
    empty = MailingList(name="Empty")
    db.session.add(empty)
    db.session.commit()
    draft = drafts.create_draft(db.session, list_id=empty.id, subject="Hello {{ name }}", body="x")
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit").text
    assert "Empty: the sample reader Alex" in page
    response = send(logged_in_client, draft.id)
    assert "filled in with the sample reader Alex&#39;s details (alex@example.com)." in response.text
    assert queued()[0].subject == "[Test] Hello Alex"


def test_without_javascript_the_note_says_whose_details(logged_in_client, draft):
    token = csrf_token_from(logged_in_client.get(f"/broadcasts/{draft.id}/edit").text)
    response = logged_in_client.post(f"/broadcasts/{draft.id}/test", data={
        "csrf_token": token, "to_email": "me@example.org", "fill_from": "bob@example.com"})
    page = logged_in_client.get(response.headers["Location"], follow_redirects=True).text
    assert "Merge fields filled in with Bob&#39;s details (bob@example.com)." in page


def test_the_suggestions_stay_few_on_a_big_list(logged_in_client, draft, audience):
    for i in range(30):
        person = Subscriber(email=f"p{i:02d}@example.com", name="", attributes={})
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=audience.id, status="active"))
    db.session.commit()
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit").text
    suggestions = page.split('<datalist id="fill_from-people">')[1].split("</datalist>")[0]
    assert len(re.findall(r"<option ", suggestions)) == 8
    assert 'value="p29@example.com"' in re.search(r'<input type="email" id="fill_from"[^>]*>', page).group(0)
    assert "the newest active person it goes to, p29@example.com." in page


def test_an_automation_step_test_fills_in_the_picked_person(logged_in_client, audience):
    data = automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": audience.id},
        "steps": [{"delay": "PT0S", "subject": "Welcome {{ name }}", "body": "x"}]})
    automations.create_automation(db.session, data, default_from="news@example.com")
    automation = db.session.scalars(select(Automation)).one()
    step = db.session.scalars(select(AutomationStep)).one()
    page = logged_in_client.get(f"/automations/{automation.id}/edit").text
    field = re.search(rf'<input type="email" id="fill-{step.id}"[^>]*>', page).group(0)
    assert 'value="cy@example.com"' in field
    token = csrf_token_from(page)
    url = f"/automations/{automation.id}/steps/{step.id}/test"
    sent = logged_in_client.post(url, headers=HTMX, data={
        "csrf_token": token, "to_email": "me@example.org", "fill_from": "bob@example.com"})
    assert "Merge fields filled in with Bob&#39;s details (bob@example.com)." in sent.text
    assert queued()[0].subject == "[Test] Welcome Bob"
    logged_in_client.post(url, headers=HTMX, data={"csrf_token": token, "to_email": "me@example.org"})
    assert queued()[1].subject == "[Test] Welcome Cy"
    refused = logged_in_client.post(url, headers=HTMX, data={
        "csrf_token": token, "to_email": "me@example.org", "fill_from": "zed@example.com"})
    assert f'id="fill-{step.id}-error"' in refused.text
    assert "No subscriber has the address zed@example.com" in refused.text
    assert len(queued()) == 2


def test_the_api_test_send_takes_fill_from_and_says_whose_details(client, api_headers, draft):
    response = client.post(f"/api/broadcasts/{draft.id}/test", headers=api_headers,
                           json={"email": "me@example.org", "fill_from": "ann@example.com"})
    assert response.status_code == 202
    assert response.json["filled_from"] == {"email": "ann@example.com", "name": "Ann", "sample": False}
    assert queued()[0].subject == "[Test] Hello Ann of A-town"
    default = client.post(f"/api/broadcasts/{draft.id}/test", headers=api_headers,
                          json={"email": "me@example.org"})
    assert default.json["filled_from"]["email"] == "cy@example.com"
    unknown = client.post(f"/api/broadcasts/{draft.id}/test", headers=api_headers,
                          json={"email": "me@example.org", "fill_from": "zed@example.com"})
    assert unknown.status_code == 422 and "No subscriber has the address" in unknown.json["error"]
    assert db.session.scalar(select(func.count()).select_from(TransactionalMessage)) == 2
