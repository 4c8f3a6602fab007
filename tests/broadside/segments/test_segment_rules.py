"""Segment rules on SQLite and PostgreSQL: every operator, nested groups, suppressed people,
and rules refused with a message naming the condition."""

from __future__ import annotations

from datetime import timedelta

import pytest

from broadside.core.models import Broadcast, Delivery, MailingList, Subscriber, Subscription
from broadside.core.timeutil import utcnow
from broadside.segments import service
from broadside.segments.rules import MAX_DEPTH, RuleError, parse
from webapp.extensions import db

NOW = utcnow()


@pytest.fixture
def people(app):
    """A small audience with every kind of fact a rule can ask about."""
    session = db.session
    weekly, news, other = MailingList(name="Weekly"), MailingList(name="News"), MailingList(name="Other")
    session.add_all([weekly, news, other])
    session.flush()

    def person(email, name="", attributes=None, lists=(), suppression=None):
        subscriber = Subscriber(email=email, name=name, attributes=attributes or {},
                                suppression=suppression)
        session.add(subscriber)
        session.flush()
        for mailing_list, status, joined in lists:
            session.add(Subscription(subscriber_id=subscriber.id, list_id=mailing_list.id,
                                     status=status, created_at=joined))
        return subscriber

    old, recent = NOW - timedelta(days=400), NOW - timedelta(days=3)
    ann = person("ann@berlin.example", "Ann Weber",
                 {"city": "Berlin", "age": "34", "plan": "paid", "renews": "2026-03-01"},
                 [(weekly, "active", old), (news, "active", recent)])
    bob = person("bob@paris.example", "Bob Martin", {"city": "Paris", "age": 51, "renews": "2025-01-15"},
                 [(weekly, "active", recent)])
    cem = person("cem@berlin.example", "Cem", {"city": "berlin", "age": "n/a", "plan": ""},
                 [(news, "active", old)])
    dee = person("dee@example.org", "Dee 100%_", {"city": "Berlin"},
                 [(weekly, "active", recent)], suppression="bounced")
    eve = person("eve@example.org", "Eve", {"age": "7.5"},
                 [(weekly, "unsubscribed", recent), (other, "active", old)])
    fay = person("fay@example.org", "Fay", {"city": "Berlin"}, [(weekly, "unsubscribed", recent)])
    issue = Broadcast(subject="Issue #1", status="sent", list_id=weekly.id)
    session.add(issue)
    session.flush()
    session.add_all([
        Delivery(broadcast_id=issue.id, subscriber_id=ann.id, status="sent",
                 sent_at=NOW - timedelta(days=2)),
        Delivery(broadcast_id=issue.id, subscriber_id=bob.id, status="unknown"),
        Delivery(broadcast_id=issue.id, subscriber_id=eve.id, status="sent",
                 sent_at=NOW - timedelta(days=20)),
    ])
    session.commit()
    return {"weekly": weekly.id, "news": news.id, "other": other.id, "issue": issue.id,
            "ids": {s.email.split("@")[0]: s.id for s in (ann, bob, cem, dee, eve, fay)}}


def matching(rules) -> set[str]:
    group = service.validate(db.session, rules)
    return {s.email.split("@")[0] for s in service.sample(db.session, group, limit=100)}


def one(field, op, value=None, **extra):
    condition = {"field": field, "op": op, **extra}
    if value is not None:
        condition["value"] = value
    return {"all": [condition]}


def test_each_operator_matches_exactly_the_right_people(people):
    weekly, news, issue = people["weekly"], people["news"], people["issue"]
    # Reachable: ann, bob, cem, eve (dee is suppressed, fay is on no list any more).
    cases = [
        (one("list", "is_on", weekly), {"ann", "bob"}),
        (one("list", "is_not_on", weekly), {"cem", "eve"}),
        (one("email", "equals", "ANN@berlin.example"), {"ann"}),
        (one("email", "contains", "berlin"), {"ann", "cem"}),
        (one("email", "ends_with", ".org"), {"eve"}),
        (one("name", "equals", "cem"), {"cem"}),
        (one("name", "contains", "mart"), {"bob"}),
        (one("name", "ends_with", "weber"), {"ann"}),
        (one("attributes.city", "equals", "BERLIN"), {"ann", "cem"}),
        (one("attributes.city", "not_equals", "berlin"), {"bob", "eve"}),
        (one("attributes.city", "contains", "erl"), {"ann", "cem"}),
        (one("attributes.plan", "exists"), {"ann"}),
        (one("attributes.plan", "not_exists"), {"bob", "cem", "eve"}),
        (one("attributes.age", "gt", 33), {"ann", "bob"}),
        (one("attributes.age", "gt", "50.5"), {"bob"}),
        (one("attributes.age", "lt", 10), {"eve"}),
        (one("attributes.age", "equals", 51), {"bob"}),
        (one("attributes.renews", "before", "2026-01-01"), {"bob"}),
        (one("attributes.renews", "after", "2026-03-01"), set()),
        (one("attributes.renews", "after", "2026-02-28"), {"ann"}),
        (one("joined", "within_days", 30), {"ann", "bob"}),
        (one("joined", "within_days", 30, list=news), {"ann"}),
        (one("joined", "before", (NOW - timedelta(days=100)).date().isoformat()), {"ann", "cem", "eve"}),
        (one("joined", "after", (NOW - timedelta(days=100)).date().isoformat()), {"ann", "bob"}),
        (one("received", "is", issue), {"ann", "eve"}),
        (one("received", "is_not", issue), {"bob", "cem"}),  # unknown is not "received"
        (one("last_received", "within_days", 7), {"ann"}),
        (one("last_received", "not_within_days", 7), {"bob", "cem", "eve"}),
    ]
    for rules, expected in cases:
        assert matching(rules) == expected, rules


