"""The segments pages on SQLite and PostgreSQL: the list with its lazy counts, the rule builder
driven as a browser without JavaScript would (read the form, change fields, press a button),
saving through the domain, the live preview, the htmx fragments, duplicate and guarded delete,
and the form <-> rule JSON round trip."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from sqlalchemy import func, select

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import schedule_broadcast
from broadside.core.models import Broadcast, MailingList, Segment, Subscriber, Subscription
from broadside.core.timeutil import utcnow
from broadside.segments import service
from broadside.segments.rules import MAX_DEPTH, parse
from tests.helpers import csrf_token_from
from webapp.extensions import db
from webapp.segments import builder

HX = {"HX-Request": "true"}


# ---------------------------------------------------------------- reading a form like a browser


class _FormReader(HTMLParser):
    """The fields a browser would submit from <form id="segment-form"> (submit buttons aside)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.fields: dict[str, str] = {}
        self.inside = False
        self.select: str | None = None
        self.first_option: str | None = None
        self.textarea: str | None = None

    def handle_starttag(self, tag, attrs):
        a = {k: v if v is not None else "" for k, v in attrs}
        if tag == "form" and a.get("id") == "segment-form":
            self.inside = True
        if not self.inside:
            return
        if tag == "input" and a.get("type", "text") not in ("submit", "button") and "name" in a:
            self.fields[a["name"]] = a.get("value", "")
        elif tag == "select":
            self.select, self.first_option = a["name"], None
        elif tag == "option" and self.select:
            value = a.get("value", "")
            if self.first_option is None:
                self.first_option = value
                self.fields.setdefault(self.select, value)
            if "selected" in a:
                self.fields[self.select] = value
        elif tag == "textarea":
            self.textarea = a["name"]
            self.fields[self.textarea] = ""

    def handle_endtag(self, tag):
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self.select = None
        elif tag == "textarea":
            self.textarea = None

    def handle_data(self, data):
        if self.textarea:
            self.fields[self.textarea] += data


def form_fields(html: str) -> dict[str, str]:
    reader = _FormReader()
    reader.feed(html)
    assert "csrf_token" in reader.fields, "no segment form on the page"
    return reader.fields


def press(client, url: str, fields: dict[str, str], action: str):
    return client.post(url, data={**fields, "action": action})


def rules_fields(fields: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in fields.items() if k.startswith(("c-", "g-"))}


# ---------------------------------------------------------------- data


@pytest.fixture
def people(app):
    """Weekly and Monthly; Berlin people old and new, and others."""
    session = db.session
    weekly, monthly = MailingList(name="Weekly"), MailingList(name="Monthly")
    session.add_all([weekly, monthly])
    session.flush()
    now = utcnow()

    def person(email, name, city, mailing_list, joined_days_ago, suppression=None):
        subscriber = Subscriber(email=email, name=name, attributes={"city": city, "age": "40"},
                                suppression=suppression)
        session.add(subscriber)
        session.flush()
        session.add(Subscription(subscriber_id=subscriber.id, list_id=mailing_list.id,
                                 status="active", created_at=now - timedelta(days=joined_days_ago)))
        return subscriber

    person("ann@example.com", "Ann", "Berlin", weekly, 400)      # Berlin, on Weekly
    person("bob@example.com", "Bob", "Berlin", monthly, 3)       # Berlin, joined lately
    person("cem@example.com", "Cem", "Berlin", monthly, 400)     # Berlin, neither
    person("dee@example.com", "Dee", "Paris", weekly, 3)         # not Berlin
    person("eve@example.com", "Eve", "Berlin", weekly, 3, suppression="bounced")  # never counted
    session.commit()
    return {"weekly": weekly.id, "monthly": monthly.id}


def berlin_rules(weekly: int) -> dict:
    return {"all": [
        {"field": "attributes.city", "op": "equals", "value": "Berlin"},
        {"any": [{"field": "list", "op": "is_on", "value": weekly},
                 {"field": "joined", "op": "within_days", "value": 30}]},
    ]}


def segment_count() -> int:
    db.session.expire_all()
    return db.session.scalar(select(func.count()).select_from(Segment))


def stored_rules(segment_id: int) -> dict:
    db.session.expire_all()
    return db.session.get(Segment, segment_id).rules


