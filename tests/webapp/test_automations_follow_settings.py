"""Automations follow Settings on the pages and over the API, on SQLite and PostgreSQL: the
Settings, Design and identity pages say how many live automations a save reaches and then how
many it reached; a save that changes nothing a revision freezes writes none; a step that would
no longer build refuses the save whole; enabling without a postal address is refused (page and
API) as sending a broadcast is."""

from __future__ import annotations

from sqlalchemy import func, select, update

from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts.launch import NO_POSTAL_ADDRESS
from broadside.core.models import Automation, AutomationRevision, AutomationStep
from broadside.core.site_settings import get_settings
from tests.helpers import csrf_token_from, make_identity, make_list
from tests.webapp.test_design import save_look
from webapp.extensions import db

REACH = "Saving changes what the next messages of"


def an_automation(app, name, list_id, identity_id=None, *, record_only=False):
    data = automations.parse_input({
        "name": name, "trigger": {"type": "joined_list", "list_id": list_id},
        "identity_id": identity_id, "record_only": record_only,
        "steps": [{"delay": "PT0S", "subject": f"{name} one", "body": "Hello {{ name }}."},
                  {"delay": "P2D", "subject": f"{name} two", "body": "Again."}]})
    return automations.create_automation(db.session, data, default_from=app.config["MAIL_FROM"])


def revisions() -> int:
    return db.session.scalar(select(func.count()).select_from(AutomationRevision)) or 0


def save_sender(client, **fields):
    data = {"sender_name": "", "sender_email": "", "postal_address": "", "time_zone": "UTC",
            "csrf_token": csrf_token_from(client.get("/settings/").text), **fields}
    return client.post("/settings/sender", data=data)


def reach_line(html: str) -> str:
    start = html.index('id="automations-reached"')
    return " ".join(html[start:html.index("</p>", start)].split())


def test_the_settings_design_and_identity_pages_count_the_automations_a_save_reaches(
        app, logged_in_client):
    client = logged_in_client
    weekly = make_list(db.session, 0)
    own = make_identity("Product", "smtp://127.0.0.1:2525", 0)
    own_id = own.id
    own.postal_address = "9 Product Way"
    db.session.commit()
    an_automation(app, "Welcome", weekly.id)
    an_automation(app, "Onboarding", weekly.id)
    an_automation(app, "Product news", weekly.id, own_id)  # prints its identity's own address
    gone = an_automation(app, "Old", weekly.id)
    automations.delete(db.session, gone.id)

    settings = client.get("/settings/").text
    assert "2 live automations</a> carry" in reach_line(settings)
    assert REACH in reach_line(settings)
    design = client.get("/settings/design").text
    assert "3 live automations</a> carry" in reach_line(design)
    identity = client.get(f"/settings/identities/{own_id}/edit").text
    assert "1 live automation</a> carry" in reach_line(identity)

    before = revisions()
    saved = save_sender(client, sender_name="Acme", postal_address="1 Main Street")
    assert saved.status_code == 303
    page = client.get(saved.headers["Location"]).text
    assert "The next messages of 2 live automations carry it now." in page
    # Two steps each of the two automations through the default identity; nothing else.
    assert revisions() == before + 4

    saved = save_look(client, colour="#aa3300")
    assert saved.status_code == 303
    assert "The next messages of 3 live automations carry it now." in client.get(
        saved.headers["Location"]).text
    assert revisions() == before + 4 + 6


def test_a_save_that_changes_nothing_an_automation_carries_writes_no_revision(
        app, logged_in_client):
    client = logged_in_client
    weekly = make_list(db.session, 0)
    an_automation(app, "Welcome", weekly.id)
    saved = save_sender(client, sender_name="Acme", postal_address="1 Main Street")
    assert "The next messages of the automation “Welcome” carry it now." in client.get(
        saved.headers["Location"]).text
    before = revisions()
    saved = save_sender(client, sender_name="Acme", postal_address="1 Main Street",
                        time_zone="Europe/Berlin")
    assert saved.status_code == 303
    page = client.get(saved.headers["Location"]).text
    assert "carry it now" not in page
    assert revisions() == before
    assert get_settings(db.session).time_zone == "Europe/Berlin"


