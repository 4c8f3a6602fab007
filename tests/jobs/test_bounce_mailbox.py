"""Bounces read from a real IMAP mailbox (a private Dovecot on loopback) by the real worker:
VERP Return-Paths on the wire, each bounce applied once with a webhook bounce's effect, and
each message moved only after its effect is committed, across a SIGKILL of the worker."""

from __future__ import annotations

import re

from sqlalchemy import func, select

from broadside.core.mailbox_urls import parse
from broadside.core.models import Delivery, Event, MailboxMessage, Subscriber
from broadside.feedback.mailbox import state
from broadside.feedback.mailbox.applying import apply_message
from broadside.feedback.mailbox.imap import Imap
from broadside.feedback.mailbox.reading import read_mailbox
from broadside.feedback.mailbox.reports import read_report
from broadside.mail.message_refs import delivery_message_id
from broadside.mail.verp import Verp
from tests.bounces import EXPECTED, FORMATS, fill
from tests.helpers import make_list, start_broadcast, statuses, wait_until
from webapp.extensions import db

VERP_ADDRESS = re.compile(r"^bounces\+d(\d+)-[a-z2-7]{12}@example\.com$")


def _send(app, smtp_server, run_worker_burst, mailbox_url: str, size: int) -> dict[str, tuple[str, str]]:
    """A broadcast to `size` people sent through the real worker with the default identity's
    bounce mailbox set: each recipient's (MAIL FROM, Message-ID) as the SMTP server got them."""
    app.config["BOUNCE_MAILBOX_URL"] = mailbox_url
    weekly = make_list(db.session, size)
    broadcast = start_broadcast(app, weekly)
    assert run_worker_burst() == 0
    assert statuses(broadcast.id) == {"sent": size}
    return {m.rcpt_tos[0]: (m.mail_from, m.message["Message-ID"]) for m in smtp_server.messages}


def test_smtp_mail_carries_a_verp_return_path_naming_its_delivery(app, smtp_server, run_worker_burst):
    sent = _send(app, smtp_server, run_worker_burst,
                 "imaps://bounces%40example.com:pw@imap.example.com/INBOX", 3)
    verp = Verp(app.config["SECRET_KEY"])
    for rcpt, (mail_from, message_id) in sent.items():
        match = VERP_ADDRESS.match(mail_from)
        assert match, mail_from
        delivery = db.session.scalar(select(Delivery).join(Subscriber).where(Subscriber.email == rcpt))
        assert int(match.group(1)) == delivery.id
        assert verp.rows_in(mail_from) == [("delivery", delivery.id)]
        assert message_id == delivery_message_id(delivery.id, delivery.broadcast_id, "newsletter@localhost")
        # A forged mark names nothing.
        local, domain = mail_from.split("@")
        forged = local[:-1] + ("q" if local[-1] != "q" else "r")
        assert verp.rows_in(f"{forged}@{domain}") == []
    # Without a mailbox, the envelope sender is the From address, as it always was.
    app.config["BOUNCE_MAILBOX_URL"] = ""
    smtp_server.reset()
    start_broadcast(app, make_list(db.session, 2, name="Other", domain="other.example"))
    assert run_worker_burst() == 0
    assert [m.mail_from for m in smtp_server.messages] == ["newsletter@localhost"] * 2


def _bounces(sent: dict[str, tuple[str, str]]) -> list[tuple[str, str, bytes]]:
    """One bounce per recipient, the formats in turn: (recipient, format, bytes)."""
    made = []
    for n, (rcpt, (mail_from, message_id)) in enumerate(sorted(sent.items())):
        name = FORMATS[n % len(FORMATS)]
        made.append((rcpt, name, fill(name, verp=mail_from, rcpt=rcpt, message_id=message_id, n=n)))
    return made


def _events(kind: str) -> dict[int, int]:
    db.session.commit()
    return dict(db.session.execute(select(Event.subscriber_id, func.count()).where(Event.kind == kind)
                                   .group_by(Event.subscriber_id)).all())


def _assert_each_applied_once(bounces, dovecot, forged: int = 0) -> None:
    db.session.commit()
    people = dict(db.session.execute(select(Subscriber.email, Subscriber.id)).all())
    suppressed, bounced, complained = _events("suppressed"), _events("bounce"), _events("complaint")
    failed = _events("failed")
    for rcpt, name, _ in bounces:
        who = people[rcpt]
        person = db.session.get(Subscriber, who)
        delivery = db.session.scalar(select(Delivery).where(Delivery.subscriber_id == who))
        expected = EXPECTED[name]
        if expected == "hard":
            assert (person.suppression, delivery.status) == ("bounced", "failed"), name
            assert delivery.reason.startswith("bounced: ")
            event = db.session.scalar(select(Event).where(Event.delivery_id == delivery.id,
                                                          Event.kind == "failed"))
            assert event.data["was"] == "sent" and event.data["accepted_with"]  # the 250 kept
            assert (suppressed.get(who), bounced.get(who), failed.get(who)) == (1, 1, 1), name
        elif expected == "soft":
            assert (person.suppression, person.soft_bounce_count, delivery.status) == (None, 1, "sent")
            assert (suppressed.get(who), bounced.get(who), failed.get(who)) == (None, 1, None)
        elif expected == "complaint":
            assert (person.suppression, delivery.status) == ("complained", "sent")
            assert (suppressed.get(who), complained.get(who)) == (1, 1)
        else:
            assert person.suppression is None and delivery.status == "sent"
            assert who not in bounced and who not in suppressed
    understood = sum(1 for _, name, _ in bounces if EXPECTED[name])
    assert dovecot.count("INBOX") == 0
    assert dovecot.count("Processed") == understood
    assert dovecot.count("Unrecognised") == len(bounces) - understood + forged
    assert db.session.scalar(select(func.count()).select_from(MailboxMessage)) == len(bounces) + forged


