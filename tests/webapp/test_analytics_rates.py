"""The broadcast page's opens and clicks: rates beside the counts (opened ÷ sent and clicked ÷
sent, readers only), "—" where nothing was sent to divide by, and counts that read as English
("1 click", not "1 clicks"), on SQLite and PostgreSQL. And the helpers that say them."""

from __future__ import annotations

import html
import re

from sqlalchemy import select, update

from broadside.campaigns.analytics import modes
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Broadcast, Delivery, PersonActivity, TrackingDay
from tests.helpers import make_list
from webapp.extensions import db
from webapp.templating import percent


def sent_with(app, tracking: str, *, sent: int, days: list[dict[str, int]],
              people: dict[str, int] | None = None) -> int:
    """A broadcast sent with `tracking` to a list of three: `sent` of them sent, the tracking
    rows as given (`people`: how many copies were first opened / clicked, per person)."""
    weekly = make_list(db.session, 3)
    if tracking == modes.PER_PERSON:
        modes.set_list_per_person(db.session, weekly.id, True)
    draft = create_draft(db.session, list_id=weekly.id, subject="News", body="Hi")
    modes.choose(db.session, draft.id, tracking)
    send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=None)
    db.session.execute(update(Broadcast).where(Broadcast.id == draft.id).values(
        status="sent", sent_count=sent, pending_count=3 - sent, total=3))
    for day, counts in enumerate(days):
        db.session.add(TrackingDay(broadcast_id=draft.id, day=day, **counts))
    copies = db.session.scalars(select(Delivery.id).where(Delivery.broadcast_id == draft.id)
                                .order_by(Delivery.id)).all()
    for kind, n in (people or {}).items():
        db.session.add_all(PersonActivity(broadcast_id=draft.id, delivery_id=copy, kind=kind,
                                          position=-1 if kind == "open" else 0)
                           for copy in copies[:n])
    db.session.commit()
    return draft.id


def card_text(client, broadcast_id: int) -> str:
    page = client.get(f"/broadcasts/{broadcast_id}").text
    card = page.split('id="analytics"', 1)[1].split("</section>", 1)[0]
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", card)))


def test_aggregate_counts_have_their_rates_and_read_as_english(app, logged_in_client):
    broadcast_id = sent_with(app, modes.AGGREGATE, sent=3, days=[
        {"opens": 1, "clicks": 1, "bot_opens": 1, "bot_clicks": 1}, {"opens": 1}])
    card = card_text(logged_in_client, broadcast_id)
    assert "2 opens (66.7% of 3 sent)" in card
    assert "1 click (33.3% of 3 sent)" in card
    assert "and 1 open, 1 click taken for machines" in card
    assert "Day 1: 1 open Day 1: 1 machine open Day 1: 1 click Day 1: 1 machine click" in card
    assert "1 clicks" not in card and "1 opens" not in card
    assert "a rate can pass 100%" in card  # a reader opening again later counts again


def test_per_person_rates_count_people(app, logged_in_client):
    broadcast_id = sent_with(app, modes.PER_PERSON, sent=2, days=[{"opens": 3, "clicks": 1}],
                             people={"open": 1, "click": 1})
    card = card_text(logged_in_client, broadcast_id)
    assert "1 person opened (50% of 2 sent)" in card
    assert "1 clicked (50% of 2 sent)" in card
    assert "3 opens 1 click" in card  # the totals, without a rate: they count repeats
    assert "the latest 1 person," in card


def test_nothing_sent_shows_a_dash_not_an_error(app, logged_in_client):
    broadcast_id = sent_with(app, modes.AGGREGATE, sent=0, days=[{"opens": 0}])
    card = card_text(logged_in_client, broadcast_id)
    assert "0 opens (— of 0 sent)" in card and "0 clicks (— of 0 sent)" in card


def test_rates_are_written_as_english_writes_them():
    assert [percent(p, w) for p, w in ((1, 3), (1, 2), (0, 5), (1, 0), (1, None), (1, 10_000),
                                       (9_999, 10_000), (3, 2))] == [
        "33.3%", "50%", "0%", "—", "—", "<0.1%", ">99.9%", "150%"]