def test_a_step_that_would_no_longer_build_refuses_the_save_and_saves_nothing(
        app, logged_in_client):
    client = logged_in_client
    weekly = make_list(db.session, 0)
    assert save_sender(client, sender_name="Acme", postal_address="1 Main Street").status_code == 303
    automation = an_automation(app, "Welcome", weekly.id)
    # A step saved under rules that no longer accept it (written here past the checks).
    db.session.execute(update(AutomationStep).where(
        AutomationStep.automation_id == automation.id, AutomationStep.position == 2)
        .values(body="Hello {{ name"))
    db.session.commit()
    before = revisions()
    refused = save_sender(client, sender_name="Acme Two", postal_address="2 New Street")
    assert refused.status_code == 422
    assert "Not saved: the automation “Welcome” would no longer build with this change." in refused.text
    assert "Step 2" in refused.text
    db.session.expire_all()
    settings = get_settings(db.session)
    assert (settings.sender_name, settings.postal_address) == ("Acme", "1 Main Street")
    assert revisions() == before


def test_enabling_without_a_postal_address_is_refused_on_the_page_and_over_the_api(
        app, logged_in_client, api_headers):
    client = logged_in_client
    weekly = make_list(db.session, 0)
    automation = an_automation(app, "Welcome", weekly.id)
    page = client.get("/automations/").text
    assert "Cannot be enabled yet: add your postal address in Settings." in page

    answer = client.post(f"/automations/{automation.id}/enable",
                         data={"csrf_token": csrf_token_from(page)}, follow_redirects=True)
    assert NO_POSTAL_ADDRESS in answer.text
    api = client.post(f"/api/automations/{automation.id}/enable", headers=api_headers)
    assert api.status_code == 422
    assert api.json["error"] == NO_POSTAL_ADDRESS
    db.session.expire_all()
    assert db.session.get(Automation, automation.id).status == "disabled"

    # A record-only automation sends nothing: no address needed.
    record = an_automation(app, "Count", weekly.id, record_only=True)
    assert client.post(f"/api/automations/{record.id}/enable",
                       headers=api_headers).status_code == 200

    assert save_sender(client, postal_address="1 Main Street").status_code == 303
    enabled = client.post(f"/api/automations/{automation.id}/enable", headers=api_headers)
    assert enabled.status_code == 200 and enabled.json["status"] == "enabled"


def test_an_identity_with_its_own_address_may_enable_and_its_edit_reaches_its_automations(
        app, logged_in_client, api_headers):
    client = logged_in_client
    weekly = make_list(db.session, 0)
    own = make_identity("Product", "smtp://127.0.0.1:2525", 0, email="news@product.example")
    own_id = own.id
    automation = an_automation(app, "Product news", weekly.id, own_id)
    refused = client.post(f"/api/automations/{automation.id}/enable", headers=api_headers)
    assert refused.status_code == 422

    body = {"name": "Product", "from": "Product Team <team@product.example>",
            "delay_ms": 0, "postal_address": "9 Product Way"}
    assert client.put(f"/api/identities/{own_id}", headers=api_headers,
                      json=body).status_code == 200
    steps = automations.steps_of(db.session, automation.id)
    current = [db.session.get(AutomationRevision, s.revision_id) for s in steps]
    assert {(r.from_name, r.from_email, r.postal_address) for r in current} == {
        ("Product Team", "team@product.example", "9 Product Way")}
    assert client.post(f"/api/automations/{automation.id}/enable",
                       headers=api_headers).status_code == 200

    # The identity's page: the same, and it says so.
    page = client.get(f"/settings/identities/{own_id}/edit").text
    form = {"csrf_token": csrf_token_from(page), "name": "Product",
            "from": "Product Desk <desk@product.example>", "transport": "", "delay_ms": "0",
            "hourly_limit": "0", "postal_address": "9 Product Way", "webhook_secret": ""}
    saved = client.post(f"/settings/identities/{own_id}/edit", data=form)
    assert saved.status_code == 303
    assert "The next messages of the automation “Product news” carry it now." in client.get(
        saved.headers["Location"]).text
    db.session.expire_all()
    step = automations.steps_of(db.session, automation.id)[0]
    assert db.session.get(AutomationRevision, step.revision_id).from_email == "desk@product.example"