def test_the_worker_applies_every_format_once_and_moves_each_message(
        app, smtp_server, run_worker_burst, dovecot, worker_factory):
    sent = _send(app, smtp_server, run_worker_burst, dovecot.url, len(FORMATS))
    bounces = _bounces(sent)
    # And one whose token is forged: it names nothing, so it changes nothing.
    rcpt, (mail_from, message_id) = sorted(sent.items())[0]
    forged = re.sub(r"-[a-z2-7]{12}@", "-aaaaaaaaaaaa@", mail_from)
    dovecot.append([raw for _, _, raw in bounces]
                   + [fill("postfix_dsn.eml", verp=forged, rcpt="someone@else.example",
                           message_id="<not-ours@else.example>", n=999)])
    worker_factory(BOUNCE_MAILBOX_URL=dovecot.url, BOUNCE_MAILBOX_POLL_SECONDS="0.2")
    wait_until(lambda: dovecot.count("INBOX") == 0, timeout=30, message="the worker read the mailbox")
    _assert_each_applied_once(bounces, dovecot, forged=1)
    assert db.session.scalar(select(MailboxMessage.outcome).where(
        MailboxMessage.message_key.like("%.999@mx1.example.net>"))) == "unmatched"


def test_a_sigkill_mid_mailbox_loses_nothing_and_applies_nothing_twice(
        app, smtp_server, run_worker_burst, dovecot, worker_factory):
    """The proof: 200 bounces of the 8 formats; the worker is killed with SIGKILL after some
    are processed, a new one finishes; each is applied exactly once, none is lost."""
    sent = _send(app, smtp_server, run_worker_burst, dovecot.url, 200)
    bounces = _bounces(sent)
    dovecot.append([raw for _, _, raw in bounces])
    env = {"BOUNCE_MAILBOX_URL": dovecot.url, "BOUNCE_MAILBOX_POLL_SECONDS": "0.2"}
    first = worker_factory(**env)

    def processed() -> int:
        db.session.commit()
        return db.session.scalar(select(func.count()).select_from(MailboxMessage)) or 0

    wait_until(lambda: processed() >= 60, timeout=60, interval=0.005)
    first.kill()
    left = dovecot.count("INBOX")
    assert 0 < left < 200 and processed() < 200, "killed mid-mailbox"
    worker_factory(**env)
    wait_until(lambda: dovecot.count("INBOX") == 0, timeout=60, message="the second worker finished")
    wait_until(lambda: processed() == 200)
    _assert_each_applied_once(bounces, dovecot)


def test_a_message_committed_but_not_moved_is_only_moved_when_read_again(app, smtp_server,
                                                                         run_worker_burst, dovecot):
    """The crash between a message's commit and its MOVE: read again, it is found processed
    (the UNIQUE key), moved, and its effect is not applied a second time."""
    sent = _send(app, smtp_server, run_worker_burst, dovecot.url, 1)
    [(rcpt, name, raw)] = _bounces(sent)
    dovecot.append([raw])
    verp, box = Verp(app.config["SECRET_KEY"]), parse(dovecot.url)
    state.ensure(db.session, box.key, "test")
    with Imap(box) as imap:
        [(uid, fetched)] = imap.fetch(imap.uids_after(0))
        validity = imap.uid_validity
    assert apply_message(db.session, box.key, validity, uid, read_report(fetched, verp))  # then "killed"
    assert dovecot.count("INBOX") == 1
    done = read_mailbox(db.session, box, verp)
    assert (done.applied, done.again, done.moved) == (0, 1, {"Processed": 1})
    assert dovecot.count("INBOX") == 0
    _assert_each_applied_once([(rcpt, name, raw)], dovecot)


def test_a_mailbox_that_cannot_be_read_says_why_and_recovers(app, dovecot):
    """A refused login is recorded on the mailbox's row in the owner's words (the System
    page's "last error"), and the next round that reads it clears it."""
    from jobs.app import from_flask
    from jobs.database import db as jobs_db
    from jobs.mailboxes import Mailboxes

    app.config["BOUNCE_MAILBOX_URL"] = dovecot.url.replace("s3cret", "wrong")
    worker_app = from_flask(app)
    jobs_db.bind(worker_app.engine)
    redis = app.extensions["broadside_redis"]
    assert Mailboxes(worker_app).round(redis) is False
    jobs_db.session.remove()
    [standing] = state.figures(db.session)
    assert "refused the login" in standing.last_error and "wrong" not in standing.last_error
    assert standing.last_read_at is None
    worker_app.config["BOUNCE_MAILBOX_URL"] = dovecot.url  # the owner fixed the password
    Mailboxes(worker_app).round(redis)
    jobs_db.session.remove()
    db.session.expire_all()
    [standing] = state.figures(db.session)
    assert standing.last_error is None and standing.last_read_at is not None
