"""The dashboard's subscriber growth: joins and leaves per day of the owner's, over the last
30 days, from one grouped query (on SQLite and PostgreSQL: the one piece of SQL here whose
days could differ between engines), drawn as an inline SVG with a text alternative."""

from __future__ import annotations

import html
import re
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import event

from broadside.audience.subscribers.growth import Growth, GrowthDay, growth
from broadside.core.models import MailingList, Subscriber, Subscription
from broadside.core.site_settings import update_settings
from broadside.core.timeutil import utcnow
from webapp.dashboard.chart import HEIGHT, MIN_BAR, WIDTH, chart
from webapp.extensions import db

LONDON = ZoneInfo("Europe/London")
# Clocks in London went forward at 01:00 UTC on 29 March 2026: from then a day starts at 23:00 UTC.
NOW = datetime(2026, 3, 31, 12, 0)


def subscribe(mailing_list: MailingList, email: str, status: str, created_at: datetime,
              confirmed_at: datetime | None = None, unsubscribed_at: datetime | None = None) -> None:
    person = Subscriber(email=email, name="", attributes={})
    db.session.add(person)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=person.id, list_id=mailing_list.id, status=status,
                                created_at=created_at, confirmed_at=confirmed_at,
                                unsubscribed_at=unsubscribed_at))


@pytest.fixture
def march(app) -> MailingList:
    """Known joins and leaves around the month's edges and the change to summer time."""
    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.flush()
    subscribe(weekly, "first-day@x.example", "active", datetime(2026, 3, 2, 9, 0))
    subscribe(weekly, "too-early@x.example", "active", datetime(2026, 3, 1, 23, 59))  # 1 Mar: out
    subscribe(weekly, "unconfirmed@x.example", "unconfirmed", datetime(2026, 3, 10, 12, 0))
    for n, at in enumerate([datetime(2026, 3, 10, 0, 10), datetime(2026, 3, 10, 10, 0),
                            datetime(2026, 3, 10, 23, 50)]):  # three double opt-ins, 10 Mar
        subscribe(weekly, f"confirmed{n}@x.example", "active", datetime(2026, 2, 20), confirmed_at=at)
    # Joined 5 Mar, left 28 Mar at 23:30 GMT.
    subscribe(weekly, "came-and-went@x.example", "unsubscribed", datetime(2026, 3, 5, 8, 0),
              unsubscribed_at=datetime(2026, 3, 28, 23, 30))
    # Joined in January, left at 23:30 UTC on 29 Mar: 00:30 BST, so 30 Mar in London.
    subscribe(weekly, "january@x.example", "unsubscribed", datetime(2026, 1, 5),
              unsubscribed_at=datetime(2026, 3, 29, 23, 30))
    subscribe(weekly, "mid-month-leaver@x.example", "unsubscribed", datetime(2025, 12, 1),
              unsubscribed_at=datetime(2026, 3, 15, 12, 0))
    # 23:30 UTC on 30 Mar is 00:30 BST on 31 Mar: today in London (a UTC date would say the 30th).
    subscribe(weekly, "tonight@x.example", "active", datetime(2026, 3, 30, 23, 30))
    db.session.commit()
    return weekly


def by_day(days, attribute: str) -> dict[str, int]:
    return {d.day.isoformat(): getattr(d, attribute) for d in days if getattr(d, attribute)}