# ---------------------------------------------------------------- the list


def test_empty_index_explains_segments_and_offers_a_new_one(logged_in_client):
    page = logged_in_client.get("/segments/")
    assert page.status_code == 200
    assert "No segments yet" in page.text and "picks people from all your lists" in page.text
    assert 'href="/segments/new"' in page.text
    assert 'static/segments.css' in page.text


def test_index_shows_each_segment_in_words_and_loads_its_count_later(logged_in_client, people):
    berlin = service.create_segment(db.session, "Berlin regulars", berlin_rules(people["weekly"]))
    service.create_segment(db.session, "Gmail", {"any": [
        {"field": "email", "op": "ends_with", "value": "@gmail.com"},
        {"field": "attributes.vip", "op": "exists"},
        {"field": "last_received", "op": "not_within_days", "value": 90},
    ]})
    page = logged_in_client.get("/segments/")
    assert page.status_code == 200
    assert "city is Berlin and (on Weekly or joined within the last 30 days)" in page.text
    assert ("email ends with @gmail.com or vip has a value or received nothing within the last "
            "90 days") in page.text
    # The count is not on the page: each row asks for it once the page is there.
    assert f'hx-get="/segments/{berlin.id}/people" hx-trigger="load"' in page.text
    assert "people</a>" not in page.text

    count = logged_in_client.get(f"/segments/{berlin.id}/people", headers=HX)
    assert count.status_code == 200 and "HX-Request" in count.headers["Vary"]
    assert "<strong>2</strong> people" in count.text and "<html" not in count.text
    # Without JavaScript the same link is a page with the people.
    whole = logged_in_client.get(f"/segments/{berlin.id}/people")
    assert "<html" in whole.text and "ann@example.com" in whole.text and "bob@example.com" in whole.text
    assert "cem@example.com" not in whole.text and "eve@example.com" not in whole.text
    assert f'href="/subscribers/?segment={berlin.id}"' in whole.text
    assert f'href="/subscribers/export.csv?segment={berlin.id}"' in whole.text


def test_pages_carry_no_inline_script_or_style(logged_in_client, people):
    segment = service.create_segment(db.session, "Berlin", berlin_rules(people["weekly"]))
    for path in ("/segments/", "/segments/new", f"/segments/{segment.id}/edit",
                 f"/segments/{segment.id}/delete", f"/segments/{segment.id}/people"):
        page = logged_in_client.get(path)
        assert page.status_code == 200, path
        assert not re.search(r"<[^>]+\sstyle=", page.text), path
        assert not re.search(r"<[^>]+\son[a-z]+=", page.text), path  # no inline handlers
        assert not re.search(r"<script(?![^>]*\ssrc=)", page.text), path


# ---------------------------------------------------------------- building without JavaScript


def test_build_a_nested_segment_with_the_plain_form_and_save_it(logged_in_client, people):
    page = logged_in_client.get("/segments/new")
    assert page.status_code == 200
    fields = form_fields(page.text)
    assert rules_fields(fields) == {"g-top-kind": "all", "c-1-field": ""}

    # Choosing a field and pressing "Update preview" shows the controls that fit it.
    fields["c-1-field"] = "attributes"
    page = press(logged_in_client, "/segments/new", fields, "preview")
    preview = page.text.split('id="preview-result"')[1]
    assert page.status_code == 200 and "name the attribute, as in attributes.city." in preview
    fields = form_fields(page.text)
    assert {"c-1-key", "c-1-op", "c-1-value"} <= set(fields)
    fields.update({"c-1-key": "city", "c-1-op": "equals", "c-1-value": "Berlin"})
    page = press(logged_in_client, "/segments/new", fields, "preview")
    assert "<strong>3</strong> people match" in page.text  # ann, bob, cem (eve is bounced)

    # Add group: a nested "any" group with one empty condition.
    page = press(logged_in_client, "/segments/new", form_fields(page.text), "add-group:top")
    fields = form_fields(page.text)
    assert fields["g-2-kind"] == "any" and fields["c-2.1-field"] == ""
    assert fields["c-1-value"] == "Berlin"  # nothing typed is lost
    fields["c-2.1-field"] = "list"
    page = press(logged_in_client, "/segments/new", fields, "add-condition:2")
    fields = form_fields(page.text)
    assert fields["c-2.1-op"] == "is_on" and fields["c-2.2-field"] == ""
    assert 'id="c-2.2-field"' in page.text and "autofocus" in page.text.split('id="c-2.2-field"')[1][:300]
    fields.update({"c-2.1-value": str(people["weekly"]), "c-2.2-field": "joined"})
    page = press(logged_in_client, "/segments/new", fields, "preview")
    fields = form_fields(page.text)
    fields["c-2.2-op"] = "within_days"
    page = press(logged_in_client, "/segments/new", fields, "preview")
    fields = form_fields(page.text)
    assert 'type="number" name="c-2.2-value"' in page.text
    fields["c-2.2-value"] = "30"
    page = press(logged_in_client, "/segments/new", fields, "preview")
    assert "<strong>2</strong> people match" in page.text
    assert segment_count() == 0  # pressing buttons saves nothing

    fields = {**form_fields(page.text), "name": "Berlin regulars"}
    saved = press(logged_in_client, "/segments/new", fields, "save")
    assert saved.status_code == 303 and saved.headers["Location"] == "/segments/"
    segment = db.session.scalar(select(Segment))
    assert segment.name == "Berlin regulars"
    assert segment.rules == berlin_rules(people["weekly"])
    index = logged_in_client.get("/segments/")
    assert "is saved" in index.text and "Berlin regulars" in index.text


