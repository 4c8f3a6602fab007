"""Automation messages through the real worker, Redis and SMTP server, on SQLite and
PostgreSQL: welcomes, sequences in order, the send-time re-check, disable/enable/delete, and a
channel-wide error pausing them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from broadside.audience.subscribers import service as subscribers
from broadside.campaigns.automations import entering
from broadside.campaigns.automations import service as automations
from broadside.core.models import Automation, AutomationMessage, MailingList, Subscriber, Subscription
from broadside.core.timeutil import utcnow
from tests.helpers import wait_until, while_the_server_takes
from webapp.extensions import db

# Every email prints a postal address: automations need Settings' to be enabled and to send.
pytestmark = pytest.mark.usefixtures("postal_address")


def a_list(name="Weekly") -> int:
    mailing_list = MailingList(name=name)
    db.session.add(mailing_list)
    db.session.commit()
    return mailing_list.id


def series(app, list_id, steps, name="Welcome"):
    data = automations.parse_input({"name": name, "trigger": {"type": "joined_list", "list_id": list_id},
                                    "steps": steps})
    automation = automations.create_automation(db.session, data, default_from=app.config["MAIL_FROM"])
    return automations.enable(db.session, automation.id)


def join(list_id, email, name="Ada"):
    subscriber, _ = subscribers.save_subscriber(db.session, email=email, name=name, list_ids=[list_id],
                                                welcome=True)
    return subscriber.id


def outcomes(automation_id):
    db.session.expire_all()
    return db.session.execute(
        select(AutomationMessage.subscriber_id, AutomationMessage.position, AutomationMessage.status,
               AutomationMessage.reason)
        .where(AutomationMessage.automation_id == automation_id)
        .order_by(AutomationMessage.subscriber_id, AutomationMessage.position)).all()


def test_a_welcome_goes_out_once_with_its_unsubscribe_link(app, smtp_server, run_worker_burst):
    list_id = a_list()
    automation = series(app, list_id, [{"delay": "PT0S", "subject": "Welcome, {{ name }}",
                                        "body": "Glad you are here."}])
    join(list_id, "ada@example.com")
    join(list_id, "ada@example.com")  # again: already on the list, already entered
    run_worker_burst()
    [message] = smtp_server.wait_for(1)
    assert message.rcpt_tos == ["ada@example.com"]
    assert message.message["Subject"] == "Welcome, Ada"
    assert message.message["List-Unsubscribe"].startswith("<http")
    assert [(r.status, r.position) for r in outcomes(automation.id)] == [("sent", 1)]
    run_worker_burst()
    assert len(smtp_server.messages) == 1


def test_a_sequence_arrives_in_order_and_stops_for_someone_who_unsubscribes(
        app, smtp_server, worker_factory):
    list_id = a_list()
    automation = series(app, list_id, [
        {"delay": "PT0S", "subject": "One", "body": "1"},
        {"delay": "PT1S", "subject": "Two", "body": "2"},
        {"delay": "PT2S", "subject": "Three", "body": "3"},
    ])
    stays = join(list_id, "stays@example.com", "Stay")
    leaves = join(list_id, "leaves@example.com", "Leave")
    # They unsubscribe while their first message is being taken, between step 1 and step 2.
    while_the_server_takes(smtp_server, "leaves@example.com", update(Subscription).where(
        Subscription.subscriber_id == leaves).values(status="unsubscribed"))
    worker_factory()
    # Settled: neither waiting nor claimed (a claimed row's outcome is not known yet).
    wait_until(lambda: all(r.status not in ("pending", "sending") for r in outcomes(automation.id)),
               timeout=30, message="every step settled")
    got = [(m.rcpt_tos[0], m.message["Subject"]) for m in smtp_server.messages]
    assert [s for to, s in got if to == "stays@example.com"] == ["One", "Two", "Three"]
    assert [s for to, s in got if to == "leaves@example.com"] == ["One"]
    left = [(r.position, r.status, r.reason) for r in outcomes(automation.id) if r.subscriber_id == leaves]
    assert [row[:2] for row in left] == [(1, "sent"), (2, "skipped"), (3, "skipped")]
    assert left[1][2] == left[2][2] == "unsubscribed"
    assert all(r.status == "sent" for r in outcomes(automation.id) if r.subscriber_id == stays)
    # Each step went out at the person's own time (joined + the delays), never before.
    sent = db.session.execute(select(AutomationMessage.due_at, AutomationMessage.sent_at)
                              .where(AutomationMessage.subscriber_id == stays)
                              .order_by(AutomationMessage.position)).all()
    assert [due for due, _ in sent][1] - sent[0].due_at == timedelta(seconds=1)
    assert all(at >= due for due, at in sent)
    assert sent[0].sent_at <= sent[1].sent_at <= sent[2].sent_at


def test_disable_holds_enable_releases_delete_skips(app, smtp_server, run_worker_burst):
    list_id = a_list()
    held = series(app, list_id, [{"delay": "PT0S", "subject": "Held", "body": "x"}], name="Held")
    doomed = series(app, list_id, [{"delay": "PT0S", "subject": "Doomed", "body": "x"}], name="Doomed")
    join(list_id, "a@example.com")
    automations.disable(db.session, held.id)
    automations.disable(db.session, doomed.id)
    run_worker_burst()
    assert smtp_server.messages == []
    assert {r.status for r in outcomes(held.id)} == {"pending"}
    automations.delete(db.session, doomed.id)
    automations.enable(db.session, held.id)
    run_worker_burst()
    smtp_server.wait_for(1)
    assert [m.message["Subject"] for m in smtp_server.messages] == ["Held"]
    assert [r.status for r in outcomes(held.id)] == ["sent"]
    assert [(r.status, r.reason) for r in outcomes(doomed.id)] == [("skipped", "the automation was deleted")]


def test_a_message_not_yet_due_waits_and_a_suppressed_person_is_skipped(app, smtp_server, run_worker_burst):
    list_id = a_list()
    automation = series(app, list_id, [{"delay": "P1D", "subject": "Tomorrow", "body": "x"}])
    ok = join(list_id, "ok@example.com")
    gone = join(list_id, "gone@example.com")
    run_worker_burst()
    assert smtp_server.messages == []
    db.session.execute(update(AutomationMessage).values(due_at=utcnow() - timedelta(seconds=1)))
    db.session.execute(update(Subscriber).where(Subscriber.id == gone).values(suppression="bounced"))
    db.session.commit()
    run_worker_burst()
    smtp_server.wait_for(1)
    assert smtp_server.recipients() == ["ok@example.com"]
    assert {(r.subscriber_id, r.status) for r in outcomes(automation.id)} == {
        (ok, "sent"), (gone, "skipped")}
    assert [r.reason for r in outcomes(automation.id) if r.subscriber_id == gone] == ["suppressed: bounced"]


def test_a_refused_login_pauses_the_automations_with_the_reason_and_resume_sends(
        app, smtp_server, run_worker_burst):
    list_id = a_list()
    automation = series(app, list_id, [{"delay": "PT0S", "subject": "Hi", "body": "x"}])
    join(list_id, "a@example.com")
    smtp_server.script.data_replies = ["530 5.7.0 Authentication required"]
    run_worker_burst()
    db.session.expire_all()
    paused = db.session.get(Automation, automation.id)
    assert paused.status == "paused" and "530" in (paused.pause_reason or "")
    assert [r.status for r in outcomes(automation.id)] == ["pending"]
    automations.enable(db.session, automation.id)
    run_worker_burst()
    smtp_server.wait_for(1)
    assert [r.status for r in outcomes(automation.id)] == ["sent"]


def test_lifecycle_entries_are_sent_by_the_worker(app, smtp_server, run_worker_burst):
    from broadside.segments import service as segments

    list_id = a_list()
    for i in range(3):
        s = Subscriber(email=f"c{i}@example.com", attributes={"plan": "trial"})
        db.session.add(s)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=s.id, list_id=list_id, status="active"))
    db.session.commit()
    segment = segments.create_segment(db.session, "Trials", {"all": [
        {"field": "attributes.plan", "op": "equals", "value": "trial"}]})
    data = automations.parse_input({"name": "Nudge", "trigger": {"type": "segment", "segment_id": segment.id},
                                    "steps": [{"delay": "PT0S", "subject": "Upgrade?", "body": "x"}]})
    automations.enable(db.session, automations.create_automation(
        db.session, data, default_from=app.config["MAIL_FROM"]).id)
    run_worker_burst()  # the maintenance at start queues the evaluation, which queues the sends
    smtp_server.wait_for(3)
    assert sorted(smtp_server.recipients()) == ["c0@example.com", "c1@example.com", "c2@example.com"]
    assert entering.evaluate(db.session).entered is None  # not due again yet


def test_a_transient_refusal_is_retried_with_backoff_like_a_broadcast(app, smtp_server, run_worker_burst):
    list_id = a_list()
    automation = series(app, list_id, [{"delay": "PT0S", "subject": "Hi", "body": "x"}])
    join(list_id, "busy@example.com")
    smtp_server.script.rcpt_replies["busy@example.com"] = ["451 4.3.0 Try again later"]
    run_worker_burst()  # the slice waits out the short test backoff and tries again
    smtp_server.wait_for(1)
    db.session.expire_all()
    row = db.session.scalars(select(AutomationMessage).where(
        AutomationMessage.automation_id == automation.id)).one()
    assert (row.status, row.attempts) == ("sent", 2)


def test_two_overlapping_lifecycle_campaigns_send_each_person_one_the_higher_priority_first(
        app, smtp_server, run_worker_burst):
    from broadside.segments import service as segments

    list_id = a_list()
    for i in range(4):
        s = Subscriber(email=f"o{i}@example.com", attributes={"plan": "trial" if i < 2 else "free"})
        db.session.add(s)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=s.id, list_id=list_id, status="active"))
    db.session.commit()
    trials = segments.create_segment(db.session, "Trials", {"all": [
        {"field": "attributes.plan", "op": "equals", "value": "trial"}]})
    everyone = segments.create_segment(db.session, "Everyone", {"all": [
        {"field": "list", "op": "is_on", "value": list_id}]})
    for name, segment, priority in (("Broad", everyone, 1), ("Trial nudge", trials, 10)):
        data = automations.parse_input({"name": name, "priority": priority,
                                        "trigger": {"type": "segment", "segment_id": segment.id},
                                        "steps": [{"delay": "PT0S", "subject": name, "body": "x"}]})
        automations.enable(db.session, automations.create_automation(
            db.session, data, default_from=app.config["MAIL_FROM"]).id)
    run_worker_burst()
    smtp_server.wait_for(4)
    got = [(m.rcpt_tos[0], m.message["Subject"]) for m in smtp_server.messages]
    assert sorted(to for to, _ in got) == [f"o{i}@example.com" for i in range(4)]  # one each
    assert {to: s for to, s in got} == {"o0@example.com": "Trial nudge", "o1@example.com": "Trial nudge",
                                        "o2@example.com": "Broad", "o3@example.com": "Broad"}
    assert [s for _, s in got][:2] == ["Trial nudge", "Trial nudge"]  # the higher priority first
