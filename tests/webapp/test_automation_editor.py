"""The automation editor on SQLite and PostgreSQL: a delay typed as a number and a unit (an
API-written one round-trips to the letter, a refusal under the field), and the broadcast
editor's merge-field report for every step, as typed, after a save and on enable."""

from __future__ import annotations

import html
import re

from sqlalchemy import func, select

from broadside.campaigns.automations import service as automations
from broadside.campaigns.automations.merge_report import StepTexts, steps_report
from broadside.core.models import Automation, AutomationStep, MailingList, Subscriber, Subscription
from broadside.core.site_settings import update_settings
from broadside.segments import service as segments
from tests.helpers import csrf_token_from
from webapp.extensions import db

HX = {"HX-Request": "true"}


def page_text(page: str) -> str:
    """What a reader sees: tags gone (a line break between blocks), entities read."""
    page = re.sub(r"</(p|li|div|h\d)>|<br>", " ", page)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", page)))


def people_list(cities=("Lisbon", "Porto", None)) -> int:
    """A list whose members have these cities (None: no city)."""
    news = MailingList(name="News")
    db.session.add(news)
    db.session.flush()
    for index, city in enumerate(cities):
        person = Subscriber(email=f"p{index}@example.com", name=f"P{index}",
                            attributes={"city": city} if city else {})
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=news.id, status="active"))
    db.session.commit()
    return news.id


def saved(app, list_id: int, delay: str = "PT1H30M", body: str = "Hello") -> Automation:
    data = automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": list_id},
        "steps": [{"delay": delay, "subject": "Hi", "body": body}]})
    return automations.create_automation(db.session, data, default_from=app.config["MAIL_FROM"])


def form_of(client, path: str, **changes) -> dict[str, str]:
    """The editor's fields as the page fills them, with `changes`."""
    page = client.get(path).get_data(as_text=True)
    data = {"csrf_token": csrf_token_from(page), "action": "save", "name": "Welcome",
            "trigger_type": "joined_list", "priority": "0", "step-1-subject": "Hi",
            "step-1-body": "Hello"}
    for name in ("step-1-id", "step-1-delay", "step-1-delay-amount"):
        marker = f'name="{name}" value="'
        if marker in page:
            data[name] = page.split(marker)[1].split('"')[0]
    unit = page.split('name="step-1-delay-unit"')[1].split("</select>")[0]
    data["step-1-delay-unit"] = unit.split("selected")[0].rsplit('value="', 1)[1].split('"')[0]
    return {**data, **changes}


def test_a_saved_delay_shows_as_a_number_and_unit_and_saves_back_unchanged(app, logged_in_client):
    list_id = people_list()
    automation = saved(app, list_id)
    path = f"/automations/{automation.id}/edit"
    fields = form_of(logged_in_client, path, list_id=str(list_id))
    # PT1H30M is no whole number of hours: shown in minutes, the largest unit it is exact in.
    assert (fields["step-1-delay-amount"], fields["step-1-delay-unit"]) == ("90", "minutes")
    assert logged_in_client.post(path, data=fields).status_code == 303
    step = db.session.scalars(select(AutomationStep)).one()
    assert (step.delay, step.delay_seconds) == ("PT1H30M", 5400)  # to the letter

    response = logged_in_client.post(path, data={**fields, "step-1-delay-amount": "2",
                                                 "step-1-delay-unit": "weeks"})
    assert response.status_code == 303
    db.session.expire_all()
    assert (step.delay, step.delay_seconds) == ("P2W", 14 * 86400)
    assert form_of(logged_in_client, path)["step-1-delay-amount"] == "2"
    assert 'value="weeks" selected' in logged_in_client.get(path).get_data(as_text=True)


def test_a_delay_that_is_no_whole_number_is_refused_under_its_field(app, logged_in_client):
    list_id = people_list()
    for amount, unit, said in (("soon", "days", "whole number of days"),
                               ("1.5", "hours", "whole number of hours"),
                               ("400", "days", "at most 366 days"),
                               ("3", "months", "minutes, hours, days or weeks")):
        fields = form_of(logged_in_client, "/automations/new", list_id=str(list_id),
                         **{"step-1-delay-amount": amount, "step-1-delay-unit": unit})
        response = logged_in_client.post("/automations/new", data=fields)
        page = response.get_data(as_text=True)
        assert response.status_code == 422, amount
        under = page.split('id="step-1-delay-error"')[1].split("</p>")[0]
        assert said in under, (amount, under)
        assert f'value="{amount}"' in page  # what was typed stays
    assert db.session.scalar(select(func.count()).select_from(Automation)) == 0