def test_add_and_remove_buttons_without_javascript(logged_in_client, people):
    segment = service.create_segment(db.session, "Berlin", berlin_rules(people["weekly"]))
    url = f"/segments/{segment.id}/edit"
    fields = form_fields(logged_in_client.get(url).text)

    added = form_fields(press(logged_in_client, url, fields, "add-condition:top").text)
    assert added["c-3-field"] == "" and added["g-2-kind"] == "any"
    nested = form_fields(press(logged_in_client, url, fields, "add-group:2").text)
    assert nested["g-2.3-kind"] == "all" and nested["c-2.3.1-field"] == ""

    # Removing 2.1 renumbers what follows: the joined condition is 2.1 now.
    removed = form_fields(press(logged_in_client, url, fields, "remove:2.1").text)
    assert removed["c-2.1-field"] == "joined" and "c-2.2-field" not in removed
    without_group = form_fields(press(logged_in_client, url, fields, "remove:2").text)
    assert "g-2-kind" not in without_group and without_group["c-1-key"] == "city"
    assert not any(k.startswith("c-2") for k in without_group)
    # A group emptied by Remove stays, and says so until a condition is added or it is removed.
    emptied = press(logged_in_client, url, removed, "remove:2.1")
    assert "No conditions here yet" in emptied.text
    refused = press(logged_in_client, url, form_fields(emptied.text), "save")
    assert refused.status_code == 422 and "Group 2 is empty" in refused.text

    # Changing the top group's kind is just a field.
    fields["g-top-kind"] = "any"
    assert press(logged_in_client, url, fields, "save").status_code == 303
    assert stored_rules(segment.id) == {"any": berlin_rules(people["weekly"])["all"]}


def test_groups_nest_only_as_deep_as_the_rules_allow(logged_in_client):
    fields = form_fields(logged_in_client.get("/segments/new").text)
    path = "top"
    for depth in range(2, MAX_DEPTH + 1):
        page = press(logged_in_client, "/segments/new", fields, f"add-group:{path}")
        fields = form_fields(page.text)
        path = f"{path}.2" if path != "top" else "2"
        assert f"g-{path}-kind" in fields, depth
    assert f'value="add-group:{path}"' not in page.text  # the deepest group offers no Add group
    refused = press(logged_in_client, "/segments/new", fields, f"add-group:{path}")
    assert f"Groups can be nested at most {MAX_DEPTH} deep." in refused.text
    assert rules_fields(form_fields(refused.text)) == rules_fields(fields)


