"""Segments: save, change, copy and delete them, and ask who they reach.

A segment reaches the people its rules match among those active on at least one list and not
suppressed (`reach.audience_clause`). Counting, sampling, the subscriber table's filter, the
CSV export and a broadcast's snapshot all use that one clause, so they always agree.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, delete, exists, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _, ngettext
from broadside.core.logs import owner_action
from broadside.core.models import Automation, Broadcast, MailingList, Segment, Subscriber
from broadside.core.models.automations import AutomationStatus
from broadside.core.models.sending import BroadcastStatus
from broadside.core.site_settings import owner_zone
from broadside.core.timeutil import utcnow
from broadside.segments.engagement import BROADCAST_FIELDS
from broadside.segments.reach import active_somewhere, audience_clause, list_reach
from broadside.segments.rules import Context, Group, RuleError, compile_rules, parse

MAX_NAME = 200
SAMPLE_SIZE = 10
# A segment used by a broadcast in one of these states cannot be deleted.
IN_USE = (BroadcastStatus.SCHEDULED.value, BroadcastStatus.QUEUED.value,
          BroadcastStatus.SENDING.value, BroadcastStatus.PAUSED.value)
NOT_SUBSCRIBED = "not active on any list"


def context(session: Session) -> Context:
    return Context(session.get_bind().dialect.name, utcnow(), owner_zone(session))


def check_references(session: Session, group: Group) -> None:
    """Lists and broadcasts the rules name must exist when the rules are saved."""
    for condition in group.conditions():
        if condition.kind == "list" or (condition.kind == "joined" and condition.list_id):
            list_id = condition.value if condition.kind == "list" else condition.list_id
            if session.get(MailingList, list_id) is None:
                raise RuleError(f"{condition.label.capitalize()} ({condition.field} "
                                f"{condition.op}): there is no list {list_id}.")
        if (condition.kind in ("received", *BROADCAST_FIELDS)
                and session.get(Broadcast, condition.value) is None):
            raise RuleError(f"{condition.label.capitalize()} ({condition.field} {condition.op}): "
                            f"there is no broadcast {condition.value}.")


def validate(session: Session, rules: Any) -> Group:
    group = parse(rules)
    check_references(session, group)
    return group


def _clean_name(name: Any) -> str:
    if name is not None and not isinstance(name, str):
        raise ValidationError(_("The segment's name must be text."), field="name")
    name = " ".join((name or "").split())
    if not name:
        raise ValidationError(_("A segment needs a name."), field="name")
    if len(name) > MAX_NAME:
        raise ValidationError(_("A segment's name can be at most %(max)s characters.", max=MAX_NAME),
                              field="name")
    return name


def _name_taken(session: Session, name: str, except_id: int | None = None) -> bool:
    query = select(Segment.id).where(func.lower(Segment.name) == name.lower())
    if except_id is not None:
        query = query.where(Segment.id != except_id)
    return session.scalar(query) is not None


def _commit_or_conflict(session: Session, name: str) -> None:
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise Conflict(_("There is already a segment called “%(name)s”.", name=name),
                       field="name") from None


def get_segment(session: Session, segment_id: int) -> Segment:
    segment = session.get(Segment, segment_id)
    if segment is None:
        raise NotFound(_("There is no such segment."))
    return segment


def all_segments(session: Session) -> list[Segment]:
    return list(session.scalars(select(Segment).order_by(func.lower(Segment.name))))


def create_segment(session: Session, name: Any, rules: Any) -> Segment:
    """Validate the name and every condition first; then one commit (or nothing)."""
    name = _clean_name(name)
    group = validate(session, rules)
    if _name_taken(session, name):
        raise Conflict(_("There is already a segment called “%(name)s”.", name=name),
                       field="name")
    segment = Segment(name=name, rules=group.as_json())
    session.add(segment)
    _commit_or_conflict(session, name)
    owner_action("segment created", segment_id=segment.id)
    return segment


def update_segment(session: Session, segment_id: int, name: Any, rules: Any) -> Segment:
    segment = get_segment(session, segment_id)
    name = _clean_name(name)
    group = validate(session, rules)
    if _name_taken(session, name, except_id=segment_id):
        raise Conflict(_("There is already a segment called “%(name)s”.", name=name),
                       field="name")
    segment.name = name
    segment.rules = group.as_json()
    _commit_or_conflict(session, name)
    return segment


def duplicate_segment(session: Session, segment_id: int) -> Segment:
    """A copy named "Copy of X" (or "Copy 2 of X", ...), with the same rules."""
    original = get_segment(session, segment_id)
    for number in range(1, 1000):
        name = (_("Copy of %(name)s", name=original.name) if number == 1 else
                _("Copy %(n)s of %(name)s", n=number, name=original.name))[:MAX_NAME]
        if not _name_taken(session, name):
            break
    else:
        raise Conflict(_("There are too many copies of this segment already."))
    copy = Segment(name=name, rules=original.rules)
    session.add(copy)
    _commit_or_conflict(session, name)
    return copy


def broadcasts_using(session: Session, segment_id: int) -> list[Broadcast]:
    """Scheduled, queued, sending or paused broadcasts to this segment."""
    return list(session.scalars(
        select(Broadcast).where(Broadcast.segment_id == segment_id, Broadcast.status.in_(IN_USE))
        .order_by(Broadcast.id)
    ))


def delete_segment(session: Session, segment_id: int) -> str:
    """Delete a segment that no scheduled or active broadcast uses; returns its name. Drafts
    that chose it lose their audience (and say so). The DELETE carries the "not in use"
    predicate, so a broadcast scheduled after the confirmation still stops it."""
    segment = get_segment(session, segment_id)
    name = segment.name
    busy = exists().where(Broadcast.segment_id == segment_id, Broadcast.status.in_(IN_USE))
    # An automation triggered by it would silently stop: it is changed or deleted first.
    automated = exists().where(Automation.segment_id == segment_id,
                               Automation.status != AutomationStatus.DELETED.value)
    result = session.execute(
        delete(Segment).where(Segment.id == segment_id, ~busy, ~automated)
        .execution_options(synchronize_session=False)
    )
    if rowcount(result) == 0:
        users = broadcasts_using(session, segment_id)
        automation = session.scalar(select(Automation.name).where(
            Automation.segment_id == segment_id,
            Automation.status != AutomationStatus.DELETED.value).limit(1))
        session.rollback()
        if automation is not None and not users:
            raise Conflict(_("The segment “%(name)s” is the trigger of the automation "
                             "“%(automation)s”. Give it another trigger or delete it before "
                             "deleting the segment.", name=name, automation=automation))
        if users:
            first = users[0]
            subject = first.subject or _("(no subject)")
            if len(users) > 1:
                raise Conflict(ngettext(
                    "The segment “%(name)s” is used by the %(status)s broadcast “%(subject)s” "
                    "and %(num)s more. Cancel them, let them finish, or give them another "
                    "audience before deleting the segment.",
                    "The segment “%(name)s” is used by the %(status)s broadcast “%(subject)s” "
                    "and %(num)s more. Cancel them, let them finish, or give them another "
                    "audience before deleting the segment.", len(users) - 1, name=name,
                    status=first.status, subject=subject))
            raise Conflict(_(
                "The segment “%(name)s” is used by the %(status)s broadcast “%(subject)s”. "
                "Cancel it, let it finish, or give it another audience before deleting the "
                "segment.", name=name, status=first.status, subject=subject))
        raise NotFound(_("There is no such segment."))
    session.commit()
    session.expunge_all()
    owner_action("segment deleted", segment_id=segment_id)
    return name


# ------------------------------------------------------------------ who matches


def rules_of(segment: Segment) -> Group:
    """The stored rules (validated when saved)."""
    return parse(segment.rules)


def segment_clause(session: Session, segment: Segment | Group) -> ColumnElement[bool]:
    group = segment if isinstance(segment, Group) else rules_of(segment)
    return audience_clause(group, context(session))


def reached(session: Session, list_id: int | None, segment_id: int | None
            ) -> ColumnElement[bool] | None:
    """Who mail to a segment (when given) or else a list would reach now: its active,
    unsuppressed members or the segment's matches (None: neither, or the segment is gone).
    A broadcast's audience and an automation's (`campaigns.broadcasts.audience`)."""
    if segment_id is not None:
        segment = session.get(Segment, segment_id)
        return segment_clause(session, segment) if segment is not None else None
    return list_reach(list_id) if list_id is not None else None


def count_matching(session: Session, segment: Segment | Group) -> int:
    return session.scalar(
        select(func.count()).select_from(Subscriber).where(segment_clause(session, segment))
    ) or 0


def sample(session: Session, segment: Segment | Group, limit: int = SAMPLE_SIZE) -> list[Subscriber]:
    """The newest people the segment reaches."""
    return list(session.scalars(
        select(Subscriber).where(segment_clause(session, segment))
        .order_by(Subscriber.id.desc()).limit(limit)
    ))


def summary(session: Session, segment: Segment | Group) -> dict[str, Any]:
    """Who a send to this segment would reach now, and who the rules match but a send would
    skip, and why (suppressed, or not active on any list) -- the shape of
    `broadside.campaigns.broadcasts.service.audience_summary`."""
    group = segment if isinstance(segment, Group) else rules_of(segment)
    ctx = context(session)
    subscribed = active_somewhere()
    rows = session.execute(
        select(Subscriber.suppression, subscribed.label("subscribed"), func.count())
        .where(compile_rules(group, ctx))
        .group_by(Subscriber.suppression, subscribed)
    ).all()
    active, skipped = 0, dict[str, int]()
    for suppression, is_subscribed, count in rows:
        if suppression is None and is_subscribed:
            active += count
        else:
            reason = suppression or NOT_SUBSCRIBED
            skipped[reason] = skipped.get(reason, 0) + count
    return {"active": active, "skipped": skipped}
