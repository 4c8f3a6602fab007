"""Asking imported people to confirm: the double opt-in email the sign-up form sends, once
per person, queued by the import's background job and sent by the worker like any other
transactional message (its stream, its pace, its guards).

An import with consent "confirm" puts each person it adds on the list as `unconfirmed` with
no `confirmation_sent_at`: only such an import leaves that pair (a sign-up sets the time in
the transaction that creates its subscription). Each one is claimed with a guarded UPDATE
(`confirmation_sent_at IS NULL -> now`, the stamp the link is signed with) committed together
with its message row, so a crash between two people, a duplicated job or two workers at
once never mail anyone twice and never leave anyone claimed without a message; whoever is
left is found by the next run. Someone suppressed, unsubscribed or confirmed in the meantime
is not asked.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import select, update
from sqlalchemy.orm import Session

# The sign-up form's own sender (the email's words, link and subject), called as it is so
# the two never drift; its signature is the sign-up feature's to keep.
from broadside.audience.signup import Links, send_confirmation
from broadside.core.db import rowcount
from broadside.core.models import MailingList, Subscriber, Subscription
from broadside.core.models.audience import SubscriptionStatus
from broadside.core.timeutil import utcnow
from broadside.delivery.queues import Jobs

CHUNK = 200
_UNCONFIRMED = SubscriptionStatus.UNCONFIRMED.value


def _waiting(list_id: int, after: int):
    return (
        select(Subscription.id, Subscription.subscriber_id)
        .join(Subscriber, Subscriber.id == Subscription.subscriber_id)
        .where(Subscription.list_id == list_id, Subscription.status == _UNCONFIRMED,
               Subscription.confirmation_sent_at.is_(None), Subscriber.suppression.is_(None),
               Subscription.id > after)
        .order_by(Subscription.id).limit(CHUNK)
    )


def ask_to_confirm(session: Session, list_id: int, links: Links, jobs: Jobs,
                   on_chunk: Callable[[int], None] | None = None) -> int:
    """Queue the confirmation email for everyone on the list an import added unconfirmed and
    nobody has asked yet; returns how many were queued. `on_chunk(n)` after every chunk."""
    mailing_list = session.get(MailingList, list_id)
    if mailing_list is None:
        return 0
    asked = 0
    last = 0
    while rows := session.execute(_waiting(list_id, last)).all():
        session.commit()  # end the read: each claim below is its own short transaction
        done = 0
        for subscription_id, subscriber_id in rows:
            now = utcnow()
            claimed = session.execute(
                update(Subscription)
                .where(Subscription.id == subscription_id, Subscription.status == _UNCONFIRMED,
                       Subscription.confirmation_sent_at.is_(None),
                       Subscription.subscriber_id.in_(select(Subscriber.id).where(
                           Subscriber.id == subscriber_id, Subscriber.suppression.is_(None))))
                .values(confirmation_sent_at=now)
                .execution_options(synchronize_session=False)
            )
            if rowcount(claimed) != 1:
                session.rollback()
                continue
            # Commits the claim and the message row together, then hands it to the worker.
            send_confirmation(session, mailing_list, session.get_one(Subscriber, subscriber_id),
                              now, links, jobs)
            done += 1
        asked += done
        last = rows[-1][0]
        if on_chunk and done:
            on_chunk(done)
    session.commit()
    return asked