def test_bad_rules_are_refused_naming_the_condition_and_nothing_is_saved(logged_in_client, people,
                                                                         backend):
    fields = {**form_fields(logged_in_client.get("/segments/new").text), "name": "Older"}
    fields.update({"c-1-field": "attributes", "c-1-key": "age", "c-1-op": "gt", "c-1-value": "forty"})
    refused = press(logged_in_client, "/segments/new", fields, "save")
    assert refused.status_code == 422
    assert ("Not saved: Condition 1 (attributes.age gt): the value must be a number"
            in refused.text)
    assert 'class="condition has-error" id="c-1"' in refused.text
    kept = form_fields(refused.text)
    assert (kept["name"], kept["c-1-key"], kept["c-1-op"], kept["c-1-value"]) == (
        "Older", "age", "gt", "forty")
    # A number input would show nothing for "forty": the refused value stays visible as text.
    assert 'type="text" name="c-1-value" id="c-1-value" value="forty"' in refused.text

    # A nested condition left half-done is named by its outline number.
    page = press(logged_in_client, "/segments/new", {**fields, "c-1-value": "30"}, "add-group:top")
    nested = {**form_fields(page.text), "c-2.1-field": "list"}
    refused = press(logged_in_client, "/segments/new", nested, "save")
    assert refused.status_code == 422
    assert "Condition 2.1 (list is_on): the list must be a whole number." in refused.text
    assert 'id="c-2.1"' in refused.text.split("has-error")[1][:40]

    # A list that is not there, an id beyond any the databases can store, no name, a name taken.
    missing = press(logged_in_client, "/segments/new",
                    {**nested, "c-2.1-op": "is_on", "c-2.1-value": "999999"}, "save")
    assert missing.status_code == 422 and "there is no list 999999" in missing.text
    huge = press(logged_in_client, "/segments/new", {**nested, "c-2.1-value": str(2**40)}, "save")
    assert huge.status_code == 422 and "the list must be between 1 and 2147483647" in huge.text
    unnamed = press(logged_in_client, "/segments/new", {**fields, "c-1-value": "30", "name": " "},
                    "save")
    assert unnamed.status_code == 422 and "A segment needs a name." in unnamed.text
    assert segment_count() == 0
    service.create_segment(db.session, "Older", {"all": [{"field": "name", "op": "contains", "value": "a"}]})
    taken = press(logged_in_client, "/segments/new", {**fields, "c-1-value": "30"}, "save")
    assert taken.status_code == 422 and "There is already a segment called “Older”" in taken.text
    assert segment_count() == 1


def test_editing_refused_keeps_the_saved_rules(logged_in_client, people):
    segment = service.create_segment(db.session, "Berlin", berlin_rules(people["weekly"]))
    url = f"/segments/{segment.id}/edit"
    fields = form_fields(logged_in_client.get(url).text)
    refused = press(logged_in_client, url, {**fields, "c-2.2-value": "0"}, "save")
    assert refused.status_code == 422
    assert "Condition 2.2 (joined within_days): the number of days must be between 1" in refused.text
    assert stored_rules(segment.id) == berlin_rules(people["weekly"])


# ---------------------------------------------------------------- the form <-> JSON round trip

EVERY_KIND = {"any": [
    {"field": "email", "op": "ends_with", "value": "@example.com"},
    {"field": "name", "op": "contains", "value": "Ann"},
    {"all": [
        {"field": "attributes.age", "op": "gt", "value": 9.5},
        {"field": "attributes.score", "op": "lt", "value": 100},
        {"field": "attributes.vip", "op": "exists"},
        {"field": "attributes.plan", "op": "not_equals", "value": "free"},
        {"field": "attributes.renews", "op": "before", "value": "2026-03-01"},
        {"any": [
            {"field": "joined", "op": "after", "value": "2025-01-15"},
            {"field": "last_received", "op": "not_within_days", "value": 90},
            {"all": [{"field": "email", "op": "equals", "value": "ann@example.com"},
                     {"any": [{"field": "name", "op": "equals", "value": "Ann"}]}]},
        ]},
    ]},
]}


def test_rules_survive_the_form_unchanged_in_both_directions():
    # JSON -> tree -> JSON, and tree -> form fields -> tree -> JSON.
    assert builder.to_rules(builder.from_rules(EVERY_KIND)) == EVERY_KIND
    assert parse(EVERY_KIND).as_json() == EVERY_KIND  # the rules are valid and normalised
    tree = builder.from_rules(EVERY_KIND)
    fields: dict[str, str] = {}

    def flatten(box, path):
        fields[f"g-{builder.path_text(path)}-kind"] = box.kind
        for number, item in enumerate(box.items, start=1):
            here = (*path, number)
            if item.is_group:
                flatten(item, here)
            else:
                name = f"c-{builder.path_text(here)}"
                fields.update({f"{name}-field": item.field, f"{name}-key": item.key,
                               f"{name}-op": item.op, f"{name}-value": item.value,
                               f"{name}-list": item.list_id})

    flatten(tree, ())
    assert builder.to_rules(builder.from_form(fields)) == EVERY_KIND


