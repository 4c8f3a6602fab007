"""Every time a page shows is in the owner's time zone and names that zone the same way
(`broadside.core.timeutil.local_format`): an owner in London reads GMT in winter and BST in
summer everywhere, never "UTC" on one page and "GMT" on the next."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from broadside.core.models import Event, Subscriber, Subscription
from broadside.core.site_settings import update_settings
from broadside.core.timeutil import local_format, zone_label
from broadside.delivery.lease import Lease
from tests.helpers import make_list
from webapp import REPO_ROOT
from webapp.extensions import db

WINTER = datetime(2026, 1, 15, 9, 30)  # stored times are naive UTC
SUMMER = datetime(2026, 7, 15, 9, 30)


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """Formatting times does not depend on the database."""
    return request.param


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.mark.parametrize(("zone", "moment", "label"), [
    ("UTC", WINTER, "UTC"),
    ("Europe/London", WINTER, "GMT"),
    ("Europe/London", SUMMER, "BST"),
    ("America/Sao_Paulo", WINTER, "UTC−3"),   # the tz database's own name is "-03"
    ("Asia/Kathmandu", WINTER, "UTC+5:45"),
    ("Asia/Dubai", WINTER, "UTC+4"),
])
def test_a_zone_is_named_by_its_letters_or_its_offset_from_utc(zone, moment, label):
    assert zone_label(moment.replace(tzinfo=ZoneInfo("UTC")).astimezone(ZoneInfo(zone))) == label
    assert local_format(moment, ZoneInfo(zone), "%H:%M %Z").endswith(f" {label}")


def test_no_template_formats_a_time_itself():
    """A template that calls strftime (or writes "UTC" after a time) skips the owner's zone."""
    offenders = []
    for path in sorted((REPO_ROOT / "templates").rglob("*.html")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if ".strftime(" in line or re.search(r"\bUTC\b", line):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()[:100]}")
    assert offenders == [], "use local_time(moment, WITH_ZONE) instead:\n" + "\n".join(offenders)


def test_the_owners_zone_is_named_alike_on_every_page(app, logged_in_client, redis_client, namespace):
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main St", time_zone="Europe/London")
    weekly = make_list(db.session, 0)
    person = Subscriber(email="ada@example.com", name="Ada", created_at=WINTER,
                        suppression="blocked", suppressed_at=SUMMER)
    db.session.add(person)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=person.id, list_id=weekly.id, status="unsubscribed",
                                created_at=WINTER, confirmed_at=WINTER, unsubscribed_at=SUMMER,
                                unsubscribe_source="link"))
    db.session.add(Event(kind="unsubscribed", subscriber_id=person.id, list_id=weekly.id,
                         created_at=SUMMER, detail="link"))
    db.session.commit()

    page = text_of(logged_in_client.get(f"/subscribers/{person.id}").text)
    assert "2026-01-15 09:30 GMT" in page  # added, joined, confirmed: winter
    assert "2026-07-15 10:30 BST" in page  # left, blocked, the event: summer, an hour ahead
    assert not re.search(r"\bUTC\b", page), page

    # The System page: the worker's lease (the doctor's line and the live panel) and the checks.
    Lease(redis_client, namespace, identity="box:1:abcdef").try_acquire()
    system = text_of(logged_in_client.get("/system/").text)
    now_label = zone_label(datetime.now(ZoneInfo("Europe/London")))
    assert re.search(rf"worker: box:1:abcdef holds the lease since \S+ \S+ {now_label},", system), system
    assert re.search(rf"holds the sending lease since \S+ \S+ {now_label};", system), system
    assert not re.search(r"\bUTC\b", system), system
