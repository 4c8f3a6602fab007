"""The schema. Every change goes through a Flask-Migrate revision under `migrations/`."""

from webapp.models.accounts import ApiToken, Owner, SiteSettings
from webapp.models.audience import (
    Import,
    ImportRejection,
    MailingList,
    Subscriber,
    Subscription,
)
from webapp.models.events import Event
from webapp.models.sending import Broadcast, Delivery, Revision, TransactionalMessage

__all__ = [
    "ApiToken",
    "Broadcast",
    "Delivery",
    "Event",
    "Import",
    "ImportRejection",
    "MailingList",
    "Owner",
    "Revision",
    "SiteSettings",
    "Subscriber",
    "Subscription",
    "TransactionalMessage",
]
