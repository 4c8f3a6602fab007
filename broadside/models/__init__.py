"""The schema. Every change goes through a Flask-Migrate revision under `migrations/`."""

from broadside.models.accounts import ApiToken, Owner, SiteSettings
from broadside.models.analytics import PersonActivity, TrackedLink, TrackingDay
from broadside.models.archive import ArchivedIssue
from broadside.models.audience import (
    Import,
    ImportRejection,
    MailingList,
    Segment,
    Subscriber,
    Subscription,
)
from broadside.models.automations import (
    Automation,
    AutomationEntry,
    AutomationMessage,
    AutomationRevision,
    AutomationStep,
)
from broadside.models.bulk import BulkAction
from broadside.models.events import Event
from broadside.models.identities import Identity
from broadside.models.outgoing import WebhookEndpoint, WebhookMessage
from broadside.models.sending import Broadcast, Delivery, Revision, TransactionalMessage

__all__ = [
    "ApiToken",
    "ArchivedIssue",
    "Automation",
    "AutomationEntry",
    "AutomationMessage",
    "AutomationRevision",
    "AutomationStep",
    "Broadcast",
    "BulkAction",
    "Delivery",
    "Event",
    "Identity",
    "Import",
    "ImportRejection",
    "MailingList",
    "Owner",
    "PersonActivity",
    "Revision",
    "Segment",
    "SiteSettings",
    "Subscriber",
    "Subscription",
    "TrackedLink",
    "TrackingDay",
    "TransactionalMessage",
    "WebhookEndpoint",
    "WebhookMessage",
]
