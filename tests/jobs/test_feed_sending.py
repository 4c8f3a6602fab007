"""RSS to email through the real worker, Redis and SMTP server, on SQLite and PostgreSQL: the
feed is served from loopback by a real HTTP server (tests/feed_server.py) that honours ETag.

A feed with 3 new items sends 3 emails to each reader, once each, and a second poll sends
nothing; the items present at the first poll are never sent; a digest collects the new items
and sends one email at its time; a failing feed shows its error and sends nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from broadside.core.models import Broadcast, Feed, FeedItem, MailingList, Subscriber, Subscription
from broadside.core.timeutil import utcnow
from tests.feed_server import FeedServer, Post
from webapp.extensions import db


@pytest.fixture
def feed_server():
    with FeedServer() as server:
        yield server


@pytest.fixture
def readers(app, postal_address) -> int:
    app.config["FEEDS_ALLOW_PRIVATE"] = True  # the feed is served from loopback
    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.flush()
    for email in ("ada@example.com", "bob@example.com"):
        person = Subscriber(email=email, name=email.split("@")[0].title())
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=weekly.id, status="active"))
    db.session.commit()
    return weekly.id


def make_automation(client, headers, list_id: int, url: str, **trigger) -> int:
    answer = client.post("/api/automations", headers=headers, json={
        "name": "Blog", "trigger": {"type": "feed", "url": url, "list_id": list_id, **trigger},
        "steps": [{"subject": "New: [[title]]", "body": "Hello {{ name }},\n\n[[items]]\n\nBye"}]})
    assert answer.status_code == 201, answer.json
    automation_id = answer.json["id"]
    assert client.post(f"/api/automations/{automation_id}/enable", headers=headers).status_code == 200
    return automation_id


def poll_due(automation_id: int, **columns) -> None:
    """The feed's next poll is now (as 15 minutes later would make it)."""
    db.session.execute(update(Feed).where(Feed.automation_id == automation_id)
                       .values(next_poll_at=utcnow() - timedelta(seconds=1), **columns))
    db.session.commit()


def feed_of(automation_id: int) -> Feed:
    db.session.expire_all()
    return db.session.scalar(select(Feed).where(Feed.automation_id == automation_id))


def test_three_new_items_send_three_emails_once_each_and_a_second_poll_sends_nothing(
        app, client, api_headers, readers, feed_server, smtp_server, run_worker_burst):
    feed_server.state.posts = [Post("old-2", "Old two"), Post("old-1", "Old one")]
    automation_id = make_automation(client, api_headers, readers, feed_server.url)

    run_worker_burst()  # the first poll: what the feed holds now is recorded, not sent
    feed = feed_of(automation_id)
    assert feed.primed_at is not None and feed.error is None and feed.etag
    assert smtp_server.messages == []
    assert {i.baseline for i in db.session.scalars(select(FeedItem))} == {True}

    feed_server.state.posts[:0] = [
        Post("new-3", "Third {{ name }}", "<p>Three <script>alert(1)</script>{{ email }}</p>",
             "Mon, 01 Jan 2024 13:00:00 +0000"),
        Post("new-2", "Second", "<p>Two</p>", "Mon, 01 Jan 2024 12:00:00 +0000"),
        Post("new-1", "First", "<p>One</p>", "Mon, 01 Jan 2024 11:00:00 +0000")]
    poll_due(automation_id)
    run_worker_burst()
    subjects = sorted((m.rcpt_tos[0], m.message["Subject"]) for m in smtp_server.messages)
    assert subjects == sorted((who, subject) for who in ("ada@example.com", "bob@example.com")
                              for subject in ("New: First", "New: Second",
                                              "New: Third {{ name }}"))
    third = next(m for m in smtp_server.messages if "Third" in m.message["Subject"])
    html = third.message.get_body(("html",)).get_content()
    assert "Hello Ada" in html or "Hello Bob" in html  # the step's merge fields, per reader
    assert "{{ email }}" in html and "<script>" not in html  # the item's are text, sanitised
    assert 'href="https://blog.example.com/new-3"' in html
    carried = db.session.scalars(select(FeedItem).where(FeedItem.baseline.is_(False))).all()
    assert len(carried) == 3 and len({i.broadcast_id for i in carried}) == 3
    assert db.session.scalar(select(Broadcast).where(Broadcast.id == carried[0].broadcast_id)
                             ).status == "sent"

    # Again: the server answers 304 to our ETag, and nothing is sent.
    poll_due(automation_id)
    run_worker_burst()
    assert feed_server.state.requests[-1]["If-None-Match"] == feed_of(automation_id).etag
    assert feed_server.state.answered[-1] == 304
    # And a whole answer with the same items (its validators forgotten) sends nothing either.
    poll_due(automation_id, etag=None, last_modified=None)
    run_worker_burst()
    assert feed_server.state.answered[-1] == 200
    assert len(smtp_server.messages) == 6
    assert feed_of(automation_id).error is None


