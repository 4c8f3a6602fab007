"""Whom a transactional template may reach: the one rule, asked when the API is called and
again by the worker just before the message is sent (invariant 3).

- A **suppressed** address (`Subscriber.suppression` set: bounced, complained, blocked) is
  never sent to, essential template or not.
- An **unsubscribed** address is that of a known subscriber who has no subscription still
  active or awaiting confirmation, and left at least one list (a subscription `unsubscribed`).
  Only an *essential* template (a password reset, a one-time code) may reach it.
- Anyone else (a stranger to the lists, a subscriber) may be sent any template.

Small on purpose: the worker imports it, and nothing here renders.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core.models import Subscriber, Subscription
from broadside.core.models.audience import SubscriptionStatus

SUPPRESSED = "suppressed"
UNSUBSCRIBED = "unsubscribed"
_STAYING = (SubscriptionStatus.ACTIVE.value, SubscriptionStatus.UNCONFIRMED.value)


def standing(session: Session, subscriber_id: int) -> tuple[bool, bool]:
    """(has a subscription active or awaiting confirmation, has left a list)."""
    statuses = set(session.scalars(select(Subscription.status).distinct()
                                   .where(Subscription.subscriber_id == subscriber_id)))
    return bool(statuses & set(_STAYING)), SubscriptionStatus.UNSUBSCRIBED.value in statuses


def refusal(session: Session, person: Subscriber | None, email: str, *,
            essential: bool) -> tuple[str, str] | None:
    """Why a template may not reach `email` now: (SUPPRESSED or UNSUBSCRIBED, the reason in
    words), or None when it may. `person`: the subscriber with that address, if any."""
    if person is None:
        return None
    if person.suppression:
        return SUPPRESSED, (f"{email} is suppressed ({person.suppression}): Broadside sends "
                            "it nothing, not even an essential message.")
    if essential:
        return None
    staying, left = standing(session, person.id)
    if left and not staying:
        return UNSUBSCRIBED, (f"{email} unsubscribed from every list; only an essential "
                              "template (a password reset, a one-time code) may reach it.")
    return None


def person_of(session: Session, email: str) -> Subscriber | None:
    """The subscriber with this (normalised) address, if there is one."""
    return session.scalar(select(Subscriber).where(Subscriber.email == email))