def test_nested_groups_combine_all_and_any(people):
    rules = {"all": [
        {"field": "attributes.city", "op": "equals", "value": "berlin"},
        {"any": [
            {"field": "list", "op": "is_on", "value": people["weekly"]},
            {"all": [{"field": "name", "op": "equals", "value": "Cem"},
                     {"field": "joined", "op": "before", "value": "2100-01-01"}]},
        ]},
    ]}
    assert matching(rules) == {"ann", "cem"}
    rules["all"][1]["any"][1]["all"][0]["value"] = "Nobody"
    assert matching(rules) == {"ann"}
    either = {"any": [{"field": "email", "op": "equals", "value": "bob@paris.example"},
                      {"field": "email", "op": "equals", "value": "eve@example.org"}]}
    assert matching(either) == {"bob", "eve"}


def test_suppressed_and_unsubscribed_people_never_match(people):
    everyone = {"any": [{"field": "email", "op": "contains", "value": "@"}]}
    assert matching(everyone) == {"ann", "bob", "cem", "eve"}
    # Dee matches these rules exactly, but she bounced: never.
    assert "dee" not in matching(one("name", "contains", "100%_"))
    summary = service.summary(db.session, service.validate(db.session, everyone))
    assert summary == {"active": 4, "skipped": {"bounced": 1, service.NOT_SUBSCRIBED: 1}}
    assert service.count_matching(db.session, service.validate(db.session, everyone)) == 4


def test_like_wildcards_in_values_are_literal(people):
    assert matching(one("name", "contains", "%")) == set()  # only dee has one, and she bounced
    assert matching(one("email", "contains", "_")) == set()


@pytest.mark.parametrize("rules, message", [
    ({}, "a group is an object"),
    ({"all": []}, "The segment is empty"),
    ({"all": [{"any": []}]}, "Group 1 is empty"),
    ({"every": [{"field": "email", "op": "equals", "value": "x"}]}, "a group is an object"),
    ({"all": [{"field": "city", "op": "equals", "value": "x"}]}, "Condition 1 (city equals): unknown field"),
    ({"all": [{"field": "email", "op": "gt", "value": "x"}]},
     "Condition 1 (email gt): the operator does not fit"),
    ({"all": [{"field": "email", "op": "equals"}]}, "Condition 1 (email equals): the value must be text"),
    ({"all": [{"field": "email", "op": "equals", "value": "x"},
              {"any": [{"field": "attributes.age", "op": "gt", "value": "old"}]}]},
     "Condition 2.1 (attributes.age gt): the value must be a number"),
    ({"all": [{"field": "attributes.renews", "op": "before", "value": "March"}]}, "YYYY-MM-DD"),
    ({"all": [{"field": "joined", "op": "within_days", "value": -3}]}, "between 1 and"),
    ({"all": [{"field": "received", "op": "is", "value": "latest"}]}, "must be a whole number"),
    ({"all": [{"field": "attributes.", "op": "exists"}]}, "name the attribute"),
    ({"all": [{"field": 'attributes.a"b', "op": "exists"}]}, "cannot contain quotes"),
    ({"all": [{"field": "attributes.plan", "op": "exists", "value": "yes"}]}, "takes no value"),
    ({"all": [{"field": "email", "op": "equals", "value": "x", "extra": 1}]}, "unknown key 'extra'"),
    ({"all": [{"field": "name", "op": "equals", "value": "x", "list": 1}]}, "only a `joined`"),
    ({"all": ["email"]}, "Condition 1: expected a condition"),
])
def test_bad_rules_are_refused_naming_the_condition(rules, message):
    with pytest.raises(RuleError) as caught:
        parse(rules)
    assert message in caught.value.message


def test_nesting_is_bounded_and_conditions_are_counted():
    condition = {"field": "email", "op": "contains", "value": "a"}
    nested = {"all": [condition]}
    for _ in range(MAX_DEPTH - 1):
        nested = {"any": [nested]}
    parse(nested)
    with pytest.raises(RuleError, match="nested at most 5 deep"):
        parse({"all": [nested]})
    with pytest.raises(RuleError, match="at most 50 conditions"):
        parse({"all": [condition] * 51})


def test_references_to_missing_lists_and_broadcasts_are_refused(people):
    with pytest.raises(RuleError, match=r"Condition 1 \(list is_on\): there is no list 999"):
        service.validate(db.session, one("list", "is_on", 999))
    with pytest.raises(RuleError, match="there is no broadcast 999"):
        service.validate(db.session, one("received", "is_not", 999))


def test_values_are_normalised_when_saved(people):
    segment = service.create_segment(db.session, "  Berlin   readers ", {"all": [
        {"field": "attributes.age", "op": "gt", "value": "30"},
        {"field": "list", "op": "is_on", "value": str(people["weekly"])},
        {"field": "attributes.plan", "op": "exists", "value": ""},
    ]})
    assert segment.name == "Berlin readers"
    assert segment.rules == {"all": [
        {"field": "attributes.age", "op": "gt", "value": 30},
        {"field": "list", "op": "is_on", "value": people["weekly"]},
        {"field": "attributes.plan", "op": "exists"},
    ]}
