"""Double opt-in: a sign-up creates an `unconfirmed` subscription and mails a signed link;
following the link (and pressing the button) makes it `active`.

Nobody is re-activated without their own action: an unsubscribed person who signs up again
gets a new confirmation email and stays unsubscribed until they confirm with it; a link mailed
before they left never brings them back (`confirm` in `broadside.audience.subscriptions`, which
writes every status change); a suppressed person gets nothing at all. Whatever happened, the
sign-up form shows the same answer, so it does not reveal who is on the list.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from broadside.audience import subscriptions
from broadside.audience.subscribers.service import (
    clean_email,
    clean_name,
    get_or_create_subscriber,
)
from broadside.audience.subscribers.time_zone import browser_timezone
from broadside.campaigns.automations.entering import enter_joined
from broadside.core.db import rowcount
from broadside.core.errors import DomainError, NotFound
from broadside.core.events import record_event
from broadside.core.i18n import _, clean_locale
from broadside.core.models import MailingList, Subscriber, Subscription
from broadside.core.timeutil import utcnow
from broadside.delivery.queues import Jobs
from broadside.delivery.transactional import queue_transactional
from broadside.mail.signup_texts import confirmation_email

SALT = "broadside.signup-confirm.v1"
# At most one confirmation email per address per list in this window.
RESEND_AFTER = timedelta(minutes=10)
LINK_MAX_AGE_SECONDS = 7 * 24 * 3600


def N_(message: str) -> str:
    return message


INVALID_LINK = N_("This confirmation link is not valid any more. Sign up again and use the "
                  "link in the newest email.")


class LeftSinceLink(DomainError):
    """The link was mailed before its reader unsubscribed: it no longer subscribes them.
    Carries the list, so the reader's page can offer its sign-up form."""

    status_code = 410

    def __init__(self, message: str, mailing_list: MailingList) -> None:
        super().__init__(message)
        self.mailing_list = mailing_list


def _left_since(mailing_list: MailingList) -> LeftSinceLink:
    return LeftSinceLink(
        _("You unsubscribed from %(list)s after this link was sent, so it no longer "
          "subscribes you. To receive it again, sign up again: we will send you a new link.",
          list=mailing_list.name),
        mailing_list)


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
        raise NotFound(_("There is no sign-up form here."))
    return mailing_list


def sign_up(session: Session, list_id: int, email: str | None, name: str | None = "", *,
            links: Links, jobs: Jobs, warn: Callable[[str], list[str]] | None = None,
            locale: str | None = None, timezone: str | None = None) -> bool:
    """Record a sign-up and mail a confirmation when one is due; True when one was queued.

    `warn(address)`: the owner's warnings about the address (which sending identities cannot
    reach it: webapp.address_warnings), kept as `address_warning` events on the person's page,
    never shown to the person signing up (the form's answer is the same whatever happened).

    `locale`: the language the form was shown in, kept as the reader's when they are new or
    have none yet (a reader's own choice is never overwritten by a form). `timezone`: what
    the reader's browser said their time zone is, kept likewise; one this server does not know
    (or none) is nothing, never an error for the reader.

    Raises ValidationError for an address that is not valid (safe to show: it says nothing
    about who is subscribed).
    """
    mailing_list = public_list(session, list_id)
    email = clean_email(email)
    name = clean_name(name)
    subscriber, created = get_or_create_subscriber(session, email, name)
    if subscriber.locale is None and clean_locale(locale):
        subscriber.locale = clean_locale(locale)
    if subscriber.timezone is None:
        subscriber.timezone = browser_timezone(timezone)
    for warning in warn(email) if warn is not None and created else []:
        record_event(session, "address_warning", subscriber_id=subscriber.id, list_id=list_id,
                     detail=warning[:1000])
    if subscriber.suppression is not None:
        session.commit()
        return False
    subscriptions.create(session, subscriber.id, list_id, "sign_up",
                         detail="sign-up form, waiting for confirmation", source="signup")
    now = utcnow()
    # Guarded UPDATE: of two sign-ups racing, only one gets to send the email. Not a status
    # change: the time the link is signed with. Someone who left since the last email gets
    # a new one at once (that older link cannot bring them back).
    claimed = session.execute(
        update(Subscription)
        .where(
            Subscription.subscriber_id == subscriber.id,
            Subscription.list_id == list_id,
            Subscription.status != subscriptions.ACTIVE.value,
            or_(Subscription.confirmation_sent_at.is_(None),
                Subscription.confirmation_sent_at <= now - RESEND_AFTER,
                and_(Subscription.status == subscriptions.UNSUBSCRIBED.value,
                     Subscription.unsubscribed_at >= Subscription.confirmation_sent_at)),
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
        raise NotFound(_(INVALID_LINK))
    row = session.execute(
        select(Subscription, MailingList)
        .join(MailingList, MailingList.id == Subscription.list_id)
        .where(Subscription.subscriber_id == claim.subscriber_id,
               Subscription.list_id == claim.list_id)
    ).first()
    # A newer confirmation email makes the older links stop working.
    if row is None or row[0].confirmation_sent_at is None or \
            _stamp(row[0].confirmation_sent_at) != claim.sent_stamp:
        raise NotFound(_(INVALID_LINK))
    return row[0], row[1]


def confirmation_page(session: Session, links: Links, token: str) -> tuple[MailingList, bool]:
    """(list, already active) for the page that asks the reader to press Confirm.

    Raises LeftSinceLink (the page says so) when they unsubscribed after this link was sent."""
    subscription, mailing_list = _claimed_subscription(session, links, token)
    if subscription.status == subscriptions.ACTIVE:
        return mailing_list, True
    if not subscriptions.confirmable(subscription.status, subscription.confirmation_sent_at,
                                     subscription.unsubscribed_at):
        raise _left_since(mailing_list)
    return mailing_list, False


def confirm(session: Session, links: Links, token: str) -> MailingList:
    """Make the subscription active; idempotent. Raises LeftSinceLink, changing nothing,
    when they unsubscribed after this link was sent."""
    subscription, mailing_list = _claimed_subscription(session, links, token)
    subscriber_id = subscription.subscriber_id
    if subscriptions.move(session, subscriber_id, mailing_list.id, "confirm",
                          detail="confirmed by the subscriber's link",
                          sent_at=subscription.confirmation_sent_at):
        # Their welcome, in the transaction that made them active.
        enter_joined(session, mailing_list.id, [subscriber_id], source="joined")
    else:
        status = session.scalar(
            select(Subscription.status).where(Subscription.subscriber_id == subscriber_id,
                                              Subscription.list_id == mailing_list.id)
            .execution_options(populate_existing=True))
        if status == subscriptions.UNSUBSCRIBED:
            session.rollback()
            raise _left_since(mailing_list)
        if status != subscriptions.ACTIVE:  # a newer link was mailed meanwhile, or it is gone
            session.rollback()
            raise NotFound(_(INVALID_LINK))
    session.commit()
    return mailing_list
