"""The schema. Every change goes through a Flask-Migrate revision under `migrations/`."""

from broadside.core.models.accounts import (
    ApiToken,
    Invitation,
    Owner,
    OwnerSession,
    RecoveryCode,
    SiteSettings,
)
from broadside.core.models.analytics import PersonActivity, TrackedLink, TrackingDay
from broadside.core.models.archive import ArchivedIssue
from broadside.core.models.attachments import Attachment
from broadside.core.models.audience import (
    Import,
    ImportRejection,
    MailingList,
    Segment,
    Subscriber,
    Subscription,
)
from broadside.core.models.audit import AuditEntry
from broadside.core.models.automations import (
    Automation,
    AutomationEntry,
    AutomationMessage,
    AutomationRevision,
    AutomationStep,
    Feed,
    FeedItem,
)
from broadside.core.models.bulk import BulkAction, BulkActionMember
from broadside.core.models.codes import Code
from broadside.core.models.content import ContentBlock, MessageTemplate
from broadside.core.models.events import Event
from broadside.core.models.identities import Identity
from broadside.core.models.mailboxes import BounceMailbox, MailboxMessage
from broadside.core.models.media import Media, MediaFile
from broadside.core.models.reputation import ReputationMark, ReputationPause
from broadside.core.models.sending import Broadcast, Delivery, Revision, TransactionalMessage
from broadside.core.models.shared_files import BrandFile, ImportChunk
from broadside.core.models.transactional import TransactionalTemplate, TransactionalTemplateRevision
from broadside.core.models.webhooks import WebhookEndpoint, WebhookMessage

__all__ = [
    "ApiToken",
    "Attachment",
    "ArchivedIssue",
    "Feed",
    "FeedItem",
    "AuditEntry",
    "Automation",
    "AutomationEntry",
    "AutomationMessage",
    "AutomationRevision",
    "AutomationStep",
    "BounceMailbox",
    "BrandFile",
    "Broadcast",
    "BulkAction",
    "BulkActionMember",
    "Code",
    "ContentBlock",
    "Delivery",
    "Event",
    "Identity",
    "Import",
    "ImportChunk",
    "Invitation",
    "ImportRejection",
    "MailboxMessage",
    "Media",
    "MediaFile",
    "MailingList",
    "MessageTemplate",
    "Owner",
    "OwnerSession",
    "PersonActivity",
    "RecoveryCode",
    "ReputationMark",
    "ReputationPause",
    "Revision",
    "Segment",
    "SiteSettings",
    "Subscriber",
    "Subscription",
    "TrackedLink",
    "TrackingDay",
    "TransactionalMessage",
    "TransactionalTemplate",
    "TransactionalTemplateRevision",
    "WebhookEndpoint",
    "WebhookMessage",
]
