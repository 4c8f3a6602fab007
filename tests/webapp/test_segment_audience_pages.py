"""Segments where the owner meets them outside the builder: compose, the send confirmation,
the frequency cap (per broadcast and its default in Settings), the subscriber table's filter
and the CSV export."""

from __future__ import annotations

import csv
import io

import pytest
from sqlalchemy import select

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import Broadcast, MailingList, SiteSettings, Subscriber, Subscription
from broadside.core.site_settings import get_settings
from broadside.segments import service as segments
from tests.helpers import csrf_token_from
from webapp.extensions import db


@pytest.fixture
def audience(app):
    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.flush()
    for i, city in enumerate(["Berlin", "Berlin", "Paris", "Berlin"]):
        person = Subscriber(email=f"p{i}@example.com", name=f"P{i}", attributes={"city": city},
                            suppression="bounced" if i == 3 else None)
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=weekly.id, status="active"))
    settings = get_settings(db.session)
    settings.postal_address = "1 Main St"
    db.session.commit()
    berlin = segments.create_segment(db.session, "Berlin", {"all": [
        {"field": "attributes.city", "op": "equals", "value": "Berlin"}]})
    return {"weekly": weekly.id, "berlin": berlin.id}


def test_compose_offers_lists_and_segments_and_saves_the_choice_and_the_cap(logged_in_client, audience):
    index = logged_in_client.get("/broadcasts/")
    assert '<optgroup label="Segments">' in index.text and ">Berlin</option>" in index.text
    created = logged_in_client.post("/broadcasts/new", data={
        "csrf_token": csrf_token_from(index.text), "audience": f"segment:{audience['berlin']}"})
    assert created.status_code == 303
    broadcast = db.session.scalars(select(Broadcast)).one()
    assert broadcast.segment_id == audience["berlin"] and broadcast.list_id is None

    page = logged_in_client.get(f"/broadcasts/{broadcast.id}/edit")
    assert f'<option selected value="segment:{audience["berlin"]}">' in page.text
    fields = {"csrf_token": csrf_token_from(page.text), "subject": "Hi", "preheader": "",
              "body": "Hello"}
    saved = logged_in_client.post(f"/broadcasts/{broadcast.id}/edit", data={
        **fields, "audience": f"segment:{audience['berlin']}", "skip_hours": "24"})
    assert saved.status_code == 303
    db.session.refresh(broadcast)
    assert broadcast.skip_if_received_within_hours == 24

    for bad in ("0.5", "-3", "721", "soon"):
        refused = logged_in_client.post(f"/broadcasts/{broadcast.id}/edit", data={
            **fields, "subject": "Changed", "audience": f"list:{audience['weekly']}",
            "skip_hours": bad})
        assert refused.status_code == 422 and "whole number from 1 to 720" in refused.text
    for bad in ("segment:999", "list:999", "segment:x", "nonsense"):
        refused = logged_in_client.post(f"/broadcasts/{broadcast.id}/edit", data={
            **fields, "subject": "Changed", "audience": bad, "skip_hours": ""})
        assert refused.status_code == 422
    db.session.refresh(broadcast)
    assert (broadcast.subject, broadcast.segment_id, broadcast.skip_if_received_within_hours) == \
        ("Hi", audience["berlin"], 24)


def test_the_confirmation_counts_the_segment_and_names_the_cap(logged_in_client, audience):
    draft = drafts.create_draft(db.session, segment_id=audience["berlin"], subject="Hi", body="x",
                                skip_if_received_within_hours=12)
    page = logged_in_client.get(f"/broadcasts/{draft.id}/send")
    assert page.status_code == 200
    assert "segment Berlin" in page.text
    assert "Send now to 2 subscribers" in page.text
    assert "1 other matching the segment will be skipped" in page.text
    assert "their address bounced before" in page.text
    assert "in the last 12 hours is skipped at their turn" in page.text


def test_a_segment_nobody_matches_cannot_be_sent(logged_in_client, audience):
    nobody = segments.create_segment(db.session, "Nobody", {"all": [
        {"field": "attributes.city", "op": "equals", "value": "Rome"}]})
    draft = drafts.create_draft(db.session, segment_id=nobody.id, subject="Hi", body="x")
    page = logged_in_client.get(f"/broadcasts/{draft.id}/send")
    assert "no active subscriber matches its rules now" in page.text
    refused = logged_in_client.post(f"/broadcasts/{draft.id}/send",
                                    data={"csrf_token": csrf_token_from(page.text)})
    assert refused.status_code == 422
    assert db.session.get(Broadcast, draft.id).status == "draft"


def test_the_default_cap_in_settings_starts_new_broadcasts(logged_in_client, audience):
    page = logged_in_client.get("/settings/")
    assert 'id="defaults"' in page.text
    token = csrf_token_from(page.text)
    for bad in ("x", "0.5", "1000", "99999999999999999999"):
        refused = logged_in_client.post("/settings/defaults", data={"csrf_token": token,
                                                                    "skip_hours": bad})
        assert refused.status_code == 422 and "whole number from 1 to 720" in refused.text
    assert db.session.get(SiteSettings, 1).default_skip_if_received_within_hours is None
    assert logged_in_client.post("/settings/defaults", data={"csrf_token": token,
                                                             "skip_hours": "48"}).status_code == 303
    db.session.expire_all()
    assert db.session.get(SiteSettings, 1).default_skip_if_received_within_hours == 48
    draft = drafts.create_draft(db.session, list_id=audience["weekly"], subject="Hi")
    assert draft.skip_if_received_within_hours == 48
    assert drafts.create_draft(db.session, list_id=audience["weekly"],
                               skip_if_received_within_hours=None).skip_if_received_within_hours is None
    # Emptying the box removes the default.
    logged_in_client.post("/settings/defaults", data={"csrf_token": token, "skip_hours": ""})
    db.session.expire_all()
    assert db.session.get(SiteSettings, 1).default_skip_if_received_within_hours is None


def test_the_subscriber_table_and_the_export_filter_by_segment(logged_in_client, audience):
    segment = audience["berlin"]
    page = logged_in_client.get(f"/subscribers/?segment={segment}")
    assert page.status_code == 200
    assert "p0@example.com" in page.text and "p1@example.com" in page.text
    assert "p2@example.com" not in page.text  # Paris
    assert "p3@example.com" not in page.text  # bounced: a segment never reaches them
    assert f'href="/subscribers/export.csv?segment={segment}"' in page.text
    gone = logged_in_client.get("/subscribers/?segment=999")
    assert gone.status_code == 200 and "p0@example.com" not in gone.text

    export = logged_in_client.get(f"/subscribers/export.csv?segment={segment}")
    assert export.status_code == 200
    assert 'filename="subscribers-berlin.csv"' in export.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(export.get_data(as_text=True))))
    assert sorted(r["email"] for r in rows) == ["p0@example.com", "p1@example.com"]
    assert {r["city"] for r in rows} == {"Berlin"}
    assert logged_in_client.get("/subscribers/export.csv?segment=999").status_code == 404
