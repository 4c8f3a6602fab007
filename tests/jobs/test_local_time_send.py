""""Send at 09:00 in each reader's time zone" through the real worker and SMTP server, on a
simulated clock: each reader's copy is due at their own 09:00 (readers without a zone: the
owner's), the worker sends nothing before it and each copy as its hour comes, in one
broadcast that finishes when the last zone's hour has come."""

from __future__ import annotations

from datetime import datetime

from freezegun import freeze_time
from sqlalchemy import select, update

from broadside.campaigns.broadcasts import local_time
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.errors import ValidationError
from broadside.core.models import Broadcast, Delivery, Subscriber
from broadside.core.site_settings import get_settings
from tests.helpers import assert_nobody_twice, make_list
from webapp.extensions import db, get_jobs

PRESS = "2026-12-06 20:00:00"  # UTC: 05:00 in Tokyo, 21:00 in Berlin, 15:00 in New York
ZONES = {"reader00000@example.com": "Asia/Tokyo", "reader00001@example.com": "Europe/Berlin",
         "reader00002@example.com": None}  # the owner's: America/New_York


def readers() -> int:
    weekly = make_list(db.session, 3)
    for email, zone in ZONES.items():
        db.session.execute(update(Subscriber).where(Subscriber.email == email)
                           .values(timezone=zone))
    get_settings(db.session).time_zone = "America/New_York"
    db.session.commit()
    return weekly.id


def at(moment: str):
    """The clock at `moment`, running on. The lease's clock stays real: its keeper thread reads
    the real one (freezegun leaves threads started by `threading` alone), and the lease
    compares the two threads' readings."""
    return freeze_time(moment, tick=True, ignore=["broadside.delivery.lease"])


def received(smtp_server) -> list[str]:
    return [m.rcpt_tos[0] for m in smtp_server.messages]


def test_each_reader_gets_it_at_their_own_nine(app, logged_in_client, smtp_server, run_worker_burst):
    draft = create_draft(db.session, list_id=readers(), subject="Good morning", body="Coffee?")
    draft.send_at_local = "09:00"
    db.session.commit()
    with freeze_time(PRESS):
        broadcast = send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                                   jobs=get_jobs())
    db.session.refresh(broadcast)
    assert broadcast.local_due == {"": "2026-12-07T14:00:00", "Asia/Tokyo": "2026-12-07T00:00:00",
                                   "Europe/Berlin": "2026-12-07T08:00:00"}
    due = dict(db.session.execute(select(Subscriber.email, Delivery.next_attempt_at)
                                  .join(Delivery, Delivery.subscriber_id == Subscriber.id)).all())
    assert due == {"reader00000@example.com": datetime(2026, 12, 7, 0, 0),
                   "reader00001@example.com": datetime(2026, 12, 7, 8, 0),
                   "reader00002@example.com": datetime(2026, 12, 7, 14, 0)}

    with at("2026-12-06 23:59:00"):  # a minute before Tokyo's nine
        assert run_worker_burst() == 0
    assert received(smtp_server) == []
    db.session.expire_all()
    assert db.session.get(Broadcast, broadcast.id).waiting_until == datetime(2026, 12, 7, 0, 0)

    with at("2026-12-07 00:00:05"):  # 09:00 in Tokyo
        assert run_worker_burst() == 0
    assert received(smtp_server) == ["reader00000@example.com"]
    with at("2026-12-07 00:00:30"):  # the owner looks: what the worker waits for, and until when
        page = logged_in_client.get(f"/broadcasts/{broadcast.id}").text
    assert "Waiting for readers' own hour: the next copies go at 2026-12-07 03:00" in page
    assert "as each reader&#39;s hour comes" in page or "as each reader's hour comes" in page
    with at("2026-12-07 00:00:30"):  # the copies not yet due, in the deliveries' own words
        rows = logged_in_client.get(f"/broadcasts/{broadcast.id}").text
    assert "Waiting for their own hour." in rows

    with at("2026-12-07 08:00:05"):  # 09:00 in Berlin
        assert run_worker_burst() == 0
    assert received(smtp_server) == ["reader00000@example.com", "reader00001@example.com"]
    db.session.expire_all()
    assert db.session.get(Broadcast, broadcast.id).status == "sending"
    waiting = local_time.waiting(db.session, broadcast.id, datetime(2026, 12, 7, 8, 1))
    assert waiting == [(datetime(2026, 12, 7, 14, 0), 1)]

    with at("2026-12-07 14:00:05"):  # 09:00 in New York, the owner's
        assert run_worker_burst() == 0
    assert received(smtp_server) == list(ZONES)
    assert_nobody_twice(smtp_server.recipients())
    db.session.expire_all()
    done = db.session.get(Broadcast, broadcast.id)
    assert done.status == "sent" and done.sent_count == 3
    sent_at = dict(db.session.execute(select(Subscriber.email, Delivery.sent_at)
                                      .join(Delivery, Delivery.subscriber_id == Subscriber.id)).all())
    assert sent_at["reader00000@example.com"] < sent_at["reader00001@example.com"]
    assert sent_at["reader00001@example.com"].hour == 8  # Berlin's nine, in UTC


