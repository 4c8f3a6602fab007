"""Sending at each reader's own hour, on the owner's side (issue 44): the send page's choice and
what it says will happen (readers counted by zone, the largest ten and the rest), the API's
"send_at_local", and the progress bar's "what is waiting for which hour", counted at most once
per half minute however often the fragment is polled."""

from __future__ import annotations

from datetime import UTC, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import delete, select, update

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.local_time import next_local
from broadside.core.models import Broadcast, Delivery, Subscriber
from broadside.core.site_settings import get_settings
from broadside.core.timeutil import utcnow
from tests.helpers import csrf_token_from, make_list, start_broadcast
from webapp.extensions import db, get_redis, namespaced

HTMX = {"HX-Request": "true"}
GERMAN = {"Accept-Language": "de-DE,de;q=0.9"}
ZONES = ["Asia/Tokyo", "Europe/Berlin", "America/Chicago", "Australia/Sydney", "Africa/Lagos",
         "Asia/Kolkata", "Europe/Lisbon", "America/Sao_Paulo", "Pacific/Auckland", "Asia/Dubai",
         "Europe/Helsinki", "America/Lima"]


def owner_in(zone: str) -> None:
    get_settings(db.session).time_zone = zone
    db.session.commit()


def zoned_list(spread: dict[str | None, int]):
    """A list of readers, so many in each zone (None: no zone)."""
    size = sum(spread.values())
    weekly = make_list(db.session, size)
    ids = db.session.scalars(select(Subscriber.id).order_by(Subscriber.id)).all()
    position = 0
    for zone, count in spread.items():
        chosen = ids[position:position + count]
        position += count
        db.session.execute(update(Subscriber).where(Subscriber.id.in_(chosen)).values(timezone=zone))
    db.session.commit()
    return weekly


def test_the_send_page_sets_each_readers_hour_and_says_who_gets_it_when(logged_in_client):
    owner_in("America/New_York")
    # Tokyo's 3 readers are the largest zone; 12 zones in all: ten shown, two as "others".
    spread = {"Asia/Tokyo": 3, **{zone: 2 for zone in ZONES[1:10]}, "Europe/Helsinki": 1,
              "America/Lima": 1, "Not/AZone": 1, None: 2}
    weekly = zoned_list(spread)
    draft = create_draft(db.session, list_id=weekly.id, subject="Morning news", body="Hello")
    page = logged_in_client.get(f"/broadcasts/{draft.id}/send")
    assert page.status_code == 200
    assert "Everyone at once" in page.text and "readers without one: yours, America/New_York" in page.text
    token = csrf_token_from(page.text)

    chosen = logged_in_client.post(f"/broadcasts/{draft.id}/local_time",
                                   data={"csrf_token": token, "when": "local",
                                         "send_at_local": "09:00"})
    assert chosen.status_code == 302 and chosen.location.endswith("/send#local-time")
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).send_at_local == "09:00"
    page = logged_in_client.get(f"/broadcasts/{draft.id}/send").text
    assert "Each reader gets it at <strong>09:00 their time</strong>" in page
    plan = page.split('id="local-time-plan"', 1)[1].split("</ul>", 1)[0]
    tokyo = next_local("09:00", ZoneInfo("Asia/Tokyo"), utcnow())
    in_new_york = tokyo.replace(tzinfo=UTC).astimezone(ZoneInfo("America/New_York")).strftime("%H:%M")
    assert "<strong>3</strong> in Asia/Tokyo at " in plan and f"{in_new_york} your time" in plan
    # An unknown zone counts with the readers who have none: the owner's 09:00.
    assert "<strong>3</strong> without a time zone at " in plan and "09:00, yours" in plan
    assert plan.count("<li") == 12  # ten zones, the owner's, and the others
    assert "<strong>2</strong> in 2 other time zones" in plan
    assert "Helsinki" not in plan and "Lima" not in plan
    # In German too.
    german = logged_in_client.get(f"/broadcasts/{draft.id}/send", headers=GERMAN).text
    assert "Jede Leserin und jeder Leser erhält" in german

    # A time that is not HH:MM: the page again, the message at the field, nothing changed.
    for bad in ("9 am", "24:00", ""):
        refused = logged_in_client.post(f"/broadcasts/{draft.id}/local_time",
                                        data={"csrf_token": token, "when": "local",
                                              "send_at_local": bad})
        assert refused.status_code == 422, bad
        assert 'id="local-time-error"' in refused.text and 'aria-invalid="true"' in refused.text
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).send_at_local == "09:00"

    # With an A/B test too, the page says the two cannot go together.
    db.session.execute(update(Broadcast).where(Broadcast.id == draft.id).values(
        ab_test={"variants": [{"subject": "A"}, {"subject": "B"}], "share": 20,
                 "measure": "opens", "wait_hours": 4}))
    db.session.commit()
    assert "An A/B test sends at one time: choose one." in \
        logged_in_client.get(f"/broadcasts/{draft.id}/send").text

    back = logged_in_client.post(f"/broadcasts/{draft.id}/local_time",
                                 data={"csrf_token": token, "when": "now", "send_at_local": "09:00"})
    assert back.status_code == 302
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).send_at_local is None


