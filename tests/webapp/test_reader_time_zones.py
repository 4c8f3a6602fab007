"""A reader's time zone (issue 44, "at the reader's own hour"): every way in stores an IANA
name the server knows and refuses anything else where a person can fix it (the import's row
with its line, the API's 422 naming the field, the owner's form at the field, the reader's
preferences page), and the sign-up form, where nothing is ever the reader's fault, stores
nothing instead."""

from __future__ import annotations

from sqlalchemy import select

from broadside.audience import lists
from broadside.audience.subscribers import service as subscribers
from broadside.core.models import ImportRejection, Subscriber
from broadside.mail.unsubscribe_tokens import make_token
from tests.helpers import csrf_token_from
from tests.webapp.import_steps import last_import, upload
from webapp.extensions import db

GERMAN = {"Accept-Language": "de-DE,de;q=0.9"}


def person(email: str) -> Subscriber | None:
    db.session.expire_all()
    return db.session.scalar(select(Subscriber).where(Subscriber.email == email))


def test_an_import_sets_each_readers_time_zone_and_refuses_a_row_with_a_bad_one(
        logged_in_client):
    weekly = lists.create_list(db.session, "Weekly")
    upload(logged_in_client, weekly.id, b"email,name\nkeep@example.com,Keep\n")
    known = person("keep@example.com")
    known.timezone = "America/New_York"
    db.session.commit()
    content = (b"email,name,Time_Zone,language\n"
               b"ann@example.com,Ann,Asia/Tokyo,de\n"        # 2
               b"bea@example.com,Bea,europe/berlin,\n"       # 3: canonical spelling
               b"cy@example.com,Cy,Mars/Olympus_Mons,\n"     # 4: refused
               b"dan@example.com,Dan,,\n"                    # 5: empty: nothing
               b"keep@example.com,Keep,,\n"                  # 6: keeps New York
               b"eve@example.com,Eve,+09:00,\n")             # 7: an offset is no zone
    assert upload(logged_in_client, weekly.id, content).status_code == 303
    record = last_import()
    assert (record.status, record.rejected) == ("done", 2)
    assert (person("ann@example.com").timezone, person("ann@example.com").locale) == \
        ("Asia/Tokyo", "de")
    assert person("bea@example.com").timezone == "Europe/Berlin"
    assert person("dan@example.com").timezone is None
    assert person("keep@example.com").timezone == "America/New_York"
    assert person("cy@example.com") is None and person("eve@example.com") is None
    refused = {r.line: r.reason for r in db.session.scalars(select(ImportRejection))
               if r.kind == "rejected"}
    assert set(refused) == {4, 7}
    assert "Time_Zone column says 'Mars/Olympus_Mons'" in refused[4]
    assert "not a time zone" in refused[7]

    # The export writes it, and the exported file imports again as it is.
    exported = logged_in_client.get(f"/subscribers/export.csv?list={weekly.id}").text
    header, *rows = exported.splitlines()
    column = header.split(",").index("timezone")
    zones = {r.split(",")[0]: r.split(",")[column] for r in rows}
    assert zones["ann@example.com"] == "Asia/Tokyo" and zones["dan@example.com"] == ""
    other = lists.create_list(db.session, "Other")
    assert upload(logged_in_client, other.id, exported.encode()).status_code == 303
    assert (last_import().status, last_import().rejected) == ("done", 0)
    # `tz` is read too.
    upload(logged_in_client, other.id, b"email,tz\ndan@example.com,Pacific/Auckland\n")
    assert person("dan@example.com").timezone == "Pacific/Auckland"


def test_the_api_round_trips_timezone_and_refuses_a_bad_one(client, api_headers):
    made = client.post("/api/subscribers", headers=api_headers,
                       json={"email": "ann@example.com", "timezone": "Asia/Tokyo"})
    assert made.status_code == 201, made.json
    ann = made.json["id"]
    assert client.get(f"/api/subscribers/{ann}", headers=api_headers).json["timezone"] == \
        "Asia/Tokyo"
    changed = client.patch(f"/api/subscribers/{ann}", headers=api_headers,
                           json={"timezone": "europe/berlin"})
    assert (changed.status_code, changed.json["timezone"]) == (200, "Europe/Berlin")
    assert client.get("/api/subscribers", headers=api_headers).json["items"][0]["timezone"] == \
        "Europe/Berlin"
    for bad in ("Mars/Base", 9, "Europe/Berlin; DROP TABLE"):
        refused = client.patch(f"/api/subscribers/{ann}", headers=api_headers,
                               json={"timezone": bad, "name": "Not saved"})
        assert refused.status_code == 422 and refused.json["field"] == "timezone", refused.json
        assert "'timezone'" in refused.json["error"]
    assert person("ann@example.com").name == "" and person("ann@example.com").timezone == \
        "Europe/Berlin"
    refused = client.post("/api/subscribers", headers=api_headers,
                          json={"email": "bo@example.com", "timezone": "GMT+25"})
    assert refused.status_code == 422 and refused.json["field"] == "timezone"
    assert person("bo@example.com") is None
    cleared = client.patch(f"/api/subscribers/{ann}", headers=api_headers, json={"timezone": None})
    assert (cleared.status_code, cleared.json["timezone"]) == (200, None)
    document = client.get("/api/openapi.json").json
    schemas = document["components"]["schemas"]
    for name in ("Subscriber", "SubscriberDetail", "SubscriberInput", "SubscriberPatch"):
        assert "timezone" in schemas[name]["properties"], name