def test_a_saved_segment_renders_into_a_form_that_saves_back_the_same_rules(
        logged_in_client, people):
    sent = Broadcast(subject="Issue 1", status="sent", list_id=people["weekly"])
    db.session.add(sent)
    db.session.commit()
    rules = {"all": [
        *EVERY_KIND["any"][2]["all"],
        {"field": "list", "op": "is_not_on", "value": people["monthly"]},
        {"field": "joined", "op": "within_days", "value": 30, "list": people["weekly"]},
        {"field": "received", "op": "is", "value": sent.id},
    ]}
    segment = service.create_segment(db.session, "Everything", rules)
    assert segment.rules == rules
    url = f"/segments/{segment.id}/edit"
    page = logged_in_client.get(url)
    fields = form_fields(page.text)
    assert fields["c-8-list"] == str(people["weekly"]) and fields["c-9-value"] == str(sent.id)
    assert json.loads(fields["rules_json"]) == rules
    # The builder's own fields, without the JSON box, say the same.
    assert builder.to_rules(builder.from_form(fields)) == rules
    saved = press(logged_in_client, url, {**fields, "rules_json": ""}, "save")
    assert saved.status_code == 303
    assert stored_rules(segment.id) == rules


# ---------------------------------------------------------------- Edit as JSON


def test_a_changed_json_box_wins_and_bad_json_is_refused_clearly(logged_in_client, people):
    segment = service.create_segment(db.session, "Berlin", berlin_rules(people["weekly"]))
    url = f"/segments/{segment.id}/edit"
    fields = form_fields(logged_in_client.get(url).text)

    # An unchanged box (only re-indented) leaves the builder in charge.
    builder_edit = {**fields, "c-1-value": "Paris",
                    "rules_json": json.dumps(json.loads(fields["rules_json"]))}
    assert press(logged_in_client, url, builder_edit, "save").status_code == 303
    assert stored_rules(segment.id)["all"][0]["value"] == "Paris"

    fields = form_fields(logged_in_client.get(url).text)
    bad = press(logged_in_client, url, {**fields, "rules_json": '{"all": [}'}, "save")
    assert bad.status_code == 422
    assert "The JSON could not be read: Expecting value (line 1, column 10)." in bad.text
    assert form_fields(bad.text)["rules_json"] == '{"all": [}'  # kept as typed
    assert "<details class=\"json-box\" open>" in bad.text

    wrong = press(logged_in_client, url,
                  {**fields, "rules_json": '{"all": [{"field": "email", "op": "gt", "value": 1}]}'},
                  "save")
    assert wrong.status_code == 422 and "Condition 1 (email gt): the operator does not fit" in wrong.text

    new_rules = {"any": [{"field": "name", "op": "equals", "value": "Ann"}]}
    assert press(logged_in_client, url, {**fields, "rules_json": json.dumps(new_rules)},
                 "save").status_code == 303
    assert stored_rules(segment.id) == new_rules