def test_a_digest_collects_the_new_items_and_sends_one_email_at_its_time(
        app, client, api_headers, readers, feed_server, smtp_server, run_worker_burst):
    feed_server.state.posts = [Post("old-1", "Old one")]
    automation_id = make_automation(client, api_headers, readers, feed_server.url,
                                    mode="digest", every="weekly", at="08:30", weekday=4)
    feed = feed_of(automation_id)
    assert feed.next_digest_at > utcnow()
    run_worker_burst()
    feed_server.state.posts[:0] = [Post("b", "Bravo", published="Tue, 02 Jan 2024 10:00:00 +0000"),
                                   Post("a", "Alpha", published="Mon, 01 Jan 2024 11:00:00 +0000")]
    poll_due(automation_id)
    run_worker_burst()
    assert smtp_server.messages == []  # collected, waiting for the digest's time
    shown = client.get(f"/api/automations/{automation_id}", headers=api_headers).json
    assert shown["feed"]["waiting"] == 2 and shown["feed"]["sent"] == []
    assert shown["trigger"] == {"type": "feed", "url": feed_server.url, "mode": "digest",
                                "every": "weekly", "at": "08:30", "weekday": 4,
                                "list_id": readers, "segment_id": None}

    db.session.execute(update(Feed).where(Feed.automation_id == automation_id)
                       .values(next_digest_at=utcnow() - timedelta(seconds=1)))
    db.session.commit()
    run_worker_burst()
    assert sorted(smtp_server.recipients()) == ["ada@example.com", "bob@example.com"]
    html = smtp_server.messages[0].message.get_body(("html",)).get_content()
    body = html[html.index("Hello"):]  # (the subject is the page's <title> too)
    assert body.index("Alpha") < body.index("Bravo")  # oldest first
    assert smtp_server.messages[0].message["Subject"] == "New: Bravo"
    feed = feed_of(automation_id)
    assert feed.next_digest_at > utcnow() + timedelta(hours=1)
    assert feed.next_digest_at.weekday() in (3, 4, 5)  # a Friday 08:30 in the owner's zone
    run_worker_burst()
    assert len(smtp_server.messages) == 2  # nothing twice
    shown = client.get(f"/api/automations/{automation_id}", headers=api_headers).json
    assert shown["feed"]["waiting"] == 0 and shown["feed"]["sent_count"] == 2


def test_a_failing_feed_shows_its_error_and_sends_nothing_until_it_works_again(
        app, logged_in_client, api_headers, readers, feed_server, smtp_server, run_worker_burst):
    client = logged_in_client
    feed_server.state.posts = [Post("old-1", "Old one")]
    automation_id = make_automation(client, api_headers, readers, feed_server.url)
    run_worker_burst()
    feed_server.state.posts.insert(0, Post("new-1", "Fresh"))
    feed_server.state.status = 500
    poll_due(automation_id)
    run_worker_burst()
    feed = feed_of(automation_id)
    assert "HTTP 500" in feed.error and smtp_server.messages == []
    page = client.get(f"/automations/{automation_id}/edit")
    assert "HTTP 500" in page.text
    assert "HTTP 500" in client.get("/automations/").text

    feed_server.state.status, feed_server.state.raw = 200, b"<html><body>a web page</body></html>"
    poll_due(automation_id, etag=None)
    run_worker_burst()
    assert "not with an RSS or Atom feed" in feed_of(automation_id).error
    assert smtp_server.messages == []

    feed_server.state.raw = None
    poll_due(automation_id)
    run_worker_burst()
    assert feed_of(automation_id).error is None
    assert sorted(smtp_server.recipients()) == ["ada@example.com", "bob@example.com"]
    page = client.get(f"/automations/{automation_id}/edit")
    assert "Fresh" in page.text and "HTTP 500" not in page.text
