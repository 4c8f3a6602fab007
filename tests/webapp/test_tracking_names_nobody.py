"""Counts-only tracking names nobody, really: a link whose address carries a merge field is
left untracked (the send page says which, before Send), one client loading one pixel or
following one link again within ten minutes counts once (Redis holds a keyed digest for ten
minutes, never the address), and with Redis down the pixel still answers.

Through the real worker and aiosmtpd, the routes through the test client, on SQLite and
PostgreSQL where the database counts. The access log is in test_tracking_access_log.py."""

from __future__ import annotations

import re
import time
from html import unescape

import pytest
from sqlalchemy import func, insert, select, update

from broadside.campaigns.analytics import modes
from broadside.campaigns.analytics.repeats import REPEAT_SECONDS
from broadside.campaigns.analytics.tokens import TrackingTokens, slot_of
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core.models import Broadcast, PersonActivity, TrackedLink, TrackingDay
from tests.helpers import make_list
from tests.webapp.test_tracking import (
    BODY,
    HREF,
    READER,
    every_row_as_text,
    html_of,
    later,
    send,
    text_of,
)
from webapp.extensions import db

PERSONAL = "https://acme.example/people/{{ email }}"  # the link of BODY that names its reader


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request) -> str:
    return request.param


def tracked_links(html: str) -> list[str]:
    return [unescape(h) for h in HREF.findall(html) if "/t/c/" in h]


def day_counts(broadcast_id: int) -> tuple[int, int, int, int]:
    db.session.commit()
    day = db.session.scalar(select(TrackingDay).where(TrackingDay.broadcast_id == broadcast_id))
    return (0, 0, 0, 0) if day is None else (day.opens, day.bot_opens, day.clicks, day.bot_clicks)


def sent_broadcast(tracking: str = "aggregate") -> int:
    """A sent broadcast with one tracked link, its rows as Send leaves them (no worker)."""
    weekly = make_list(db.session, 0)
    draft = create_draft(db.session, list_id=weekly.id, subject="S", body="B")
    db.session.execute(update(Broadcast).where(Broadcast.id == draft.id)
                       .values(tracking=tracking, status="sent"))
    db.session.execute(insert(TrackedLink).values(broadcast_id=draft.id, position=0,
                                                  url="https://acme.example/notes", clicks=0,
                                                  bot_clicks=0))
    db.session.commit()
    return draft.id


def an_hour_ago() -> int:
    """A send slot an hour back: a hit now is a reader's, not a scanner's on delivery."""
    return slot_of(time.time()) - 360


def test_counts_only_leaves_links_with_merge_fields_untracked_and_says_so(
        app, logged_in_client, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 2)
    draft = create_draft(db.session, list_id=weekly.id, subject="News", body=BODY)
    # The send page says, before Send, which link counts only leaves as it is.
    page = unescape(logged_in_client.get(f"/broadcasts/{draft.id}/send").text)
    assert "1 link carries a merge field and is left untracked in counts-only mode" in page
    hint = page.split('id="tracking-untracked"', 1)[1].split("</div>", 1)[0]
    assert PERSONAL in hint and "acme.example/notes" not in hint

    broadcast = send(app, weekly, tracking="aggregate", body=BODY)
    run_worker_burst()
    tokens = TrackingTokens(app.config["SECRET_KEY"])
    assert len(smtp_server.messages) == 2
    for message in smtp_server.messages:
        reader = message.rcpt_tos[0]
        html, plain = html_of(message), text_of(message)
        hrefs = [unescape(h) for h in HREF.findall(html)]
        # Their own page: straight to its address, in both parts; the two others tracked.
        assert f"https://acme.example/people/{reader}" in hrefs
        assert f"https://acme.example/people/{reader}" in plain
        links = tracked_links(html)
        assert len(links) == 2 and plain.count("/t/c/") == 2
        claims = [tokens.read_click(link.rsplit("/", 1)[1]) for link in links]
        assert [(c.position, c.url, c.delivery_id) for c in claims] == [
            (0, "https://acme.example/notes?a=1&b=2", None), (2, "https://shop.example/", None)]
        for link in links:  # no token carries the reader, in any form
            assert reader not in str(tokens.clicks.loads(link.rsplit("/", 1)[1]))
    rows = db.session.execute(select(TrackedLink.position, TrackedLink.url)
                              .where(TrackedLink.broadcast_id == broadcast.id)
                              .order_by(TrackedLink.position)).all()
    assert [tuple(r) for r in rows] == [(0, "https://acme.example/notes?a=1&b=2"),
                                        (2, "https://shop.example/")]
    # The broadcast's page says which link was not tracked, and why.
    show = unescape(logged_in_client.get(f"/broadcasts/{broadcast.id}").text)
    note = show.split('id="analytics-untracked"', 1)[1].split("</p>", 1)[0]
    assert "carries a merge field" in note and PERSONAL in note