def test_the_owner_sees_and_changes_a_readers_time_zone(logged_in_client):
    client = logged_in_client
    form = client.get("/subscribers/new")
    assert '<optgroup label="Asia">' in form.text
    assert '<option value="Asia/Tokyo">Asia/Tokyo</option>' in form.text
    made = client.post("/subscribers/new", data={
        "email": "ann@example.com", "name": "Ann", "locale": "", "timezone": "Asia/Tokyo",
        "csrf_token": csrf_token_from(form.text)})
    assert made.status_code in (302, 303)
    ann = person("ann@example.com")
    assert ann.timezone == "Asia/Tokyo"
    shown = client.get(f"/subscribers/{ann.id}")
    assert 'id="subscriber-timezone">Asia/Tokyo' in shown.text and "JST" in shown.text
    edit = client.get(f"/subscribers/{ann.id}/edit")
    assert '<option value="Asia/Tokyo" selected>' in edit.text
    data = {"email": "ann@example.com", "name": "Ann", "attributes": "", "locale": "",
            "timezone": "Nowhere/Town", "csrf_token": csrf_token_from(edit.text)}
    refused = client.post(f"/subscribers/{ann.id}/edit", data=data)
    assert refused.status_code == 422
    assert 'id="timezone-error"' in refused.text and "Nowhere/Town" in refused.text
    assert person("ann@example.com").timezone == "Asia/Tokyo"
    assert client.post(f"/subscribers/{ann.id}/edit",
                       data={**data, "timezone": ""}).status_code in (302, 303)
    assert person("ann@example.com").timezone is None
    assert "Nicht festgelegt" in client.get(f"/subscribers/{ann.id}", headers=GERMAN).text


def test_the_sign_up_form_keeps_the_browsers_zone_and_never_refuses_a_bad_one(client):
    weekly = lists.create_list(db.session, "Weekly", "", signup_enabled=True).id
    page = client.get(f"/join/{weekly}")
    assert 'name="timezone"' in page.text and "timezone.js" in page.text
    for number, (said, stored) in enumerate((("Asia/Tokyo", "Asia/Tokyo"),
                                             ("Not/AZone", None), ("", None),
                                             ("x" * 5000, None))):
        email = f"reader{number}@example.com"
        answer = client.post(f"/join/{weekly}", data={"email": email, "timezone": said},
                             environ_base={"REMOTE_ADDR": f"198.51.100.{30 + number}"})
        assert answer.status_code == 303, (said, answer.text[:300])
        assert person(email).timezone == stored
    # Signing up again from another browser never replaces a zone the reader has.
    client.post(f"/join/{weekly}", data={"email": "reader0@example.com",
                                         "timezone": "Europe/Paris"},
                environ_base={"REMOTE_ADDR": "198.51.100.40"})
    assert person("reader0@example.com").timezone == "Asia/Tokyo"
    # One without a zone gets the browser's.
    client.post(f"/join/{weekly}", data={"email": "reader1@example.com",
                                         "timezone": "Europe/Paris"},
                environ_base={"REMOTE_ADDR": "198.51.100.41"})
    assert person("reader1@example.com").timezone == "Europe/Paris"


def test_the_reader_chooses_their_time_zone_on_the_preferences_page(client, app):
    weekly = lists.create_list(db.session, "Weekly")
    reader, _created = subscribers.save_subscriber(db.session, email="ann@example.com",
                                                   list_ids=[weekly.id])
    token = make_token(reader.id, weekly.id, None, joined=reader.created_at,
                       secret_key=app.config["SECRET_KEY"])
    prefs = client.get(f"/u/{token}/preferences?lang=de")
    assert "Ihre Zeitzone" in prefs.text and "Nicht festgelegt" in prefs.text
    chosen = client.post(f"/u/{token}/preferences?lang=de",
                         data={"action": "timezone", "timezone": "America/Sao_Paulo"})
    assert chosen.status_code == 200 and "America/Sao_Paulo" in chosen.text
    assert '<option value="America/Sao_Paulo" selected>' in chosen.text
    assert person("ann@example.com").timezone == "America/Sao_Paulo"
    refused = client.post(f"/u/{token}/preferences",
                          data={"action": "timezone", "timezone": "Atlantis/Capital"})
    assert refused.status_code == 422 and "Choose one of the time zones offered." in refused.text
    assert person("ann@example.com").timezone == "America/Sao_Paulo"
    cleared = client.post(f"/u/{token}/preferences", data={"action": "timezone", "timezone": ""})
    assert cleared.status_code == 200 and "no longer set" in cleared.text
    assert person("ann@example.com").timezone is None
