"""Apply provider events: plain functions over a session (no Flask request in here)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from broadside.unsubscribe import service as leaving
from broadside.unsubscribe.suppression import reset_soft_bounces_for_email
from broadside.webhooks.payloads import ProviderEvent


def apply_events(session: Session, events: Iterable[ProviderEvent]) -> int:
    """Record each event; returns how many named a known subscriber.

    Unknown addresses are skipped silently: the answer to the provider is the same either
    way, so the endpoint cannot be used to learn who is subscribed.
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
            reset_soft_bounces_for_email(session, event.email)
    return known