def test_saving_uses_what_the_owner_changed_last_as_the_page_says(logged_in_client, people):
    segment = service.create_segment(db.session, "Berlin", berlin_rules(people["weekly"]))
    url = f"/segments/{segment.id}/edit"
    fields = form_fields(logged_in_client.get(url).text)
    assert fields["rules_source"] == ""  # nothing changed yet: the page's script sets it
    assert '<p class="rules-source" id="rules-source"' in logged_in_client.get(url).text
    assert "Saving will use the builder." in logged_in_client.get(url).text
    json_rules = {"any": [{"field": "name", "op": "equals", "value": "Ann"}]}

    # The box was edited, then the builder: the builder's rules are saved.
    builder_last = {**fields, "c-2.2-value": "7", "rules_json": json.dumps(json_rules),
                    "rules_source": "builder"}
    assert press(logged_in_client, url, builder_last, "save").status_code == 302
    assert stored_rules(segment.id)["all"][1]["any"][1]["value"] == 7

    # The builder was edited, then the box: the box is saved, even when it reads as the page
    # showed it.
    fields = form_fields(logged_in_client.get(url).text)
    json_last = {**fields, "c-2.2-value": "9", "rules_source": "json",
                 "rules_json": json.dumps(json_rules)}
    assert press(logged_in_client, url, json_last, "save").status_code == 302
    assert stored_rules(segment.id) == json_rules
    fields = form_fields(logged_in_client.get(url).text)
    as_shown = {**fields, "c-1-value": "Ann (changed)", "rules_source": "json"}
    assert press(logged_in_client, url, as_shown, "save").status_code == 302
    assert stored_rules(segment.id) == json_rules

    # A refusal keeps the edited box in charge, and says so.
    refused = press(logged_in_client, url, {**json_last, "rules_json": '{"any": ['}, "save")
    assert refused.status_code == 422
    assert form_fields(refused.text)["rules_source"] == "json"
    assert "Saving will use the JSON you edited." in refused.text
    # Add condition after editing the box is a builder change: the box follows the builder.
    added = press(logged_in_client, url, {**json_last, "rules_source": "builder"},
                  "add-condition:top")
    shown = form_fields(added.text)
    assert json.loads(shown["rules_json"])["all"][1]["any"][1]["value"] == 9
    assert shown["rules_json"] == shown["rules_json_shown"] and shown["rules_source"] == ""
    assert stored_rules(segment.id) == json_rules  # nothing saved by a builder button


def test_the_json_box_follows_the_builder_fields(logged_in_client, people):
    fields = form_fields(logged_in_client.get("/segments/new").text)
    fields.update({"c-1-field": "joined", "c-1-op": "within_days", "c-1-value": "7"})
    response = logged_in_client.post("/segments/builder/json", data=fields, headers=HX)
    assert response.status_code == 200
    assert response.json == {"rules_json": builder.dumps(
        {"all": [{"field": "joined", "op": "within_days", "value": 7}]})}
    too_many = {"csrf_token": fields["csrf_token"], **{f"c-{i}-field": "email" for i in range(1, 400)}}
    response = logged_in_client.post("/segments/builder/json", data=too_many, headers=HX)
    assert response.status_code == 422 and "at most 50 conditions" in response.json["problem"]
    assert segment_count() == 0


def test_load_json_into_the_builder(logged_in_client, people):
    fields = form_fields(logged_in_client.get("/segments/new").text)
    fields["rules_json"] = json.dumps(berlin_rules(people["weekly"]))
    page = press(logged_in_client, "/segments/new", fields, "load-json")
    loaded = form_fields(page.text)
    assert (loaded["c-1-key"], loaded["g-2-kind"], loaded["c-2.1-value"], loaded["c-2.2-op"]) == (
        "city", "any", str(people["weekly"]), "within_days")
    assert "The JSON is in the builder now." in page.text
    refused = press(logged_in_client, "/segments/new", {**fields, "rules_json": "[1, 2]"}, "load-json")
    assert 'The rules must be a group' in refused.text
    assert form_fields(refused.text)["rules_json"] == "[1, 2]"
    assert segment_count() == 0


# ---------------------------------------------------------------- htmx: preview and fragments