def test_joins_and_leaves_fall_on_the_owners_days_on_both_engines(march, backend):
    statements: list[str] = []
    workers: list[str] = []  # PostgreSQL's parallel workers allowed as the counts ran

    def record(conn, cursor, statement, *args):
        statements.append(statement)
        if backend == "postgresql" and "FROM subscriptions" in statement:
            workers.append(cursor.connection.execute(
                "SELECT current_setting('max_parallel_workers_per_gather')").fetchone()[0])

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        found = growth(db.session, LONDON, now=NOW)
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    counts = [s for s in statements if "FROM subscriptions" in s]
    assert len(counts) == 1  # every day's counts in one statement
    if backend == "postgresql":
        # Without parallel workers (their start-up cost more than the index reads), and the
        # setting as it was for the rest of the transaction.
        assert workers == ["0"] and len(statements) == 3
        assert db.session.connection().exec_driver_sql(
            "SELECT current_setting('max_parallel_workers_per_gather')").scalar() != "0"
    else:
        assert statements == counts
    assert [d.day for d in found.days] == [date(2026, 3, 2) + timedelta(days=n) for n in range(30)]
    assert by_day(found.days, "joined") == {
        "2026-03-02": 1, "2026-03-05": 1, "2026-03-10": 3, "2026-03-31": 1}
    assert by_day(found.days, "left") == {"2026-03-15": 1, "2026-03-28": 1, "2026-03-30": 1}
    assert (found.joined, found.left, found.net) == (6, 3, 3)

    # The same people seen from Tokyo (UTC+9): evening joins move to the next day, and the one
    # too early for London (23:59 UTC on 1 Mar) is on the morning of 2 Mar there.
    tokyo = growth(db.session, ZoneInfo("Asia/Tokyo"), now=NOW)
    assert by_day(tokyo.days, "joined") == {
        "2026-03-02": 2, "2026-03-05": 1, "2026-03-10": 2, "2026-03-11": 1, "2026-03-31": 1}


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_chart_has_a_bar_for_each_day_with_joins_and_each_with_leaves(march):
    drawn = chart(growth(db.session, LONDON, now=NOW))
    assert [b.day.day.isoformat() for b in drawn.joined_bars] == [
        "2026-03-02", "2026-03-05", "2026-03-10", "2026-03-31"]
    assert [b.day.day.isoformat() for b in drawn.left_bars] == ["2026-03-15", "2026-03-28", "2026-03-30"]
    # One scale for both sides: the 3 joins of the 10th fill the space above the baseline.
    tallest = max(drawn.joined_bars, key=lambda b: b.height)
    assert tallest.day.day == date(2026, 3, 10) and tallest.y == 0
    assert drawn.baseline == pytest.approx(HEIGHT * 3 / 4)
    for bar in drawn.bars:
        assert 0 <= bar.x and bar.x + bar.width <= WIDTH
        assert 0 <= bar.y and bar.y + bar.height <= HEIGHT + 0.01
        assert (bar.y + bar.height == pytest.approx(drawn.baseline)) == (bar.kind == "joined")


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_dashboard_draws_the_last_30_days_with_words_for_a_screen_reader(app, logged_in_client):
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main St", time_zone="UTC")
    quiet = logged_in_client.get("/").text
    assert "Nobody joined or left a list in the last 30 days." in quiet and "<svg" not in quiet

    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.flush()
    today = utcnow().replace(hour=0, minute=0, second=0, microsecond=0)
    for n in range(5):
        subscribe(weekly, f"today{n}@x.example", "active", today + timedelta(minutes=n))
    for n in range(2):
        subscribe(weekly, f"week{n}@x.example", "active", today - timedelta(days=7, hours=-1))
    subscribe(weekly, "left@x.example", "unsubscribed", today - timedelta(days=60),
              unsubscribed_at=today - timedelta(days=3, hours=-2))
    subscribe(weekly, "long-ago@x.example", "active", today - timedelta(days=45))
    db.session.commit()

    page = logged_in_client.get("/").text
    svg = re.search(r"<svg class=\"growth-chart\".*?</svg>", page, re.S)
    assert svg, page
    assert len(re.findall(r'<rect class="bar bar-joined"', svg.group(0))) == 2
    assert len(re.findall(r'<rect class="bar bar-left"', svg.group(0))) == 1
    assert 'role="img" aria-labelledby="growth-title growth-desc"' in svg.group(0)
    desc = html.unescape(re.search(r'<desc id="growth-desc">(.*?)</desc>', svg.group(0), re.S).group(1))
    assert " ".join(desc.split()).startswith("7 joined and 1 left a list in the last 30 days: net +6.")
    assert f"The busiest day was {today.day} {today:%b}, with 5 joined." in desc
    numbers = re.search(r'<table class="table growth-table">.*?</table>', page, re.S).group(0)
    assert len(re.findall(r"<tr><td>", numbers)) == 3  # the three days with anything, newest first
    assert "script" not in svg.group(0).lower()


def test_a_lone_leave_beside_hundreds_of_joins_still_shows_inside_the_box():
    days = [GrowthDay(date(2026, 11, 2) + timedelta(days=n), 0, 0) for n in range(29)]
    drawn = chart(Growth([*days, GrowthDay(date(2026, 12, 1), 300, 2)]))
    joined, left = drawn.bars
    assert (joined.kind, left.kind) == ("joined", "left")
    assert left.height == MIN_BAR and left.y + left.height <= HEIGHT
    assert joined.y == 0 and joined.height == drawn.baseline == HEIGHT - MIN_BAR


@pytest.mark.parametrize("backend", ["sqlite"])
def test_each_days_counts_are_read_from_the_indexes_alone(march):
    """At a million subscribers the chart must not read a row per join (migration 0016 put
    the status in the index): every part of the statement is a range of a covering index."""
    executed: list[tuple[str, object]] = []
    record = lambda conn, cursor, statement, params, *args: executed.append((statement, params))  # noqa: E731
    event.listen(db.engine, "before_cursor_execute", record)
    try:
        growth(db.session, LONDON, now=NOW)
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    (statement, params), = executed
    plan = [row[3] for row in db.session.connection().exec_driver_sql(
        "EXPLAIN QUERY PLAN " + statement, params)]
    reads = [step for step in plan if "subscriptions" in step]
    assert len(reads) == 90, plan  # three ranges a day
    assert all(step.startswith("SEARCH subscriptions USING COVERING INDEX") for step in reads), plan