def test_per_person_still_tracks_them_with_the_token_that_names_the_copy(
        app, client, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 1)
    modes.set_list_per_person(db.session, weekly.id, True)
    broadcast = send(app, weekly, tracking="per_person", body=BODY)
    run_worker_burst()
    html = html_of(smtp_server.messages[0])
    reader = smtp_server.messages[0].rcpt_tos[0]
    links = tracked_links(html)
    assert len(links) == 3  # per person: the copy is named anyway, so its own page is tracked
    claim = TrackingTokens(app.config["SECRET_KEY"]).read_click(links[1].rsplit("/", 1)[1])
    assert claim.delivery_id is not None and claim.url == f"https://acme.example/people/{reader}"
    hit = client.get(later(app, links[1]), headers=READER)
    assert hit.status_code == 302 and hit.location == f"https://acme.example/people/{reader}"
    assert db.session.scalar(select(func.count()).select_from(PersonActivity)
                             .where(PersonActivity.kind == "click")) == 1
    assert db.session.scalar(select(func.count()).select_from(TrackedLink)
                             .where(TrackedLink.broadcast_id == broadcast.id)) == 3


def test_one_client_loading_one_pixel_again_within_ten_minutes_counts_once(
        app, client, namespace, redis_client):
    broadcast_id = sent_broadcast()
    tokens = TrackingTokens(app.config["SECRET_KEY"])
    slot = an_hour_ago()
    pixel = f"/t/o/{tokens.open_token(broadcast_id, slot)}.gif"
    here, there = {"REMOTE_ADDR": "203.0.113.71"}, {"REMOTE_ADDR": "203.0.113.72"}
    for _ in range(3):  # the mail program shows the message three times
        answer = client.get(pixel, headers=READER, environ_base=here)
        assert answer.status_code == 200 and answer.mimetype == "image/gif"
    assert day_counts(broadcast_id) == (1, 0, 0, 0)
    client.get(pixel, headers=READER, environ_base=there)  # another client: another open
    client.get(pixel, headers={"User-Agent": "Thunderbird/128.0"}, environ_base=here)  # another program
    later_copy = f"/t/o/{tokens.open_token(broadcast_id, slot + 1)}.gif"  # a copy sent 10 s later
    client.get(later_copy, headers=READER, environ_base=here)
    assert day_counts(broadcast_id) == (4, 0, 0, 0)

    # What Redis holds: one key per first hit, a digest that lives ten minutes, no address.
    keys = sorted(redis_client.scan_iter(f"{namespace}:analytics:seen:*"))
    assert len(keys) == 4
    for key in keys:
        assert 0 < redis_client.ttl(key) <= REPEAT_SECONDS
        assert redis_client.get(key) == b"1"
        assert re.fullmatch(rf"{namespace}:analytics:seen:[0-9a-f]{{24}}", key.decode())
    dumped = " ".join(key.decode() for key in redis_client.scan_iter(f"{namespace}:*"))
    assert "203.0.113" not in dumped and "Mozilla" not in dumped
    assert "203.0.113" not in every_row_as_text()
    # Ten minutes later (the keys gone, as their TTL makes them go), it counts again.
    redis_client.delete(*keys)
    client.get(pixel, headers=READER, environ_base=here)
    assert day_counts(broadcast_id) == (5, 0, 0, 0)


def test_a_double_click_is_one_readers_click_not_a_prefetch(app, client):
    broadcast_id = sent_broadcast()
    tokens = TrackingTokens(app.config["SECRET_KEY"])
    link = "/t/c/" + tokens.click_token(broadcast_id, 0, "https://acme.example/notes",
                                        an_hour_ago())
    env = {"REMOTE_ADDR": "203.0.113.80"}
    for _ in range(2):  # within the same second: a double click, or the browser retrying
        answer = client.get(link, headers=READER, environ_base=env)
        assert answer.status_code == 302 and answer.location == "https://acme.example/notes"
    # Before: the second click made a one-second "burst", and both went to the machines.
    assert day_counts(broadcast_id) == (0, 0, 1, 0)
    assert db.session.scalar(select(TrackedLink.clicks)) == 1
    # A token for a link the broadcast does not have stays a 404, the second time too.
    stranger = "/t/c/" + tokens.click_token(broadcast_id, 5, "https://evil.example/",
                                            an_hour_ago())
    assert [client.get(stranger, headers=READER, environ_base=env).status_code
            for _ in range(2)] == [404, 404]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_per_person_repeats_are_per_copy(app, client, backend):
    broadcast_id = sent_broadcast("per_person")
    tokens = TrackingTokens(app.config["SECRET_KEY"])
    slot = an_hour_ago()
    # Two people sharing one office address and mail program: two copies, two opens.
    for delivery_id in (11, 12, 11):
        client.get(f"/t/o/{tokens.open_token(broadcast_id, slot, delivery_id)}.gif",
                   headers=READER, environ_base={"REMOTE_ADDR": "203.0.113.90"})
    assert day_counts(broadcast_id) == (2, 0, 0, 0)


@pytest.fixture
def redis_down(app_config):
    app_config["REDIS_URL"] = "redis://127.0.0.1:1/0"  # nothing listens there


def test_with_redis_down_the_pixel_and_the_link_still_answer_and_count(redis_down, app, client):
    broadcast_id = sent_broadcast()
    tokens = TrackingTokens(app.config["SECRET_KEY"])
    slot = an_hour_ago()
    pixel = client.get(f"/t/o/{tokens.open_token(broadcast_id, slot)}.gif", headers=READER)
    assert pixel.status_code == 200 and pixel.mimetype == "image/gif"
    link = client.get("/t/c/" + tokens.click_token(broadcast_id, 0, "https://acme.example/notes",
                                                   slot), headers=READER)
    assert link.status_code == 302 and link.location == "https://acme.example/notes"
    assert day_counts(broadcast_id) == (1, 0, 1, 0)  # counted, once each
