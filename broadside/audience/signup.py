"""Double opt-in: a sign-up creates an `unconfirmed` subscription and mails a signed link;
following the link (and pressing the button) makes it `active`.

Nobody is re-activated without their own action: an unsubscribed person who signs up again
gets a confirmation email and stays unsubscribed until they confirm; a suppressed person gets
nothing at all. Whatever happened, the caller shows the same answer, so the form does not
reveal who is on the list.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import datetime, timedelta

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from broadside.audience.subscribers.service import (
    clean_email,
    clean_name,
    get_or_create_subscriber,
)
from broadside.campaigns.automations.entering import enter_joined
from broadside.core.db import dialect_insert, rowcount
from broadside.core.errors import NotFound
from broadside.core.events import record_event
from broadside.core.models import MailingList, Subscriber, Subscription
from broadside.core.timeutil import utcnow
from broadside.delivery.queues import Jobs
from broadside.delivery.transactional import queue_transactional
from broadside.mail.signup_texts import confirmation_email
from broadside.webhooks import emitter

SALT = "broadside.signup-confirm.v1"
# At most one confirmation email per address per list in this window.
RESEND_AFTER = timedelta(minutes=10)
LINK_MAX_AGE_SECONDS = 7 * 24 * 3600
INVALID_LINK = ("This confirmation link is not valid any more. Sign up again and use the "
                "link in the newest email.")


@dataclass(frozen=True)
class Claim:
    subscriber_id: int
    list_id: int
    sent_stamp: int


@dataclass(frozen=True)
class Links:
    """What confirmation links are made with: the secret that signs them and the site's URL."""

    secret_key: str
    base_url: str

    def serializer(self) -> URLSafeTimedSerializer:
        return URLSafeTimedSerializer(self.secret_key, salt=SALT)


def _stamp(moment: datetime) -> int:
    """Microseconds since the epoch: both databases keep confirmation_sent_at to the µs."""
    return calendar.timegm(moment.timetuple()) * 1_000_000 + moment.microsecond


def make_token(links: Links, subscriber_id: int, list_id: int, sent_at: datetime) -> str:
    return links.serializer().dumps([subscriber_id, list_id, _stamp(sent_at)])


def read_token(links: Links, token: str) -> Claim | None:
    if not token or len(token) > 512:
        return None
    try:
        data = links.serializer().loads(token, max_age=LINK_MAX_AGE_SECONDS)
    except (BadSignature, SignatureExpired):
        return None
    if not (isinstance(data, list) and len(data) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) for v in data)):
        return None
    return Claim(*data)


def public_list(session: Session, list_id: int) -> MailingList:
    """The list, if it takes public sign-ups; otherwise the page does not exist."""
    mailing_list = session.get(MailingList, list_id)
    if mailing_list is None or not mailing_list.signup_enabled:
        raise NotFound("There is no sign-up form here.")
    return mailing_list


def sign_up(session: Session, list_id: int, email: str | None, name: str | None = "", *,
            links: Links, jobs: Jobs) -> bool:
    """Record a sign-up and mail a confirmation when one is due; True when one was queued.

    Raises ValidationError for an address that is not valid (safe to show: it says nothing
    about who is subscribed).
    """
    mailing_list = public_list(session, list_id)
    email = clean_email(email)
    name = clean_name(name)
    subscriber, created = get_or_create_subscriber(session, email, name)
    if subscriber.suppression is not None:
        session.commit()
        return False
    inserted = session.execute(
        dialect_insert(session, Subscription.__table__)
        .values(subscriber_id=subscriber.id, list_id=list_id, status="unconfirmed",
                created_at=utcnow())
        .on_conflict_do_nothing(index_elements=["subscriber_id", "list_id"])
        .returning(Subscription.__table__.c.id)
    ).first()
    if inserted is not None:
        record_event(session, "subscribed", subscriber_id=subscriber.id, list_id=list_id,
                     detail="sign-up form, waiting for confirmation")
        emitter.emit_subscriber(session, "subscriber.created", subscriber.id, list_id=list_id,
                               status="unconfirmed", source="signup")
    now = utcnow()
    # Guarded UPDATE: of two sign-ups racing, only one gets to send the email.
    claimed = session.execute(
        update(Subscription)
        .where(
            Subscription.subscriber_id == subscriber.id,
            Subscription.list_id == list_id,
            Subscription.status != "active",
            or_(Subscription.confirmation_sent_at.is_(None),
                Subscription.confirmation_sent_at <= now - RESEND_AFTER),
        )
        .values(confirmation_sent_at=now)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    if not rowcount(claimed):
        return False
    send_confirmation(session, mailing_list, subscriber, now, links, jobs)
    return True


def send_confirmation(session: Session, mailing_list: MailingList, subscriber: Subscriber,
                      sent_at: datetime, links: Links, jobs: Jobs) -> None:
    token = make_token(links, subscriber.id, mailing_list.id, sent_at)
    link = f"{links.base_url.rstrip('/')}/join/confirm/{token}"
    # In the owner's words and design (Settings -> Design; broadside.mail.signup_texts).
    email = confirmation_email(session, mailing_list, subscriber, link)
    queue_transactional(
        session, jobs, kind="confirmation", to_email=subscriber.email,
        subject=email.subject, html=email.html, text=email.text, subscriber_id=subscriber.id,
    )


def _claimed_subscription(session: Session, links: Links, token: str) -> tuple[Subscription, MailingList]:
    claim = read_token(links, token)
    if claim is None:
        raise NotFound(INVALID_LINK)
    row = session.execute(
        select(Subscription, MailingList)
        .join(MailingList, MailingList.id == Subscription.list_id)
        .where(Subscription.subscriber_id == claim.subscriber_id,
               Subscription.list_id == claim.list_id)
    ).first()
    # A newer confirmation email makes the older links stop working.
    if row is None or row[0].confirmation_sent_at is None or \
            _stamp(row[0].confirmation_sent_at) != claim.sent_stamp:
        raise NotFound(INVALID_LINK)
    return row[0], row[1]


def confirmation_page(session: Session, links: Links, token: str) -> tuple[MailingList, bool]:
    """(list, already active) for the page that asks the reader to press Confirm."""
    subscription, mailing_list = _claimed_subscription(session, links, token)
    return mailing_list, subscription.status == "active"


def confirm(session: Session, links: Links, token: str) -> MailingList:
    """Make the subscription active; idempotent."""
    subscription, mailing_list = _claimed_subscription(session, links, token)
    result = session.execute(
        update(Subscription)
        .where(Subscription.id == subscription.id, Subscription.status != "active")
        .values(status="active", confirmed_at=utcnow(), unsubscribed_at=None,
                unsubscribe_source=None)
        .execution_options(synchronize_session=False)
    )
    if rowcount(result):
        record_event(session, "confirmed", subscriber_id=subscription.subscriber_id,
                     list_id=mailing_list.id, detail="confirmed by the subscriber's link")
        # Their welcome, in the transaction that made them active.
        enter_joined(session, mailing_list.id, [subscription.subscriber_id], source="joined")
    session.commit()
    return mailing_list
