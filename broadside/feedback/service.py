"""Apply provider events, and find the identity a provider's webhook is for: plain functions
over a session (no Flask request in here).

Bounces and complaints suppress through broadside.audience.unsubscribe (`record_bounce`,
`record_complaint`: linked to what was sent by our Message-ID or the provider's id); a
delivery settles a row left `unknown` and ends a run of soft bounces
(broadside.feedback.settle).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy.orm import Session

from broadside.audience.unsubscribe import service as leaving
from broadside.core.errors import NotFound
from broadside.core.models.identities import IdentityStatus
from broadside.delivery.identities import service as identities
from broadside.delivery.identities.service import SendingIdentity
from broadside.feedback import settle
from broadside.feedback.payloads import ProviderEvent
from broadside.feedback.replay import Refused

OWN_WEBHOOKS = ("postmark", "resend", "mailgun")  # providers whose webhooks name an identity


def webhook_identity(session: Session, config: Mapping[str, Any], identity_id: int | None,
                     scheme: str) -> SendingIdentity:
    """The identity whose `scheme` (postmark, resend, mailgun) webhook this is (None: the
    default identity, the environment's, whose secret is WEBHOOK_SECRET).

    NotFound (404) unless it exists, is not deleted and sends through that provider; Refused
    (401) when it has no webhook secret to check the request against."""
    identity: SendingIdentity | None = None
    if identity_id is None or 1 <= identity_id <= identities.MAX_ID:
        try:
            identity = identities.resolve(session, config, identity_id)
        except NotFound:
            pass
    if (identity is None or identity.status == IdentityStatus.DELETED.value
            or identity.scheme != scheme):
        which = "the default identity" if identity_id is None else f"identity {identity_id}"
        raise NotFound(f"There is no {scheme} webhook for {which}: no such identity sends "
                       f"through {scheme}.")
    if not identity.webhook_secret:
        raise Refused(f"{identity.label} has no webhook secret yet: set the one {scheme} shows "
                      "on the identity's page, then send the webhook again.")
    return identity


def senders_of(identity: SendingIdentity) -> settle.Senders:
    """A provider's own webhook speaks for the one identity it was received for."""
    return settle.Senders.of([identity.id])


def ses_senders(session: Session, config: Mapping[str, Any]) -> settle.Senders:
    """What SES notifications speak for. SNS_TOPIC_ARNS names no identity, so: every live
    identity that does not send through Postmark, Resend or Mailgun (which hear from their
    own webhooks alone): `ses://` ones, and SMTP ones, which may be SES's SMTP interface."""
    return settle.Senders.of(i.id for i in identities.all_identities(session, config)
                             if i.scheme not in OWN_WEBHOOKS)


def apply_events(session: Session, events: Iterable[ProviderEvent],
                 senders: settle.Senders) -> int:
    """Record each event, received for `senders` (a delivery settles only their rows);
    returns how many named a known subscriber.

    Unknown addresses and ids are skipped silently: the answer to the provider is the same
    either way, so the endpoint cannot be used to learn who is subscribed. So is a delivery
    event naming another identity's message: acknowledged, and nothing settled.
    """
    known = 0
    for event in events:
        if event.type == "bounce":
            outcome = leaving.record_bounce(
                session, event.email, event.bounce_type or "hard",
                message_ids=event.message_ids, detail=event.detail, source=event.source,
            )
            known += outcome is not None
        elif event.type == "complaint":
            outcome = leaving.record_complaint(
                session, event.email, message_ids=event.message_ids, detail=event.detail,
                source=event.source,
            )
            known += outcome is not None
        elif event.type == "delivery":
            settle.confirm_delivery(session, event, senders)
    return known
