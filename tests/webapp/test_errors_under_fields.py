"""A refused form shows the refusal under the input it is about (that input aria-invalid and
described by it), never under another one, and keeps everything the owner typed."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from broadside.audience import lists
from broadside.core.models import MailingList, Subscriber, WebhookEndpoint
from tests.helpers import csrf_token_from
from webapp.extensions import db


def error_under(html: str, field_id: str) -> str:
    """The text of the error shown under `field_id`, checking the input points at it."""
    tag = re.search(rf'<(?:input|textarea|select)[^>]*\bid="{re.escape(field_id)}"[^>]*>', html)
    assert tag, f"no input {field_id}"
    assert 'aria-invalid="true"' in tag.group(0), tag.group(0)
    described = re.search(r'aria-describedby="([^"]*)"', tag.group(0))
    assert described and f"{field_id}-error" in described.group(1).split()
    error = re.search(rf'<p class="error" id="{re.escape(field_id)}-error"[^>]*>(.*?)</p>', html, re.S)
    assert error, f"no error under {field_id}"
    return error.group(1)


def no_error_under(html: str, field_id: str) -> None:
    assert f'id="{field_id}-error"' not in html
    tag = re.search(rf'<(?:input|textarea|select)[^>]*\bid="{re.escape(field_id)}"[^>]*>', html)
    assert tag and "aria-invalid" not in tag.group(0)


@pytest.fixture
def weekly(app) -> int:
    return lists.create_list(db.session, "Weekly").id


def test_an_attribute_line_refused_on_add_shows_under_attributes_not_email(logged_in_client, weekly):
    token = csrf_token_from(logged_in_client.get("/subscribers/new").text)
    response = logged_in_client.post("/subscribers/new", data={
        "csrf_token": token, "email": "ana@example.com", "name": "Ana",
        "attributes": "city = Oslo\nno equals sign here", "lists": [str(weekly)]})
    assert response.status_code == 422
    assert "Attribute line 2 must look like" in error_under(response.text, "attributes")
    no_error_under(response.text, "email")
    # Nothing typed is lost.
    assert 'value="ana@example.com"' in response.text and 'value="Ana"' in response.text
    assert "city = Oslo\nno equals sign here</textarea>" in response.text
    assert db.session.scalar(select(func.count()).select_from(Subscriber)) == 0


def test_an_attribute_refused_on_edit_shows_under_attributes(logged_in_client):
    person = Subscriber(email="bo@example.com", name="Bo", attributes={})
    db.session.add(person)
    db.session.commit()
    page = f"/subscribers/{person.id}/edit"
    token = csrf_token_from(logged_in_client.get(page).text)
    response = logged_in_client.post(page, data={
        "csrf_token": token, "email": "bo@example.com", "name": "Bo", "attributes": "email = x"})
    assert response.status_code == 422
    assert "cannot be an attribute" in error_under(response.text, "attributes")
    no_error_under(response.text, "email")


def test_a_taken_address_on_edit_still_shows_under_email(logged_in_client):
    db.session.add_all([Subscriber(email="bo@example.com", attributes={}),
                        Subscriber(email="cy@example.com", attributes={})])
    db.session.commit()
    bo = db.session.scalar(select(Subscriber).where(Subscriber.email == "bo@example.com"))
    page = f"/subscribers/{bo.id}/edit"
    token = csrf_token_from(logged_in_client.get(page).text)
    response = logged_in_client.post(page, data={"csrf_token": token, "email": "cy@example.com",
                                                 "name": "Typed name", "attributes": ""})
    assert response.status_code == 422
    assert "already has the address" in error_under(response.text, "email")
    no_error_under(response.text, "attributes")
    assert 'value="Typed name"' in response.text


def test_a_list_description_refused_shows_under_description_and_keeps_the_name(logged_in_client,
                                                                               weekly):
    page = f"/lists/{weekly}"
    token = csrf_token_from(logged_in_client.get(page).text)
    response = logged_in_client.post(page, data={"csrf_token": token, "name": "Weekly news",
                                                 "description": "x" * (lists.MAX_DESCRIPTION + 1)})
    assert response.status_code == 422
    assert "5000 characters" in error_under(response.text, "description")
    no_error_under(response.text, "name")
    assert 'value="Weekly news"' in response.text
    db.session.expire_all()
    assert db.session.get(MailingList, weekly).name == "Weekly"  # nothing half-written


def test_a_webhook_without_events_shows_the_refusal_at_the_events_and_keeps_the_url(
        app, logged_in_client):
    app.config["WEBHOOKS_ALLOW_PRIVATE"] = True
    token = csrf_token_from(logged_in_client.get("/settings/webhooks").text)
    response = logged_in_client.post("/settings/webhooks", data={
        "csrf_token": token, "url": "http://127.0.0.1:9/hook"})
    assert response.status_code == 422
    events = re.search(r'<p class="error" id="webhook-events-error"[^>]*>(.*?)</p>', response.text)
    assert events and "Choose at least one event" in events.group(1)
    assert 'aria-describedby="webhook-events-error"' in response.text
    assert 'id="webhook-url-error"' not in response.text
    assert 'value="http://127.0.0.1:9/hook"' in response.text
    assert db.session.scalar(select(func.count()).select_from(WebhookEndpoint)) == 0


def test_a_webhook_url_refused_shows_under_the_url(logged_in_client):
    token = csrf_token_from(logged_in_client.get("/settings/webhooks").text)
    response = logged_in_client.post("/settings/webhooks", data={
        "csrf_token": token, "url": "ftp://files.example.com/drop", "events": ["subscriber.created"]})
    assert response.status_code == 422
    assert "must start with https://" in error_under(response.text, "webhook-url")
    assert 'id="webhook-events-error"' not in response.text
    assert re.search(r'value="subscriber.created" checked', response.text)


def test_the_sign_up_form_shows_a_bad_address_under_the_email_and_keeps_the_name(client, weekly):
    mailing_list = db.session.get(MailingList, weekly)
    mailing_list.signup_enabled = True
    db.session.commit()
    response = client.post(f"/join/{weekly}", data={"email": "not an address", "name": "Dee"},
                           environ_base={"REMOTE_ADDR": "198.51.100.8"})
    assert response.status_code == 422
    assert "not a valid email address" in error_under(response.text, "email")
    no_error_under(response.text, "name")
    assert 'id="signup-error"' not in response.text
    assert 'value="Dee"' in response.text


def test_a_token_name_refused_shows_under_the_name(logged_in_client):
    token = csrf_token_from(logged_in_client.get("/settings/").text)
    response = logged_in_client.post("/settings/tokens", data={
        "csrf_token": token, "name": "   ", "access": "full"})
    assert response.status_code == 422
    assert error_under(response.text, "name")
