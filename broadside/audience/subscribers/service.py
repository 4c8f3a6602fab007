"""Subscribers: add, edit, unsubscribe, erase, and what the subscriber page shows.

An unsubscribed subscription or a suppressed subscriber is never re-activated here: adding a
person to a list only ever creates subscriptions that did not exist (`subscribe` in
`broadside.audience.subscriptions`, the one writer of a subscription's status).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.audience import subscriptions
from broadside.audience.subscribers.language import clean_reader_locale
from broadside.audience.subscribers.time_zone import clean_reader_timezone
from broadside.audience.unsubscribe import service as leaving
from broadside.campaigns.automations.entering import enter_joined
from broadside.campaigns.automations.ledger import forget_person
from broadside.core.addresses import normalise_email
from broadside.core.db import dialect_insert, rowcount
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _
from broadside.core.models import (
    Broadcast,
    Delivery,
    Event,
    MailingList,
    Subscriber,
    Subscription,
    TransactionalMessage,
)
from broadside.core.timeutil import utcnow
from broadside.webhooks import emitter

MAX_EMAIL = 320
MAX_NAME = 200
MAX_ATTRIBUTE_KEY = 100
MAX_ATTRIBUTE_VALUE = 1000
MAX_ATTRIBUTES_JSON = 10_000
RESERVED_ATTRIBUTES = ("email", "name")


def clean_name(name: str | None) -> str:
    name = " ".join((name or "").split())
    if len(name) > MAX_NAME:
        raise ValidationError(_("A name can be at most %(max)s characters.", max=MAX_NAME),
                              field="name")
    if "\x00" in name:  # PostgreSQL refuses NUL in text: say so instead of failing the write
        raise ValidationError(_("A name cannot contain a NUL character."), field="name")
    return name


def clean_email(email: str | None) -> str:
    if email is not None and len(email.strip()) > MAX_EMAIL:
        raise ValidationError(_("An email address can be at most %(max)s characters.", max=MAX_EMAIL),
                              field="email")
    try:
        return normalise_email(email or "")
    except ValidationError as exc:
        raise ValidationError(exc.message, field="email") from None


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def _attribute_error(message: str) -> ValidationError:
    return ValidationError(message, field="attributes")


def clean_attributes(attributes: Any) -> dict[str, Any]:
    if attributes is None:
        return {}
    if not isinstance(attributes, dict):
        raise _attribute_error(_("Attributes must be an object of names and values."))
    cleaned: dict[str, Any] = {}
    for key, value in attributes.items():
        if not isinstance(key, str) or not key.strip():
            raise _attribute_error(_("Every attribute needs a name."))
        key = key.strip()
        if len(key) > MAX_ATTRIBUTE_KEY:
            raise _attribute_error(_("Attribute names can be at most %(max)s characters.",
                                     max=MAX_ATTRIBUTE_KEY))
        if key.lower() in RESERVED_ATTRIBUTES:
            raise _attribute_error(_("%(key)r cannot be an attribute: it is a field of its own.",
                                     key=key))
        if isinstance(value, str) and len(value) > MAX_ATTRIBUTE_VALUE:
            raise _attribute_error(
                _("The value of %(key)r is longer than %(max)s characters.", key=key,
                  max=MAX_ATTRIBUTE_VALUE)
            )
        if _has_nul(key) or _has_nul(value):
            raise _attribute_error(_("The attribute %(key)r cannot contain a NUL character.",
                                     key=key))
        cleaned[key] = value
    if len(json.dumps(cleaned)) > MAX_ATTRIBUTES_JSON:
        raise _attribute_error(_("Attributes can take at most %(max)s characters.",
                                 max=MAX_ATTRIBUTES_JSON))
    return cleaned


def parse_attribute_lines(text: str | None) -> dict[str, str]:
    """The owner form's `name = value` lines, one attribute per line."""
    attributes: dict[str, str] = {}
    for number, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise _attribute_error(_("Attribute line %(n)s must look like `name = value`.",
                                     n=number))
        attributes[key.strip()] = value.strip()
    return clean_attributes(attributes)


def format_attribute_lines(attributes: dict[str, Any] | None) -> str:
    return "\n".join(
        f"{key} = {value if isinstance(value, str) else json.dumps(value)}"
        for key, value in (attributes or {}).items()
    )


def get_subscriber(session: Session, subscriber_id: int) -> Subscriber:
    subscriber = session.get(Subscriber, subscriber_id)
    if subscriber is None:
        raise NotFound(_("There is no such subscriber."))
    return subscriber


def find_by_email(session: Session, email: str) -> Subscriber | None:
    return session.scalar(select(Subscriber).where(Subscriber.email == email))


