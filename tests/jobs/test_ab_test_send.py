"""An A/B test through the real worker and SMTP server: the split fixed in each reader's row
at the snapshot (the same draw in SQL on both databases as in Python), the test's copies
first, nothing to the rest during the wait, then the winner judged on real per-person hits
(made through the tracking URLs the readers received) and sent to exactly the rest."""

from __future__ import annotations

import re
from html import unescape

from sqlalchemy import select, update

from broadside.campaigns.analytics import modes
from broadside.campaigns.broadcasts import ab_sending
from broadside.campaigns.broadcasts.ab_sending import variant_of
from broadside.campaigns.broadcasts.ab_tests import REST, clean_ab_test
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.errors import ValidationError
from broadside.core.models import Broadcast, Delivery, MailingList, Subscriber
from broadside.core.timeutil import utcnow
from tests.helpers import assert_nobody_twice, make_list
from tests.webapp.test_tracking import READER, later
from webapp.extensions import db, get_jobs

HREF = re.compile(r'href="([^"]*/t/c/[^"]*)"')
SUBJECTS = ["Spring news", "Our spring, in three pictures", "Read this before Friday"]


def ab_broadcast(app, size: int, *, share: int = 50, measure: str = "clicks", default: int = 0,
                 variants: int = 2, per_person: bool = True) -> Broadcast:
    weekly = make_list(db.session, size)
    weekly.per_person_tracking = per_person
    draft = create_draft(db.session, list_id=weekly.id, subject=SUBJECTS[0],
                         body="Hello {{ name }}, [the news](https://example.com/news).")
    draft.ab_test = clean_ab_test({
        "variants": [{"subject": s} for s in SUBJECTS[:variants]], "share": share,
        "measure": measure, "wait_hours": 4, "default": default})
    db.session.commit()
    if per_person:
        modes.choose(db.session, draft.id, modes.PER_PERSON)
    return draft


def send(app, draft: Broadcast) -> Broadcast:
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                          jobs=get_jobs())


def variants_by_email() -> dict[str, int]:
    db.session.expire_all()
    return dict(db.session.execute(
        select(Subscriber.email, Delivery.variant)
        .join(Delivery, Delivery.subscriber_id == Subscriber.id)).all())


def the_wait_is_over(broadcast_id: int) -> None:
    """The hours of the wait pass (the worker wrote when it ends; the test moves it back)."""
    past = utcnow()
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast_id)
                       .values(ab_wait_until=past, waiting_until=past))
    db.session.commit()


def test_each_reader_is_drawn_once_at_the_snapshot_as_python_draws_them(app):
    draft = ab_broadcast(app, 600, share=30, variants=3)
    broadcast = send(app, draft)
    db.session.refresh(broadcast)
    assert broadcast.ab_seed
    rows = db.session.execute(select(Delivery.subscriber_id, Delivery.variant)
                              .where(Delivery.broadcast_id == broadcast.id)).all()
    test = clean_ab_test(broadcast.ab_test)
    assert len(rows) == 600
    # SQL's draw (SQLite's and PostgreSQL's integers) is Python's, reader by reader.
    assert all(variant == variant_of(subscriber, test, broadcast.ab_seed)
               for subscriber, variant in rows)
    in_test = [variant for _subscriber, variant in rows if variant != REST]
    assert 120 <= len(in_test) <= 240, len(in_test)  # 30 % of 600, give or take
    assert {variant for variant in in_test} == {0, 1, 2}


def test_a_test_needs_per_person_tracking_and_refuses_send_without_it(app):
    draft = ab_broadcast(app, 10, per_person=False)
    try:
        send(app, draft)
    except ValidationError as refused:
        assert "per-person tracking" in refused.message
    else:
        raise AssertionError("an A/B test was sent to a list that does not track per person")
    assert db.session.get(Broadcast, draft.id).status == "draft"


def click_the_link(app, client, message) -> None:
    html = message.message.get_body(("html",)).get_content()
    link = unescape(HREF.search(html).group(1))
    assert client.get(later(app, link), headers=READER).status_code == 302