def test_preview_counts_and_samples_the_newest_ten(logged_in_client, people):
    token = csrf_token_from(logged_in_client.get("/segments/new").text)
    for i in range(12):
        db.session.add(Subscriber(email=f"r{i:02d}@berlin.example", name=f"R{i}",
                                  attributes={"city": "Berlin"}))
    db.session.flush()
    for subscriber in db.session.scalars(select(Subscriber).where(Subscriber.email.like("r%"))):
        db.session.add(Subscription(subscriber_id=subscriber.id, list_id=people["monthly"],
                                    status="active", created_at=utcnow() - timedelta(days=300)))
    db.session.commit()
    fields = {"csrf_token": token, "g-top-kind": "all", "c-1-field": "attributes",
              "c-1-key": "city", "c-1-op": "equals", "c-1-value": "berlin"}
    response = logged_in_client.post("/segments/preview", data=fields, headers=HX)
    assert response.status_code == 200
    assert "<strong>15</strong> people match" in response.text  # 12 new, ann, bob, cem
    sample = response.text.split('id="preview-sample"')[1]
    assert sample.count("<li>") == 10 and "The newest 10" in response.text
    newest = db.session.scalar(select(Subscriber).where(Subscriber.email == "r11@berlin.example"))
    assert f'href="/subscribers/{newest.id}">r11@berlin.example</a>' in sample
    assert "ann@example.com" not in sample  # the oldest are not in the first ten

    narrower = {**fields, "g-2-kind": "any", "c-2.1-field": "list", "c-2.1-op": "is_on",
                "c-2.1-value": str(people["weekly"]), "c-2.2-field": "joined",
                "c-2.2-op": "within_days", "c-2.2-value": "30"}
    response = logged_in_client.post("/segments/preview", data=narrower, headers=HX)
    assert "<strong>2</strong> people match" in response.text and "All of them" in response.text
    assert "ann@example.com" in response.text and "bob@example.com" in response.text


def test_preview_explains_incomplete_rules_and_never_saves_or_fails(logged_in_client, people,
                                                                      backend):
    token = csrf_token_from(logged_in_client.get("/segments/new").text)
    cases = [
        ({"g-top-kind": "all", "c-1-field": ""}, "Condition 1: choose a field."),
        ({"g-top-kind": "all", "c-1-field": "joined", "c-1-op": "before", "c-1-value": "soon"},
         "Condition 1 (joined before): the value must be a date written as YYYY-MM-DD."),
        ({"g-top-kind": "all", "c-1-field": "list", "c-1-op": "is_on",
          "c-1-value": str(2**62)}, "the list must be between 1 and 2147483647"),
        ({"g-top-kind": "any"}, "The segment is empty"),
        ({"rules_json": "[" * 100_001, "rules_json_shown": ""}, "The JSON can be at most"),
        ({"rules_json": "[" * 90_000, "rules_json_shown": ""}, "The JSON is nested too deeply."),
        ({"rules_json": json.dumps({"all": [{"all": [{"all": [{"all": [{"all": [{"all": [
            {"field": "name", "op": "equals", "value": "x"}]}]}]}]}]}]})},
         "groups can be nested at most 5 deep"),
        ({f"c-{i}-field": "email" for i in range(1, 400)}, "at most 50 conditions"),
    ]
    for fields, expected in cases:
        response = logged_in_client.post("/segments/preview", data={"csrf_token": token, **fields},
                                         headers=HX)
        assert response.status_code == 200, expected
        assert expected in response.text, (expected, response.text)
        assert "people match" not in response.text
    assert segment_count() == 0


def test_builder_buttons_over_htmx_answer_with_the_builder_only(logged_in_client, people):
    token = csrf_token_from(logged_in_client.get("/segments/new").text)
    base = {"csrf_token": token, "g-top-kind": "all", "c-1-field": "email", "c-1-op": "contains",
            "c-1-value": "@example"}
    response = logged_in_client.post("/segments/builder", headers=HX,
                                     data={**base, "action": "add-group:top"})
    assert response.status_code == 200
    assert response.text.lstrip().startswith('<div id="builder"') and "<html" not in response.text
    assert json.loads(response.headers["HX-Trigger-After-Settle"]) == {
        "segment-changed": {"target": "#preview-result"}}
    assert 'name="g-2-kind"' in response.text and 'name="c-2.1-field"' in response.text
    assert 'value="@example"' in response.text

    # The field select re-renders its own condition with the operators and value that fit.
    row = logged_in_client.post("/segments/builder/row/1", headers=HX,
                                data={**base, "c-1-field": "joined"})
    assert row.status_code == 200 and row.text.lstrip().startswith('<div class="condition"')
    assert "HX-Trigger-After-Settle" in row.headers
    assert '<option value="before" selected>' in row.text  # contains does not fit: first op
    assert 'type="date" name="c-1-value" id="c-1-value" value=""' in row.text  # no "@example"
    assert 'name="c-1-list"' in row.text
    row = logged_in_client.post("/segments/builder/row/1", headers=HX, data={
        **base, "c-1-field": "received", "c-1-op": "is"})
    assert "Nothing sent yet" in row.text and 'select name="c-1-value"' in row.text
    row = logged_in_client.post("/segments/builder/row/1", headers=HX, data={
        **base, "c-1-field": "attributes", "c-1-op": "exists"})
    assert 'name="c-1-value"' not in row.text and 'list="attribute-names"' in row.text
    row = logged_in_client.post("/segments/builder/row/1", headers=HX, data={
        **base, "c-1-field": "list"})
    assert f'<option value="{people["weekly"]}">Weekly</option>' in row.text
    assert "@example" not in row.text and "Choose a list…" in row.text
    # A typed value that still fits survives a change of operator.
    row = logged_in_client.post("/segments/builder/row/1", headers=HX, data={
        **base, "c-1-field": "attributes", "c-1-key": "age", "c-1-op": "lt", "c-1-value": "40"})
    assert 'type="number" name="c-1-value" id="c-1-value" value="40"' in row.text
    assert logged_in_client.post("/segments/builder/row/7", headers=HX, data=base).status_code == 404
    assert logged_in_client.post("/segments/builder/row/x", headers=HX, data=base).status_code == 404


