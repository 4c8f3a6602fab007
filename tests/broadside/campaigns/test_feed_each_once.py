"""Each item once, when two polls of one feed race (two workers, a job run twice), on SQLite
and PostgreSQL: both fetch the same new items from a real loopback server, held at a barrier
until both have them, then both record and send. Every new item ends with exactly one
broadcast, and no broadcast is left without its item; a digest's time run twice sends once."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from broadside.campaigns.automations import service as automations
from broadside.campaigns.feeds import polling
from broadside.campaigns.feeds.fetch import fetch
from broadside.core.models import Broadcast, Feed, FeedItem, MailingList, Subscriber, Subscription
from broadside.core.timeutil import utcnow
from tests.feed_server import FeedServer, Post
from webapp.extensions import db


@pytest.fixture
def feed_server():
    with FeedServer() as server:
        yield server


def feed_automation(app, url: str, **trigger) -> int:
    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.flush()
    person = Subscriber(email="ada@example.com", name="Ada")
    db.session.add(person)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=person.id, list_id=weekly.id, status="active"))
    db.session.commit()
    data = automations.parse_input({"name": "Blog", "trigger": {
        "type": "feed", "url": url, "list_id": weekly.id, **trigger},
        "steps": [{"subject": "[[title]]", "body": "[[items]]"}]})
    automation = automations.create_automation(db.session, data,
                                               default_from=app.config["MAIL_FROM"])
    automations.enable(db.session, automation.id)
    return db.session.scalar(select(Feed.id).where(Feed.automation_id == automation.id))


def race(app, feed_id: int, runners: int = 2) -> list[polling.Outcome]:
    """`runners` polls of the feed at once, each in its own session, all fetched before any
    writes."""
    barrier = threading.Barrier(runners, timeout=30)
    outcomes: list[polling.Outcome] = []
    failures: list[BaseException] = []

    def fetched_together(*args, **kwargs):
        answer = fetch(*args, **kwargs)
        barrier.wait()
        return answer

    engine = db.engine

    def one() -> None:
        try:
            with Session(engine) as session:
                outcomes.append(polling.run(session, feed_id, default_from=app.config["MAIL_FROM"],
                                            jobs=None, allow_private=True,
                                            fetcher=fetched_together))
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=one) for _ in range(runners)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    return outcomes


def due(feed_id: int, **values) -> None:
    db.session.execute(update(Feed).where(Feed.id == feed_id).values(
        next_poll_at=utcnow() - timedelta(seconds=1), **values))
    db.session.commit()


def test_two_polls_at_once_send_each_new_item_once(app, postal_address, feed_server):
    feed_server.state.posts = [Post("old", "Old")]
    feed_id = feed_automation(app, feed_server.url)
    race(app, feed_id)  # both prime: the old item is recorded once, as a baseline
    assert db.session.scalar(select(func.count()).select_from(FeedItem)) == 1
    feed_server.state.posts[:0] = [Post(f"new-{n}", f"New {n}") for n in range(4)]
    due(feed_id)
    outcomes = race(app, feed_id)
    assert sum(o.broadcasts for o in outcomes) == 4
    db.session.expire_all()
    new = db.session.scalars(select(FeedItem).where(FeedItem.baseline.is_(False))).all()
    assert len(new) == 4 and all(i.broadcast_id is not None for i in new)
    assert len({i.broadcast_id for i in new}) == 4
    assert db.session.scalar(select(func.count()).select_from(Broadcast)) == 4
    assert {b.status for b in db.session.scalars(select(Broadcast))} == {"queued"}


def test_a_digest_run_twice_at_its_time_sends_once(app, postal_address, feed_server):
    feed_server.state.posts = [Post("old", "Old")]
    feed_id = feed_automation(app, feed_server.url, mode="digest", at="09:00")
    race(app, feed_id, runners=1)
    feed_server.state.posts[:0] = [Post("a", "A"), Post("b", "B")]
    due(feed_id)
    race(app, feed_id, runners=1)
    assert db.session.scalar(select(func.count()).select_from(Broadcast)) == 0
    due(feed_id, next_digest_at=utcnow() - timedelta(seconds=1))
    outcomes = race(app, feed_id)
    assert sum(o.broadcasts for o in outcomes) == 1
    db.session.expire_all()
    assert db.session.scalar(select(func.count()).select_from(Broadcast)) == 1
    assert len({i.broadcast_id for i in db.session.scalars(
        select(FeedItem).where(FeedItem.baseline.is_(False)))}) == 1