def test_the_clear_winner_by_real_clicks_goes_to_exactly_the_rest(
        app, client, logged_in_client, smtp_server, run_worker_burst):
    broadcast = send(app, ab_broadcast(app, 80))
    assert run_worker_burst() == 0
    drawn = variants_by_email()
    test_group = {email for email, variant in drawn.items() if variant != REST}
    rest = set(drawn) - test_group
    assert test_group and rest
    # The test's copies went out, each with its variant's subject; the rest wait.
    assert {m.rcpt_tos[0] for m in smtp_server.messages} == test_group
    for message in smtp_server.messages:
        assert message.message["Subject"] == SUBJECTS[drawn[message.rcpt_tos[0]]]
    db.session.expire_all()
    waiting = db.session.get(Broadcast, broadcast.id)
    assert waiting.status == "sending" and waiting.ab_winner is None
    assert waiting.ab_wait_until is not None and waiting.waiting_until == waiting.ab_wait_until
    page = logged_in_client.get(f"/broadcasts/{broadcast.id}").text
    assert "A/B test: its copies are out; the winner is chosen at" in page
    assert "the rest go once the winner is chosen" in page
    # Everyone who got B clicks; nobody who got A does.
    for message in smtp_server.messages:
        if drawn[message.rcpt_tos[0]] == 1:
            click_the_link(app, client, message)
    # A second run during the wait sends nothing.
    assert run_worker_burst() == 0
    assert len(smtp_server.messages) == len(test_group)

    the_wait_is_over(broadcast.id)
    assert run_worker_burst() == 0
    db.session.expire_all()
    done = db.session.get(Broadcast, broadcast.id)
    assert done.status == "sent" and done.ab_winner == 1
    assert done.ab_result["clear"] is True and done.ab_result["p_value"] < 0.05
    later_ones = smtp_server.messages[len(test_group):]
    assert {m.rcpt_tos[0] for m in later_ones} == rest
    assert {m.message["Subject"] for m in later_ones} == {SUBJECTS[1]}
    assert_nobody_twice(smtp_server.recipients())
    # Each variant's clicks were counted apart (B's links have their own positions).
    assert all(row.variant in (0, 1, REST) for row in db.session.scalars(select(Delivery)))


def test_without_a_clear_difference_the_owners_default_wins(
        app, client, smtp_server, run_worker_burst):
    broadcast = send(app, ab_broadcast(app, 60, default=1))
    assert run_worker_burst() == 0
    drawn = variants_by_email()
    clicked = set()
    for message in smtp_server.messages:  # one reader of each variant clicks
        variant = drawn[message.rcpt_tos[0]]
        if variant not in clicked:
            click_the_link(app, client, message)
            clicked.add(variant)
    the_wait_is_over(broadcast.id)
    assert run_worker_burst() == 0
    db.session.expire_all()
    done = db.session.get(Broadcast, broadcast.id)
    assert done.status == "sent" and done.ab_winner == 1 and done.ab_result["clear"] is False
    rest = {email for email, variant in drawn.items() if variant == REST}
    got = {m.rcpt_tos[0]: m.message["Subject"] for m in smtp_server.messages}
    assert set(got) == set(drawn) and all(got[email] == SUBJECTS[1] for email in rest)
    assert db.session.scalar(select(MailingList.per_person_tracking)) is True


def test_the_wait_starts_only_once_every_chunk_of_the_audience_is_written(
        app, smtp_server, run_worker_burst, monkeypatch):
    """A large audience is written by the worker in chunks: the test's copies of the last
    chunk go out before the wait starts, so the winner is judged on the whole test."""
    from functools import partial

    from broadside.campaigns.broadcasts import snapshot
    from jobs import tasks
    monkeypatch.setattr(snapshot, "INLINE_LIMIT", 5)
    monkeypatch.setattr(snapshot, "MIN_CHUNK", 7)
    monkeypatch.setattr(snapshot, "MAX_CHUNK", 7)
    monkeypatch.setattr(snapshot, "_rate", {})
    # One chunk before each slice, so the worker sends while the audience is still written.
    monkeypatch.setattr(tasks, "prepare", partial(snapshot.prepare, seconds=0, longest=0))
    # A seed whose draw puts nobody of the first two chunks in the test (5 % of 60: ids 26,
    # 28, 40, 42 and 60): the test's copies are all in later chunks.
    monkeypatch.setattr(ab_sending, "seed", lambda: 14)
    broadcast = send(app, ab_broadcast(app, 60, share=5))
    assert run_worker_burst() == 0
    drawn = variants_by_email()
    assert len(drawn) == 60 and sum(1 for v in drawn.values() if v != REST) == 5
    db.session.expire_all()
    waiting = db.session.get(Broadcast, broadcast.id)
    assert waiting.snapshot_cursor >= waiting.snapshot_until and waiting.ab_wait_until is not None
    assert {m.rcpt_tos[0] for m in smtp_server.messages} == \
        {email for email, variant in drawn.items() if variant != REST}