def test_attribute_names_are_offered_from_recent_subscribers(logged_in_client, people):
    page = logged_in_client.get("/segments/new")
    datalist = page.text.split('<datalist id="attribute-names">')[1].split("</datalist>")[0]
    assert datalist == '<option value="age"></option><option value="city"></option>'


# ---------------------------------------------------------------- duplicate, delete, used by


def test_duplicate_then_delete(logged_in_client, people):
    segment = service.create_segment(db.session, "Berlin", berlin_rules(people["weekly"]))
    rules = segment.rules
    token = csrf_token_from(logged_in_client.get("/segments/").text)
    copied = logged_in_client.post(f"/segments/{segment.id}/duplicate", data={"csrf_token": token})
    assert copied.status_code == 302
    copy = db.session.scalar(select(Segment).where(Segment.name == "Copy of Berlin"))
    assert copied.headers["Location"] == f"/segments/{copy.id}/edit"
    assert copy.rules == rules
    copy_id = copy.id

    confirm = logged_in_client.get(f"/segments/{copy_id}/delete")
    assert confirm.status_code == 200 and "Delete “Copy of Berlin”?" in confirm.text
    assert "city is Berlin" in confirm.text and "Delete the segment" in confirm.text
    deleted = logged_in_client.post(f"/segments/{copy_id}/delete", data={"csrf_token": token})
    assert deleted.status_code == 302 and deleted.headers["Location"] == "/segments/"
    assert "The segment “Copy of Berlin” is deleted." in logged_in_client.get("/segments/").text
    assert segment_count() == 1
    assert logged_in_client.get(f"/segments/{copy_id}/edit").status_code == 404


def test_delete_is_refused_while_a_scheduled_broadcast_uses_the_segment(logged_in_client, people):
    segment = service.create_segment(db.session, "Berlin", berlin_rules(people["weekly"]))
    draft = create_draft(db.session, segment_id=segment.id, subject="Berlin news", body="Hi")
    other = create_draft(db.session, segment_id=segment.id, subject="Later", body="Hi")
    schedule_broadcast(db.session, draft.id, utcnow() + timedelta(days=1))

    confirm = logged_in_client.get(f"/segments/{segment.id}/delete")
    assert "A broadcast is about to go to this segment" in confirm.text
    assert f'href="/broadcasts/{draft.id}">Berlin news</a>' in confirm.text
    assert "Delete the segment" not in confirm.text

    token = csrf_token_from(logged_in_client.get("/segments/").text)
    refused = logged_in_client.post(f"/segments/{segment.id}/delete", data={"csrf_token": token},
                                    follow_redirects=True)
    assert refused.status_code == 200
    assert ("flash-error" in refused.text
            and "is used by the scheduled broadcast “Berlin news”" in refused.text)
    assert segment_count() == 1

    # Where it is used, on its page: every broadcast addressed to it, in any state.
    edit = logged_in_client.get(f"/segments/{segment.id}/edit")
    used = edit.text.split('id="used-by"')[1].split("</ul>")[0]
    assert f'href="/broadcasts/{draft.id}">Berlin news</a>' in used and "scheduled" in used
    assert f'href="/broadcasts/{other.id}">Later</a>' in used and "draft" in used
