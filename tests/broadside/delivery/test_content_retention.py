"""Bodies that do not outlive their use, on SQLite and PostgreSQL: a settled transactional or
test message loses its subject and body after the owner's retention (its SHA-256 in the
canonical form, its revision, outcome and times kept), never before, never while pending or
sending; a password reset's as soon as it is settled; in bounded batches; twice or from two
workers at once, the same result."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from broadside.core.models import TransactionalMessage
from broadside.core.models.transactional import TransactionalTemplate, TransactionalTemplateRevision
from broadside.core.site_settings import update_content_retention
from broadside.core.timeutil import utcnow
from broadside.delivery.content_retention import (
    canonical_sha256,
    removal_words,
    remove_batch,
    remove_due,
)
from jobs.content_retention import ensure_content_removed
from webapp.extensions import db, get_jobs

KINDS = ("test", "confirmation", "password_reset", "template")


def a_message(*, kind: str = "test", status: str = "sent", age: timedelta = timedelta(0),
              subject: str = "Your receipt, Ana", html: str = "<p>Ana paid 12 €</p>",
              text: str = "Ana paid 12 €", revision_id: int | None = None) -> int:
    created = utcnow() - age
    message = TransactionalMessage(
        kind=kind, to_email="ana@example.com", subject=subject, html=html, text=text,
        headers={"From-Name": "Shop", "From-Email": "shop@example.com", "X-Order": "Ana 4411"},
        status=status, created_at=created,
        sent_at=created if status == "sent" else None, template_revision_id=revision_id)
    db.session.add(message)
    db.session.commit()
    return message.id


def a_revision() -> int:
    template = TransactionalTemplate(name="Receipt", subject="Receipt", body="Paid")
    db.session.add(template)
    db.session.flush()
    revision = TransactionalTemplateRevision(
        template_id=template.id, subject="Receipt", body_markdown="Paid", html_template="<p>Paid</p>",
        text_template="Paid", from_email="shop@example.com")
    db.session.add(revision)
    db.session.commit()
    return revision.id


def row(message_id: int) -> TransactionalMessage:
    db.session.expire_all()
    found = db.session.get(TransactionalMessage, message_id)
    assert found is not None
    return found


def removed(message_id: int) -> bool:
    return row(message_id).content_removed_at is not None


def test_the_hash_is_sha256_over_netstrings_of_subject_html_and_text():
    # Written out by hand, as an owner checking a copy they hold would.
    expected = hashlib.sha256("3:Hé,".encode() + b"8:<p>x</p>," + b"1:x,").hexdigest()
    assert canonical_sha256("Hé", "<p>x</p>", "x") == expected
    # A separator in the content cannot make two messages hash alike.
    assert canonical_sha256("a,", "b", "") != canonical_sha256("a", ",b", "")


@pytest.mark.parametrize("kind", KINDS)
def test_a_settled_message_past_the_retention_keeps_only_its_hash_and_revision(app, kind):
    revision = a_revision() if kind == "template" else None
    message_id = a_message(kind=kind, age=timedelta(days=31), revision_id=revision)
    before = row(message_id)
    expected = canonical_sha256(before.subject, before.html, before.text)
    sent_at, to_email = before.sent_at, before.to_email

    done = remove_due(db.session)

    assert done.removed == 1 and done.finished
    after = row(message_id)
    assert after.content_sha256 == expected
    assert (after.subject, after.html, after.text, after.headers) == ("", "", "", None)
    assert after.content_removed_at is not None
    assert after.template_revision_id == revision
    assert (after.status, after.sent_at, after.to_email) == ("sent", sent_at, to_email)


def test_nothing_is_removed_before_the_retention(app):
    young = a_message(age=timedelta(days=29))
    assert remove_due(db.session).removed == 0
    assert not removed(young)
    assert remove_due(db.session, now=utcnow() + timedelta(days=2)).removed == 1
    assert removed(young)


def test_the_owners_retention_is_the_one_applied(app):
    update_content_retention(db.session, days=5)
    six_days = a_message(age=timedelta(days=6))
    four_days = a_message(age=timedelta(days=4))
    assert remove_due(db.session).removed == 1
    assert removed(six_days) and not removed(four_days)


@pytest.mark.parametrize("status", ["pending", "sending"])
def test_a_message_the_worker_still_needs_is_never_removed(app, status):
    waiting = a_message(status=status, age=timedelta(days=400))
    reset = a_message(kind="password_reset", status=status, age=timedelta(days=1))
    assert remove_due(db.session, now=utcnow() + timedelta(days=4000)).removed == 0
    assert remove_batch(db.session, [waiting, reset], now=utcnow()) == 0
    db.session.commit()
    assert row(waiting).html and row(reset).html


@pytest.mark.parametrize("status", ["sent", "failed", "unknown"])
def test_a_password_reset_loses_its_link_as_soon_as_it_is_settled(app, status):
    reset = a_message(kind="password_reset", status=status, html="<a href='https://x/reset/t'>",
                      text="https://x/reset/t")
    other = a_message(kind="test", status=status)  # sent the same moment: kept 30 days
    assert remove_due(db.session).removed == 1
    assert removed(reset) and not removed(other)
    assert "reset" not in row(reset).text


def test_an_invitation_loses_its_link_as_soon_as_it_is_settled(app):
    # Its link joins with a role for 72 hours: a working credential in the database, so it goes
    # at once like a reset's, and says why.
    invitation = a_message(kind="invitation", html="<a href='https://x/invitation/t'>",
                           text="https://x/invitation/t")
    waiting = a_message(kind="invitation", status="pending")  # not settled yet: kept
    other = a_message(kind="test")
    assert remove_due(db.session).removed == 1
    assert removed(invitation) and not removed(waiting) and not removed(other)
    assert "invitation" not in row(invitation).text
    message = row(invitation)
    assert "invitation link" in removal_words(message.kind, message.created_at,
                                              message.content_removed_at)


def test_batches_are_bounded_and_the_next_pass_goes_on(app):
    ids = [a_message(age=timedelta(days=40 + n)) for n in range(7)]
    first = remove_due(db.session, batch=3, max_batches=2)
    assert (first.removed, first.finished) == (6, False)
    assert sum(removed(i) for i in ids) == 6
    second = remove_due(db.session, batch=3, max_batches=2)
    assert (second.removed, second.finished) == (1, True)
    assert all(removed(i) for i in ids)


def test_twice_or_from_two_workers_at_once_the_same_result(app):
    ids = [a_message(age=timedelta(days=45)) for _ in range(3)]
    hashes = {i: canonical_sha256(row(i).subject, row(i).html, row(i).text) for i in ids}
    assert remove_batch(db.session, ids, now=utcnow()) == 3
    db.session.commit()
    # A second worker, on its own connection, with the same batch an instant later: its
    # UPDATE is guarded on the content still being kept, so it changes nothing.
    with Session(bind=db.engine) as second:
        assert remove_batch(second, ids, now=utcnow() + timedelta(hours=1)) == 0
        second.commit()
    assert {i: row(i).content_sha256 for i in ids} == hashes
    assert remove_due(db.session).removed == 0


def test_the_worker_tick_removes_once_a_minute_and_goes_on_when_more_is_left(app):
    jobs = get_jobs()
    ids = [a_message(age=timedelta(days=50)) for _ in range(3)]
    ensure_content_removed(db.session, jobs, batch=2, max_batches=1)
    assert sum(removed(i) for i in ids) == 2
    ensure_content_removed(db.session, jobs, batch=2, max_batches=1)  # more was left: goes on
    assert all(removed(i) for i in ids)
    later = a_message(age=timedelta(days=50))
    ensure_content_removed(db.session, jobs)  # nothing was left: not again within the minute
    assert not removed(later)
    jobs.redis.delete(f"{jobs.namespace}:content-retention:ran")  # the minute has passed
    ensure_content_removed(db.session, jobs)
    assert removed(later)


def test_the_words_state_the_real_age_the_content_went_at():
    sent = utcnow()
    assert removal_words("test", sent, None) is None
    assert removal_words("template", sent, sent + timedelta(days=30, minutes=4)) == \
        "content removed after 30 days"
    assert removal_words("confirmation", sent, sent + timedelta(days=1, hours=2)) == \
        "content removed after 1 day"
    assert removal_words("password_reset", sent, sent + timedelta(seconds=50)) == \
        "content removed as soon as its sending was over: it held a sign-in link"