def test_the_next_nine_is_within_a_day_through_the_clock_change():
    from zoneinfo import ZoneInfo
    berlin = ZoneInfo("Europe/Berlin")
    # The night the clocks go forward (2026-03-29 02:00 -> 03:00 in Berlin): 02:30 does not
    # exist there; the copy goes at the first moment it is 02:30 or later (03:30 CEST).
    assert local_time.next_local("02:30", berlin, datetime(2026, 3, 28, 23, 0)) == \
        datetime(2026, 3, 29, 1, 30)
    assert local_time.next_local("09:00", berlin, datetime(2026, 12, 6, 8, 0)) == \
        datetime(2026, 12, 6, 8, 0)  # exactly nine now: now
    assert local_time.next_local("09:00", berlin, datetime(2026, 12, 6, 8, 1)) == \
        datetime(2026, 12, 7, 8, 0)


def test_zones_and_times_are_checked():
    assert local_time.clean_timezone("europe/berlin") == "Europe/Berlin"
    assert local_time.clean_timezone("  ") is None
    for bad in ("Mars/Olympus", "+02:00", 3, "x" * 80):
        try:
            local_time.clean_timezone(bad)
        except ValidationError as refused:
            assert refused.field == "timezone"
        else:
            raise AssertionError(f"{bad!r} was taken for a time zone")
    assert local_time.clean_local_time("09:00") == "09:00"
    for bad in ("9:00", "24:00", "09:60", "nine"):
        try:
            local_time.clean_local_time(bad)
        except ValidationError:
            pass
        else:
            raise AssertionError(f"{bad!r} was taken for a time")


def test_a_large_audience_is_written_whole_before_the_worker_waits_for_the_hours(
        app, smtp_server, run_worker_burst, monkeypatch):
    from functools import partial

    from broadside.campaigns.broadcasts import snapshot
    from jobs import tasks
    monkeypatch.setattr(snapshot, "INLINE_LIMIT", 5)
    monkeypatch.setattr(snapshot, "MIN_CHUNK", 7)
    monkeypatch.setattr(snapshot, "MAX_CHUNK", 7)
    monkeypatch.setattr(snapshot, "_rate", {})
    # One chunk before each slice, so the worker sends while the audience is still written.
    monkeypatch.setattr(tasks, "prepare", partial(snapshot.prepare, seconds=0, longest=0))
    weekly = make_list(db.session, 40)
    draft = create_draft(db.session, list_id=weekly.id, subject="Good morning", body="Coffee?")
    draft.send_at_local = "09:00"
    db.session.commit()
    with freeze_time(PRESS):
        broadcast = send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                                   jobs=get_jobs())
    with at("2026-12-06 20:00:01"):
        assert run_worker_burst() == 0
    db.session.expire_all()
    waiting = db.session.get(Broadcast, broadcast.id)
    assert waiting.snapshot_cursor >= waiting.snapshot_until and waiting.total == 40
    assert waiting.waiting_until == datetime(2026, 12, 7, 9, 0)  # the owner's zone: UTC
    assert received(smtp_server) == []