def test_a_viewer_sees_the_choice_but_cannot_make_it(sign_in_as, app):
    weekly = zoned_list({"Asia/Tokyo": 1})
    draft = create_draft(db.session, list_id=weekly.id, subject="Hi", body="Hello")
    client = sign_in_as("viewer")
    page = client.get(f"/broadcasts/{draft.id}/send")
    assert 'id="local-time"' in page.text and 'id="local-time-save"' not in page.text
    refused = client.post(f"/broadcasts/{draft.id}/local_time",
                          data={"when": "local", "send_at_local": "09:00",
                                "csrf_token": csrf_token_from(page.text)})
    assert refused.status_code == 403
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).send_at_local is None


def test_the_api_takes_and_shows_send_at_local(client, api_headers):
    weekly = make_list(db.session, 2)
    made = client.post("/api/broadcasts", headers=api_headers,
                       json={"list_id": weekly.id, "subject": "Hi", "body": "Hello",
                             "send_at_local": "09:00"})
    assert made.status_code == 201 and made.json["send_at_local"] == "09:00", made.json
    draft = made.json["id"]
    assert client.get(f"/api/broadcasts/{draft}", headers=api_headers).json["send_at_local"] == "09:00"
    listed = client.get("/api/broadcasts", headers=api_headers).json["items"][0]
    assert listed["send_at_local"] == "09:00"
    changed = client.patch(f"/api/broadcasts/{draft}", headers=api_headers,
                           json={"send_at_local": "18:30"})
    assert (changed.status_code, changed.json["send_at_local"]) == (200, "18:30")
    for bad in ("9:00", "24:00", "09:00:00", "", 900, ["09:00"]):
        refused = client.patch(f"/api/broadcasts/{draft}", headers=api_headers,
                               json={"send_at_local": bad, "subject": "Not saved"})
        assert refused.status_code == 422 and refused.json["field"] == "send_at_local", bad
    assert client.get(f"/api/broadcasts/{draft}", headers=api_headers).json["send_at_local"] == "18:30"
    assert client.get("/api/broadcasts", headers=api_headers).json["items"][0]["subject"] == "Hi"
    before = db.session.scalar(select(Broadcast.id).order_by(Broadcast.id.desc()))
    refused = client.post("/api/broadcasts", headers=api_headers,
                          json={"list_id": weekly.id, "subject": "Hi", "body": "x",
                                "send_at_local": "noon"})
    assert refused.status_code == 422 and refused.json["field"] == "send_at_local"
    assert db.session.scalar(select(Broadcast.id).order_by(Broadcast.id.desc())) == before
    cleared = client.patch(f"/api/broadcasts/{draft}", headers=api_headers,
                           json={"send_at_local": None})
    assert (cleared.status_code, cleared.json["send_at_local"]) == (200, None)
    schemas = client.get("/api/openapi.json").json["components"]["schemas"]
    for name in ("Broadcast", "BroadcastDetail", "BroadcastCreated", "BroadcastInput",
                 "BroadcastPatch"):
        assert "send_at_local" in schemas[name]["properties"], name