def test_the_editor_reports_unknown_fields_and_people_lacking_an_attribute_as_typed(
        app, logged_in_client):
    list_id = people_list()
    fields = form_of(logged_in_client, "/automations/new", list_id=str(list_id), **{
        "step-1-body": "Hello from {{ city }}",
        "step-2-delay-amount": "3", "step-2-delay-unit": "days", "step-2-subject": "Later",
        "step-2-body": "Weather in {{ attributes.city }}"})
    answer = logged_in_client.post("/automations/merge-check", data=fields, headers=HX)
    said = page_text(answer.get_data(as_text=True))
    assert answer.status_code == 200
    assert "In the step 1 body, line 1" in said and "Did you mean {{ attributes.city }}?" in said
    assert "1 of 3 people on its list has no city" in said and "step 2 body" in said
    assert db.session.scalar(select(func.count()).select_from(Automation)) == 0  # nothing saved
    # The same report is drawn with the page (no JavaScript), and a save that needs a look
    # comes back to it.
    response = logged_in_client.post("/automations/new", data=fields)
    assert response.status_code == 303 and response.location.endswith("/edit#merge-report")
    page = page_text(logged_in_client.get(response.location).get_data(as_text=True))
    assert "Check its merge fields below" in page
    assert "Did you mean {{ attributes.city }}?" in page and "1 of 3 people on its list" in page


def test_enabling_tells_the_merge_fields_to_check(app, logged_in_client):
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main St", time_zone="UTC")  # enabling needs an address
    automation = saved(app, people_list(), body="Hi {{ attributes.city }} {{ nmae }}")
    page = logged_in_client.get("/automations/").get_data(as_text=True)
    response = logged_in_client.post(f"/automations/{automation.id}/enable",
                                     data={"csrf_token": csrf_token_from(page)},
                                     follow_redirects=True)
    said = page_text(response.get_data(as_text=True))
    assert "is enabled" in said
    assert ("Check its merge fields: In the step 1 body, line 1, column 29: {{ nmae }} is not a "
            "merge field") in said
    assert "Did you mean {{ name }}?" in said
    assert "1 of 3 people on its list has no city" in said


def test_a_clean_save_goes_to_the_list_and_counting_stays_bounded(app, logged_in_client):
    list_id = people_list(cities=("A", "B", None, None))
    fields = form_of(logged_in_client, "/automations/new", list_id=str(list_id))
    response = logged_in_client.post("/automations/new", data=fields)
    assert response.status_code == 303 and "/edit" not in response.location
    # At a million people the editor counts its first N: the report says so.
    report = steps_report(db.session, [StepTexts("Hi", "", "{{ attributes.city }}")],
                          list_id=list_id, segment_id=None, limit=3)
    # Which three the database reads first is its own choice; any three hold a city and a
    # person without one.
    (missing,) = report.missing
    assert (missing.recipients, missing.sampled) == (3, True) and missing.missing in (1, 2)
    assert "of the first 3 people on its list checked" in missing.message


def test_a_lifecycle_campaign_counts_the_people_its_segment_matches(app, logged_in_client):
    list_id = people_list(cities=("Lisbon", None, None, None))
    for person in db.session.scalars(select(Subscriber).order_by(Subscriber.id).limit(2)):
        # the first has a city, the second not
        person.attributes = {**(person.attributes or {}), "plan": "trial"}
    db.session.commit()
    trials = segments.create_segment(db.session, "Trials", {"all": [
        {"field": "attributes.plan", "op": "equals", "value": "trial"}]})
    fields = form_of(logged_in_client, "/automations/new", list_id=str(list_id), **{
        "trigger_type": "segment", "segment_id": str(trials.id), "every_hours": "12",
        "step-1-body": "Hello from {{ attributes.city }}"})
    said = page_text(logged_in_client.post("/automations/merge-check", data=fields,
                                           headers=HX).get_data(as_text=True))
    # Two people match, not the list's four: one of them lacks a city.
    assert "1 of 2 people its segment matches has no city" in said
