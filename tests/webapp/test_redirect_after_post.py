"""Every owner form that creates or saves something answers a success with 303 See Other
(Post/Redirect/Get): the owner lands on a page that shows the result, and reloading that page
creates nothing again. To htmx the same answer is an HX-Redirect. A secret shown once (an API
token, a new webhook endpoint's signing secret) crosses the redirect in the session, is shown
on the first read only, and is never in a URL."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from sqlalchemy import func, select

from broadside.audience import lists
from broadside.core.models import (
    ApiToken,
    Automation,
    Broadcast,
    Identity,
    Import,
    MailingList,
    Segment,
    SiteSettings,
    Subscriber,
    Subscription,
    WebhookEndpoint,
)
from tests.helpers import csrf_token_from
from webapp.extensions import db


def count(model) -> int:
    db.session.expire_all()
    return db.session.scalar(select(func.count()).select_from(model)) or 0


@dataclass(frozen=True)
class CreateForm:
    page: str  # where the form is (its CSRF token)
    action: str
    data: Callable[[int], dict]  # the fields, given the id of a list that exists
    made: type  # the table a success adds a row to
    multipart: bool = False


def _segment(list_id: int) -> dict:
    return {"name": "Berlin", "g-top-kind": "all", "c-1-field": "attributes", "c-1-key": "city",
            "c-1-op": "equals", "c-1-value": "Berlin", "action": "save"}


def _automation(list_id: int) -> dict:
    return {"action": "save", "name": "Welcome", "trigger_type": "joined_list",
            "list_id": str(list_id), "priority": "0", "step-1-delay": "PT0S",
            "step-1-subject": "Hello", "step-1-body": "Glad you came."}


CREATE_FORMS = {
    "list": CreateForm("/lists/", "/lists/", lambda _: {"name": "Monthly"}, MailingList),
    "subscriber": CreateForm("/subscribers/new", "/subscribers/new",
                             lambda list_id: {"email": "ana@example.com", "name": "Ana",
                                              "lists": [str(list_id)]}, Subscriber),
    "segment": CreateForm("/segments/new", "/segments/new", _segment, Segment),
    "broadcast": CreateForm("/broadcasts/", "/broadcasts/new",
                            lambda list_id: {"audience": f"list:{list_id}"}, Broadcast),
    "automation": CreateForm("/automations/new", "/automations/new", _automation, Automation),
    "identity": CreateForm("/settings/identities/", "/settings/identities/",
                           lambda _: {"name": "Product", "from": "Acme <news@acme.example>",
                                      "transport": "outbox://", "delay_ms": "200",
                                      "hourly_limit": "0"}, Identity),
    "import": CreateForm("/subscribers/import", "/subscribers/import",
                         lambda list_id: {"list_id": str(list_id), "consent": "opted_in",
                                          "file": (io.BytesIO(b"email\nbo@example.com\n"),
                                                   "people.csv")},
                         Import, multipart=True),
    "api token": CreateForm("/settings/", "/settings/tokens",
                            lambda _: {"name": "CI", "access": "full"}, ApiToken),
    "webhook endpoint": CreateForm("/settings/webhooks", "/settings/webhooks",
                                   lambda _: {"url": "http://127.0.0.1:9/hook",
                                              "events": ["subscriber.created"]},
                                   WebhookEndpoint),
}


def submit(client, form: CreateForm, list_id: int, headers: dict | None = None):
    token = csrf_token_from(client.get(form.page).text)
    data = {"csrf_token": token, **form.data(list_id)}
    return client.post(form.action, data=data, headers=headers or {},
                       content_type="multipart/form-data" if form.multipart else None)


@pytest.fixture
def weekly(app) -> int:
    app.config["WEBHOOKS_ALLOW_PRIVATE"] = True  # the endpoint is on loopback
    return lists.create_list(db.session, "Weekly").id


@pytest.mark.parametrize("what", list(CREATE_FORMS))
def test_a_create_form_redirects_and_a_reload_creates_nothing_more(logged_in_client, weekly, what):
    form = CREATE_FORMS[what]
    before = count(form.made)
    response = submit(logged_in_client, form, weekly)
    assert response.status_code == 303, response.text[:2000]
    assert count(form.made) == before + 1
    target = response.headers["Location"]
    shown = logged_in_client.get(target)
    assert shown.status_code == 200
    again = logged_in_client.get(target)  # the reload: a GET, nothing posted again
    assert again.status_code == 200
    assert count(form.made) == before + 1


def test_a_settings_save_redirects_with_303(logged_in_client):
    token = csrf_token_from(logged_in_client.get("/settings/").text)
    response = logged_in_client.post("/settings/sender", data={
        "csrf_token": token, "sender_name": "Acme", "sender_email": "news@acme.example",
        "postal_address": "1 Main Street", "time_zone": "UTC"})
    assert response.status_code == 303
    assert response.headers["Location"].endswith("/settings/#sender")
    assert "Settings saved." in logged_in_client.get(response.headers["Location"]).text
    assert db.session.scalars(select(SiteSettings)).one().sender_name == "Acme"


def test_htmx_gets_the_redirect_as_hx_redirect(logged_in_client, weekly):
    response = submit(logged_in_client, CREATE_FORMS["list"], weekly, headers={"HX-Request": "true"})
    assert response.status_code == 204
    created = db.session.scalar(select(MailingList).where(MailingList.name == "Monthly"))
    assert response.headers["HX-Redirect"] == f"/lists/{created.id}"


def test_a_new_api_token_is_shown_once_after_the_redirect_and_never_in_a_url(logged_in_client):
    response = submit(logged_in_client, CREATE_FORMS["api token"], 0)
    assert response.status_code == 303
    first = logged_in_client.get(response.headers["Location"]).text
    assert 'id="new-token"' in first and "Copy this token now" in first
    plain = first.split('id="new-token">')[1].split("<")[0]
    assert plain.startswith("bs_") and len(plain) > 20
    assert plain not in response.headers["Location"] and "bs_" not in response.headers["Location"]
    reloaded = logged_in_client.get(response.headers["Location"]).text
    assert 'id="new-token"' not in reloaded and plain not in reloaded
    assert count(ApiToken) == 1


def test_a_new_webhook_endpoint_shows_its_secret_once_after_the_redirect(logged_in_client, weekly):
    response = submit(logged_in_client, CREATE_FORMS["webhook endpoint"], weekly)
    assert response.status_code == 303
    endpoint = db.session.scalars(select(WebhookEndpoint)).one()
    assert response.headers["Location"] == f"/settings/webhooks/{endpoint.id}#secret"
    assert endpoint.secret not in response.headers["Location"]
    first = logged_in_client.get(response.headers["Location"]).text
    assert "Endpoint added." in first and endpoint.secret in first
    reloaded = logged_in_client.get(response.headers["Location"]).text
    assert endpoint.secret not in reloaded and "Reveal the signing secret" in reloaded
    assert count(WebhookEndpoint) == 1


def test_the_public_sign_up_form_redirects_and_a_reload_asks_nothing_again(client, weekly):
    mailing_list = db.session.get(MailingList, weekly)
    mailing_list.signup_enabled = True
    db.session.commit()
    response = client.post(f"/join/{weekly}", data={"email": "new@example.com"},
                           environ_base={"REMOTE_ADDR": "198.51.100.9"})
    assert response.status_code == 303
    assert response.headers["Location"] == f"/join/{weekly}/check-inbox"
    for _ in range(2):  # the page, then its reload
        page = client.get(response.headers["Location"])
        assert page.status_code == 200 and "Check your inbox" in page.text
    assert count(Subscription) == 1
