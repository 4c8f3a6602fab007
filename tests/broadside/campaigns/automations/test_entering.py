"""Entering automations (welcome and lifecycle), on SQLite and PostgreSQL: the entry and
every step's message written together, each person once."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from broadside.campaigns.automations import entering, lifecycle
from broadside.campaigns.automations import service as automations
from broadside.core.errors import Conflict, ValidationError
from broadside.core.models import (
    AutomationEntry,
    AutomationMessage,
    AutomationRevision,
    MailingList,
    Subscriber,
    Subscription,
)
from broadside.segments import service as segments
from webapp.extensions import db

# Every email prints a postal address: automations need Settings' to be enabled and to send.
pytestmark = pytest.mark.usefixtures("postal_address")


def a_list(name="Weekly") -> int:
    mailing_list = MailingList(name=name)
    db.session.add(mailing_list)
    db.session.flush()
    return mailing_list.id


_serial = itertools.count(1)


def people(list_id: int, n: int, **attributes) -> list[int]:
    ids = []
    for i in range(n):
        s = Subscriber(email=f"p{next(_serial)}@example.com", name=f"P{i}",
                       attributes=attributes)
        db.session.add(s)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=s.id, list_id=list_id, status="active"))
        ids.append(s.id)
    db.session.commit()
    return ids


def welcome(app, list_id: int, steps=None, **extra):
    data = automations.parse_input({
        "name": extra.pop("name", "Welcome"), "trigger": {"type": "joined_list", "list_id": list_id},
        "steps": steps or [{"delay": "PT0S", "subject": "Hi {{ name }}", "body": "Welcome"},
                           {"delay": "P3D", "subject": "Day 3", "body": "Tips"}], **extra})
    automation = automations.create_automation(db.session, data, default_from=app.config["MAIL_FROM"])
    return automations.enable(db.session, automation.id)


def messages(automation_id: int):
    return db.session.execute(
        select(AutomationMessage.subscriber_id, AutomationMessage.position, AutomationMessage.due_at)
        .where(AutomationMessage.automation_id == automation_id)
        .order_by(AutomationMessage.subscriber_id, AutomationMessage.position)).all()


def test_joining_enters_every_step_once_at_the_persons_own_times(app):
    list_id = a_list()
    automation = welcome(app, list_id)
    ids = people(list_id, 3)
    assert entering.enter_joined(db.session, list_id, ids, source="joined") == 3
    assert entering.enter_joined(db.session, list_id, ids + ids, source="joined") == 0  # once
    db.session.commit()
    rows = messages(automation.id)
    assert [(r.subscriber_id, r.position) for r in rows] == [(i, p) for i in ids for p in (1, 2)]
    assert all(b.due_at - a.due_at == timedelta(days=3) for a, b in zip(rows[::2], rows[1::2], strict=True))


def test_a_disabled_automation_enters_nobody_and_record_only_writes_no_message(app):
    list_id = a_list()
    automation = welcome(app, list_id)
    automations.disable(db.session, automation.id)
    quiet = welcome(app, list_id, name="Log only", record_only=True)
    ids = people(list_id, 2)
    assert entering.enter_joined(db.session, list_id, ids, source="joined") == 2
    db.session.commit()
    assert messages(automation.id) == [] and messages(quiet.id) == []
    assert db.session.scalar(select(func.count()).select_from(AutomationEntry)
                             .where(AutomationEntry.automation_id == quiet.id)) == 2


def test_editing_a_step_freezes_a_revision_that_reaches_only_messages_not_yet_due(app):
    list_id = a_list()
    automation = welcome(app, list_id)
    ids = people(list_id, 1)
    entering.enter_joined(db.session, list_id, ids, source="joined")
    db.session.commit()
    before = dict(db.session.execute(select(AutomationMessage.position, AutomationMessage.revision_id)
                                     .where(AutomationMessage.automation_id == automation.id)).all())
    data = automations.parse_input({**automations.as_input(db.session, automation)})
    data.steps[0].subject, data.steps[1].subject = "Hello again", "Day 3, better"
    automations.update_automation(db.session, automation.id, data, default_from=app.config["MAIL_FROM"])
    after = dict(db.session.execute(select(AutomationMessage.position, AutomationMessage.revision_id)
                                    .where(AutomationMessage.automation_id == automation.id)).all())
    assert after[1] == before[1]  # already due: keeps what it was assigned
    assert after[2] != before[2]
    assert db.session.get(AutomationRevision, after[2]).subject == "Day 3, better"
    assert db.session.get(AutomationRevision, before[2]).subject == "Day 3"  # never changed


def test_deleting_skips_pending_messages_with_the_reason(app):
    list_id = a_list()
    automation = welcome(app, list_id)
    entering.enter_joined(db.session, list_id, people(list_id, 2), source="joined")
    db.session.commit()
    automations.delete(db.session, automation.id)
    statuses = db.session.execute(select(AutomationMessage.status, AutomationMessage.reason)
                                  .where(AutomationMessage.automation_id == automation.id)).all()
    assert statuses and {tuple(s) for s in statuses} == {("skipped", lifecycle.DELETED_REASON)}


def test_lifecycle_evaluation_runs_in_priority_order_and_enters_each_person_once(app):
    list_id = a_list()
    berlin = people(list_id, 4, city="Berlin")
    people(list_id, 2, city="Paris")
    segment = segments.create_segment(db.session, "Berlin", {"all": [
        {"field": "attributes.city", "op": "equals", "value": "Berlin"}]})
    everyone = segments.create_segment(db.session, "All", {"all": [
        {"field": "list", "op": "is_on", "value": list_id}]})

    def campaign(name, segment_id, priority):
        data = automations.parse_input({"name": name, "priority": priority,
                                        "trigger": {"type": "segment", "segment_id": segment_id},
                                        "steps": [{"delay": "PT0S", "subject": name, "body": "x"}]})
        return automations.enable(db.session, automations.create_automation(
            db.session, data, default_from=app.config["MAIL_FROM"]).id)

    low = campaign("Everyone", everyone.id, 1)
    high = campaign("Berliners", segment.id, 5)
    result = entering.evaluate(db.session, batch=3)
    assert result.finished and result.entered == {high.id: 4, low.id: 2}
    assert {r.subscriber_id for r in messages(high.id)} == set(berlin)
    assert not {r.subscriber_id for r in messages(low.id)} & set(berlin)
    # Not due again for 12 hours; and nobody enters twice when it is.
    assert entering.evaluate(db.session).entered is None
    assert entering.evaluate(db.session, now=entering.utcnow() + timedelta(hours=13)).entered == {
        high.id: 0, low.id: 4}


def test_a_bad_automation_is_refused_with_a_message_naming_the_problem(app):
    list_id = a_list()
    welcome(app, list_id)
    bad = [
        ({"name": "", "trigger": {"type": "joined_list", "list_id": list_id}}, "Give the name"),
        ({"name": "X", "trigger": {"type": "joined_list", "list_id": 999}}, "no list with id 999"),
        ({"name": "X", "trigger": {"type": "joined_list", "list_id": list_id},
          "steps": [{"delay": "P1M", "subject": "s", "body": "b"}]}, "years or months"),
        ({"name": "X", "trigger": {"type": "joined_list", "list_id": list_id},
          "steps": [{"delay": "PT0S", "subject": "s", "body": "{{ name"}]}, "Step 1"),
        ({"name": "X", "trigger": {"type": "segment", "segment_id": 1, "every_hours": 0}}, "every_hours"),
    ]
    for body, said in bad:
        with pytest.raises(ValidationError) as caught:
            automations.create_automation(db.session, automations.parse_input(body), default_from="a@b.c")
        assert said in caught.value.message
    with pytest.raises(Conflict):
        welcome(app, list_id)  # the same name


def test_erasing_a_person_and_deleting_a_list_forget_them_in_the_automation_rows(app):
    from broadside.audience.lists import delete_list
    from broadside.audience.subscribers.service import erase

    list_id, other = a_list(), a_list("Other")
    automation = welcome(app, list_id).id
    kept = welcome(app, other, name="Other welcome").id
    gone, stays = people(list_id, 2)
    elsewhere = people(other, 1)
    entering.enter_joined(db.session, list_id, [gone, stays], source="joined")
    entering.enter_joined(db.session, other, elsewhere, source="joined")
    db.session.commit()
    erase(db.session, gone)
    db.session.commit()
    assert {r.subscriber_id for r in messages(automation)} == {None, stays}
    assert db.session.scalar(select(func.count()).select_from(AutomationEntry)
                             .where(AutomationEntry.subscriber_id == gone)) == 0
    with pytest.raises(Conflict, match="trigger of the automation “Other welcome”"):
        delete_list(db.session, other)  # the automation would silently stop
    automations.delete(db.session, kept)
    delete_list(db.session, other)
    lists = db.session.scalars(select(AutomationMessage.list_id)
                               .where(AutomationMessage.automation_id == kept)).all()
    assert lists and set(lists) == {None}
    assert set(db.session.scalars(select(AutomationMessage.list_id)
                                  .where(AutomationMessage.automation_id == automation))) == {list_id}


def test_steps_given_by_id_keep_their_messages_when_an_earlier_step_is_removed(app):
    list_id = a_list()
    automation = welcome(app, list_id, steps=[
        {"delay": "PT0S", "subject": "One", "body": "1"}, {"delay": "P1D", "subject": "Two", "body": "2"},
        {"delay": "P2D", "subject": "Three", "body": "3"}])
    entering.enter_joined(db.session, list_id, people(list_id, 1), source="joined")
    db.session.commit()
    one, two, three = automations.steps_of(db.session, automation.id)
    shape = automations.as_input(db.session, automation)
    kept = [{**step, "id": s.id} for step, s in zip(shape["steps"], (one, two, three), strict=True)][1:]
    automations.update_automation(db.session, automation.id,
                                  automations.parse_input({**shape, "steps": kept}),
                                  default_from="a@example.com")
    live = automations.steps_of(db.session, automation.id)
    assert [(s.id, s.position, s.subject) for s in live] == [(two.id, 1, "Two"), (three.id, 2, "Three")]
    rows = dict(db.session.execute(select(AutomationMessage.step_id, AutomationMessage.status)
                                   .where(AutomationMessage.automation_id == automation.id)).all())
    assert rows == {one.id: "skipped", two.id: "pending", three.id: "pending"}
    with pytest.raises(ValidationError, match="no step with id"):
        automations.update_automation(db.session, automation.id, automations.parse_input(
            {**shape, "steps": [{**shape["steps"][0], "id": 999999}]}), default_from="a@example.com")


def test_a_segment_that_triggers_an_automation_is_not_deleted_from_under_it(app):
    list_id = a_list()
    segment = segments.create_segment(db.session, "Trials", {"all": [
        {"field": "list", "op": "is_on", "value": list_id}]})
    data = automations.parse_input({"name": "Nudge", "trigger": {"type": "segment", "segment_id": segment.id},
                                    "steps": [{"delay": "PT0S", "subject": "Hi", "body": "x"}]})
    automation = automations.create_automation(db.session, data, default_from="a@example.com")
    with pytest.raises(Conflict, match="trigger of the automation “Nudge”"):
        segments.delete_segment(db.session, segment.id)
    automations.delete(db.session, automation.id)
    assert segments.delete_segment(db.session, segment.id) == "Trials"