def newest_reachable(session: Session) -> Subscriber | None:
    """The newest person a send could reach now (active on a list, not suppressed): the
    sample reader whose details fill the merge fields of subjects the pages show. Walks
    subscribers newest first and stops at the first such person."""
    return session.scalar(
        select(Subscriber)
        .where(Subscriber.suppression.is_(None),
               exists().where(Subscription.subscriber_id == Subscriber.id,
                              Subscription.status == "active"))
        .order_by(Subscriber.id.desc()).limit(1))


MAX_LIST_ID = 2**31 - 1  # ids are 32-bit integers on PostgreSQL


def check_lists_exist(session: Session, list_ids: list[int]) -> None:
    if not list_ids:
        return
    # An id past the column's range names no list (PostgreSQL would refuse to look it up).
    looked_up = [i for i in list_ids if 1 <= i <= MAX_LIST_ID]
    found = set(session.scalars(select(MailingList.id).where(MailingList.id.in_(looked_up))))
    missing = sorted(set(list_ids) - found)
    if missing:
        raise ValidationError(_("There is no list with id %(ids)s.", ids=", ".join(map(str, missing))),
                              field="lists")


def get_or_create_subscriber(session: Session, email: str, name: str = "",
                             attributes: dict[str, Any] | None = None) -> tuple[Subscriber, bool]:
    """The subscriber with this (normalised) address, created if new; race-safe."""
    table = Subscriber.__table__
    # RETURNING says whether this INSERT made the row (rowcount is -1 on psycopg here).
    created = session.execute(
        dialect_insert(session, table)
        .values(email=email, name=name, attributes=attributes or {}, created_at=utcnow(),
                soft_bounce_count=0)
        .on_conflict_do_nothing(index_elements=["email"])
        .returning(table.c.id)
    ).first() is not None
    subscriber = session.scalar(
        select(Subscriber).where(Subscriber.email == email)
        .execution_options(populate_existing=True)
    )
    assert subscriber is not None
    return subscriber, created


def add_to_lists(session: Session, subscriber_id: int, list_ids: list[int], *,
                 source: str = "owner") -> list[int]:
    """Create the missing subscriptions as active (`subscribe`); existing ones keep their
    status. Returns the new list ids."""
    if not list_ids:
        return []
    existing = set(session.scalars(
        select(Subscription.list_id).where(
            Subscription.subscriber_id == subscriber_id, Subscription.list_id.in_(list_ids)
        )
    ))
    return [list_id for list_id in dict.fromkeys(list_ids)
            if list_id not in existing
            and subscriptions.create(session, subscriber_id, list_id, "subscribe",
                                     detail=f"added by {source}", source=source)]


def save_subscriber(session: Session, *, email: str | None, name: str | None = None,
                    attributes: Any = None, list_ids: list[int] | None = None,
                    source: str = "owner", welcome: bool = False,
                    locale: Any = None, timezone: Any = None) -> tuple[Subscriber, bool]:
    """Add a person (or update a known one) and put them on `list_ids` as active.
    `welcome`: on each list they newly join, they enter its welcome automations in this
    same transaction.

    Returns (subscriber, created). A known person's name, language and time zone are replaced
    when one is given and attributes are merged; their existing subscriptions and suppression are left
    alone.
    """
    email = clean_email(email)
    name = clean_name(name)
    attributes = clean_attributes(attributes)
    locale, timezone = clean_reader_locale(locale), clean_reader_timezone(timezone)
    list_ids = list(dict.fromkeys(list_ids or []))
    check_lists_exist(session, list_ids)
    subscriber, created = get_or_create_subscriber(session, email, name, attributes)
    if not created:
        if name:
            subscriber.name = name
        if attributes:
            subscriber.attributes = {**(subscriber.attributes or {}), **attributes}
    subscriber.locale = locale or subscriber.locale
    subscriber.timezone = timezone or subscriber.timezone
    joined = add_to_lists(session, subscriber.id, list_ids, source=source)
    if welcome:
        for list_id in joined:
            enter_joined(session, list_id, [subscriber.id], source="joined")
    session.commit()
    return subscriber, created


def join_list(session: Session, subscriber_id: int, list_id: int, source: str = "owner",
              welcome: bool = False) -> bool:
    """Put a known person on one more list as active; False if they were on it already.
    `welcome`: they enter the list's welcome automations in the same transaction."""
    get_subscriber(session, subscriber_id)
    check_lists_exist(session, [list_id])
    created = add_to_lists(session, subscriber_id, [list_id], source=source)
    if created and welcome:
        enter_joined(session, list_id, [subscriber_id], source="joined")
    session.commit()
    return bool(created)