def test_the_progress_bar_says_what_waits_for_which_hour_and_counts_it_once_a_half_minute(
        logged_in_client, app):
    owner_in("Europe/London")
    broadcast = start_broadcast(app, make_list(db.session, 30), subject="Morning", enqueue=False)
    now = utcnow().replace(microsecond=0)
    tokyo, berlin, owners = (now + timedelta(hours=2), now + timedelta(hours=10),
                             now + timedelta(hours=13))
    ids = db.session.scalars(select(Delivery.id).where(Delivery.broadcast_id == broadcast.id)
                             .order_by(Delivery.id)).all()
    for chosen, due in ((ids[:12], tokyo), (ids[12:20], berlin), (ids[20:23], owners)):
        db.session.execute(update(Delivery).where(Delivery.id.in_(chosen))
                           .values(next_attempt_at=due))
    # The rest are due now (leaving): not waiting for an hour.
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast.id).values(
        status="sending", send_at_local="09:00",
        local_due={"Asia/Tokyo": tokyo.isoformat(), "Europe/Berlin": berlin.isoformat(),
                   "Europe/Paris": berlin.isoformat(), "": owners.isoformat()}))
    db.session.commit()
    get_redis().delete(namespaced(f"local-waiting:{broadcast.id}"))

    page = logged_in_client.get(f"/broadcasts/{broadcast.id}")
    waiting = page.text.split('id="local-waiting"', 1)[1].split("</div>", 1)[0]
    assert "<strong>12</strong> for 09:00 Asia/Tokyo (" in waiting
    assert "<strong>8</strong> for 09:00 Europe/Berlin, Europe/Paris (" in waiting
    assert "<strong>3</strong> without a time zone, for " in waiting
    london = tokyo.replace(tzinfo=UTC).astimezone(ZoneInfo("Europe/London"))
    assert f"{london.strftime('%H:%M')} your time)" in waiting
    assert waiting.index("Asia/Tokyo") < waiting.index("Europe/Berlin") < waiting.index("without a time zone")

    # The fragment's polls within the half minute read Redis, not the deliveries: the count
    # does not move though rows did.
    db.session.execute(delete(Delivery).where(Delivery.id.in_(ids[:12])))
    db.session.commit()
    polled = logged_in_client.get(f"/broadcasts/{broadcast.id}/progress", headers=HTMX)
    assert "<strong>12</strong> for 09:00 Asia/Tokyo" in polled.text
    assert 0 < get_redis().ttl(namespaced(f"local-waiting:{broadcast.id}")) <= 30
    # Once it is gone (half a minute later), the next poll counts again.
    get_redis().delete(namespaced(f"local-waiting:{broadcast.id}"))
    polled = logged_in_client.get(f"/broadcasts/{broadcast.id}/progress", headers=HTMX)
    assert "Asia/Tokyo" not in polled.text and "<strong>8</strong> for 09:00 Europe/Berlin" in polled.text
    german = logged_in_client.get(f"/broadcasts/{broadcast.id}/progress", headers=GERMAN)
    assert "Wartet auf die Uhrzeit" in german.text


def test_a_broadcast_sent_at_once_reads_nothing_more_per_poll(logged_in_client, app):
    broadcast = start_broadcast(app, make_list(db.session, 3), enqueue=False)
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast.id)
                       .values(status="sending"))
    db.session.commit()
    polled = logged_in_client.get(f"/broadcasts/{broadcast.id}/progress", headers=HTMX)
    assert polled.status_code == 200 and 'id="local-waiting"' not in polled.text
    assert get_redis().get(namespaced(f"local-waiting:{broadcast.id}")) is None
