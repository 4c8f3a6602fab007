"""Who a list reaches (`list_reach`); who a segment reaches, and which list each person's copy
belongs to: the rules (`rules.compile_rules`) among people active on at least one list and not
suppressed.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func, select

from broadside.core.models import Subscriber, Subscription
from broadside.segments.rules import ACTIVE, Context, Group, compile_rules


def active_somewhere() -> ColumnElement[bool]:
    return exists().where(Subscription.subscriber_id == Subscriber.id,
                          Subscription.status == ACTIVE)


def list_reach(list_id: int) -> ColumnElement[bool]:
    """Who mail to a list reaches: its active members who are not suppressed."""
    return and_(Subscriber.suppression.is_(None),
                exists().where(Subscription.subscriber_id == Subscriber.id,
                               Subscription.list_id == list_id, Subscription.status == ACTIVE))


def audience_clause(group: Group, ctx: Context) -> ColumnElement[bool]:
    """Who a segment reaches: the rules, among people active on at least one list and not
    suppressed (bounced, complained or blocked people never match)."""
    return and_(Subscriber.suppression.is_(None), active_somewhere(), compile_rules(group, ctx))


def preferred_lists(group: Group) -> list[int]:
    """Lists the rules ask people to be on: a copy carries the unsubscribe link of one of these
    when the person is on one, otherwise of another list they are active on."""
    return sorted({c.value for c in group.conditions() if c.kind == "list" and c.op == "is_on"})


def delivery_list(group: Group) -> ColumnElement[Any]:
    """For each matching person, the one list their copy belongs to (its subscription is
    re-checked at their turn and its unsubscribe link is in their message): the lowest-numbered
    active list the rules name, else their lowest-numbered active list."""
    def lowest(*where: ColumnElement[bool]) -> Any:
        return (select(func.min(Subscription.list_id))
                .where(Subscription.subscriber_id == Subscriber.id, Subscription.status == ACTIVE,
                       *where)
                .scalar_subquery())

    preferred = preferred_lists(group)
    if not preferred:
        return lowest()
    return func.coalesce(lowest(Subscription.list_id.in_(preferred)), lowest())