def update_subscriber(session: Session, subscriber_id: int, *, email: str | None,
                      name: str | None, attributes: Any, locale: Any = ...,
                      timezone: Any = ...) -> Subscriber:
    """`locale`: a tag, or None/"" for the list's default; `timezone`: an IANA name, or
    None/"" for none; each left as it is when not given."""
    subscriber = get_subscriber(session, subscriber_id)
    email = clean_email(email)
    name = clean_name(name)
    attributes = clean_attributes(attributes)
    tag = subscriber.locale if locale is ... else clean_reader_locale(locale)
    zone = subscriber.timezone if timezone is ... else clean_reader_timezone(timezone)
    if email != subscriber.email and find_by_email(session, email) is not None:
        raise Conflict(_("Another subscriber already has the address %(email)s.", email=email),
                       field="email")
    subscriber.email = email
    subscriber.name = name
    subscriber.attributes = attributes
    subscriber.locale, subscriber.timezone = tag, zone
    try:
        session.commit()
    except IntegrityError:  # the address was taken between the check and the write
        session.rollback()
        raise Conflict(_("Another subscriber already has the address %(email)s.", email=email),
                       field="email") from None
    return subscriber


def unsubscribe(session: Session, subscriber_id: int, list_id: int, source: str = "owner") -> bool:
    """Unsubscribe from one list; False when they already were (idempotent).

    The write is `broadside.audience.unsubscribe.service.leave_list`, shared with the links in emails;
    suppressing (the owner's block) is `broadside.audience.unsubscribe.suppression.suppress`.
    """
    get_subscriber(session, subscriber_id)
    changed = leaving.leave_list(session, subscriber_id, list_id, source)
    session.commit()
    if not changed and session.scalar(
        select(Subscription.id).where(Subscription.subscriber_id == subscriber_id,
                                      Subscription.list_id == list_id)
    ) is None:
        raise NotFound(_("This subscriber is not on that list."))
    return changed


def erase(session: Session, subscriber_id: int) -> str:
    """Delete the person for a privacy request; returns the erased address.

    The row goes; their subscriptions and events cascade; deliveries keep their row (so the
    broadcast's counts stay true) with subscriber_id set NULL by the foreign key; transactional
    mail addressed to them is deleted, since it holds the address.
    """
    email = get_subscriber(session, subscriber_id).email
    erase_uncommitted(session, [subscriber_id])
    session.commit()
    session.expunge_all()
    return email


def erase_uncommitted(session: Session, subscriber_ids: list[int]) -> int:
    """`erase` for many people in the caller's transaction (the bulk actions); returns how
    many were erased (people already gone are skipped). The caller commits."""
    emails = list(session.scalars(select(Subscriber.email)
                                  .where(Subscriber.id.in_(subscriber_ids))))
    if not emails:
        return 0
    session.execute(
        delete(TransactionalMessage)
        .where(or_(TransactionalMessage.subscriber_id.in_(subscriber_ids),
                   TransactionalMessage.to_email.in_(emails)))
        .execution_options(synchronize_session=False)
    )
    for subscriber_id in subscriber_ids:
        forget_person(session, subscriber_id)  # their automation messages: as SET NULL would
    emitter.forget_people(session, subscriber_ids)  # outgoing webhook events naming them
    result = session.execute(
        delete(Subscriber).where(Subscriber.id.in_(subscriber_ids))
        .execution_options(synchronize_session=False)
    )
    return rowcount(result)


@dataclass
class SubscriptionRow:
    list_id: int
    list_name: str
    status: str
    created_at: datetime
    confirmed_at: datetime | None
    unsubscribed_at: datetime | None
    unsubscribe_source: str | None


@dataclass
class DeliveryRow:
    broadcast_id: int
    subject: str
    status: str
    reason: str | None
    sent_at: datetime | None
    updated_at: datetime | None


@dataclass
class SubscriberDetail:
    subscriber: Subscriber
    subscriptions: list[SubscriptionRow]
    deliveries: list[DeliveryRow]
    events: list[Event]


def subscriptions_of(session: Session, subscriber_id: int) -> list[SubscriptionRow]:
    rows = session.execute(
        select(Subscription, MailingList.name)
        .join(MailingList, MailingList.id == Subscription.list_id)
        .where(Subscription.subscriber_id == subscriber_id)
        .order_by(func.lower(MailingList.name))
    )
    return [
        SubscriptionRow(s.list_id, name, s.status, s.created_at, s.confirmed_at,
                        s.unsubscribed_at, s.unsubscribe_source)
        for s, name in rows
    ]


def subscriber_detail(session: Session, subscriber_id: int,
                      event_limit: int = 50) -> SubscriberDetail:
    subscriber = get_subscriber(session, subscriber_id)
    deliveries = [
        DeliveryRow(d.broadcast_id, subject, d.status, d.reason, d.sent_at, d.updated_at)
        for d, subject in session.execute(
            select(Delivery, Broadcast.subject)
            .join(Broadcast, Broadcast.id == Delivery.broadcast_id)
            .where(Delivery.subscriber_id == subscriber_id)
            .order_by(Delivery.id.desc())
        )
    ]
    events = list(session.scalars(
        select(Event).where(Event.subscriber_id == subscriber_id)
        .order_by(Event.id.desc()).limit(event_limit)
    ))
    return SubscriberDetail(subscriber, subscriptions_of(session, subscriber_id), deliveries,
                            events)
