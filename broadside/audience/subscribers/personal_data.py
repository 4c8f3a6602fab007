"""A subscriber's own data, for them: the export behind "Download my data" and the erase behind
"Erase me" on the preferences page (the link in every email, no login).

The signed token is the only credential, so everything here starts from
`broadside.audience.unsubscribe.service.resolve`: the person the token was made for (its mark checked),
never anyone else. Every query of the export is keyed by that one subscriber id (or, for
transactional mail, by their address, as the owner's erase selects it), so it holds nothing of
another person; the owner's own words (list names, subjects, automation names) are in it
because they describe what this person received.

The export is bounded: the newest `MESSAGE_LIMIT` messages, and the file says when it is cut.
Subjects are filled in with the details held now (the copy as sent is not kept), once per
distinct subject. Each export appends an `exported` event to the person's history; it goes
with them if they are erased.

The erase is the owner's (`broadside.audience.subscribers.service.erase_uncommitted`, which the
owner's `erase` and bulk erase run too): the same rows go, the same rows stay. The owner's
erase records nothing about the person (an event naming them would undo the erase, and their
events are deleted with them); this one adds one `erased` event that names neither the person
nor their address, only the list whose link was used and that the person asked, so the owner
can see that it happened and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from broadside.audience.subscribers import service as subscribers
from broadside.audience.unsubscribe.service import resolve
from broadside.core.errors import ValidationError, shown
from broadside.core.events import record_event
from broadside.core.models import (
    Broadcast,
    Delivery,
    MailingList,
    Revision,
    Subscriber,
    Subscription,
    TransactionalMessage,
)
from broadside.core.models.automations import Automation, AutomationMessage, AutomationRevision
from broadside.core.timeutil import utcnow
from broadside.delivery.content_retention import HASH_FORM, removal_words
from broadside.mail.merge_fields import compile_template
from broadside.mail.merge_sandbox import TEXT_ENV, render_bounded
from broadside.mail.rendering import MAX_SUBJECT_CHARS, RENDER_ERRORS
from broadside.mail.unsubscribe_tokens import UnsubscribeClaim

FORMAT = "broadside.personal-data.v1"
MESSAGE_LIMIT = 10_000
SUBJECT_NOTE = ("Subjects that greet you by name or use your details are filled in with the "
                "details held now; if you changed them since, a message may have said otherwise.")


def _when(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC (the database keeps naive UTC)."""
    return None if moment is None else moment.replace(microsecond=0).isoformat() + "Z"


class _Subjects:
    """Each distinct subject filled in once with this person's values (a subject is the same
    for them every time it is rendered)."""

    def __init__(self, email: str, name: str, attributes: dict[str, Any]) -> None:
        self.email, self.name, self.attributes = email, name, attributes
        self.done: dict[str, str] = {}

    def __call__(self, subject: str) -> str:
        if subject not in self.done:
            self.done[subject] = self._fill(subject)
        return self.done[subject]

    def _fill(self, subject: str) -> str:
        if "{" not in subject:  # no merge syntax (most subjects): nothing to compile
            return " ".join(subject.split())
        try:
            template = compile_template(TEXT_ENV, subject, "subject")
            context = {"email": self.email, "name": self.name, "attributes": self.attributes,
                       "unsubscribe_url": ""}
            # As the sending path fills it (`CompiledRevision.fill`): bounded, one line.
            return " ".join(render_bounded(template, context, limit=MAX_SUBJECT_CHARS,
                                           what="subject").split())
        except (ValidationError, *RENDER_ERRORS):
            return subject  # as the owner wrote it, rather than nothing


@dataclass(frozen=True)
class _Message:
    date: datetime | None
    fields: dict[str, Any]


def _broadcast_messages(session: Session, subscriber_id: int, subject_of: _Subjects,
                        limit: int) -> list[_Message]:
    rows = session.execute(
        select(Delivery.status, Delivery.reason, Delivery.sent_at, Delivery.updated_at,
               func.coalesce(Revision.subject, Broadcast.subject).label("subject"),
               func.coalesce(Broadcast.queued_at, Broadcast.created_at).label("queued_at"),
               MailingList.name.label("list_name"))
        .join(Broadcast, Broadcast.id == Delivery.broadcast_id)
        .outerjoin(Revision, Revision.broadcast_id == Broadcast.id)
        .outerjoin(MailingList, MailingList.id == func.coalesce(Delivery.list_id,
                                                                 Broadcast.list_id))
        .where(Delivery.subscriber_id == subscriber_id)
        .order_by(Delivery.id.desc()).limit(limit)
    ).all()
    return [_Message(r.sent_at or r.updated_at or r.queued_at, {
        "type": "newsletter", "subject": subject_of(r.subject), "list": r.list_name,
        "status": r.status, "sent_at": _when(r.sent_at),
        "last_change_at": _when(r.updated_at or r.queued_at), "reason": shown(r.reason),
    }) for r in rows]


def _automation_messages(session: Session, subscriber_id: int, subject_of: _Subjects,
                         limit: int) -> list[_Message]:
    rows = session.execute(
        select(AutomationMessage.status, AutomationMessage.reason, AutomationMessage.sent_at,
               AutomationMessage.updated_at, AutomationMessage.due_at,
               AutomationRevision.subject, Automation.name.label("automation"))
        .join(AutomationRevision, AutomationRevision.id == AutomationMessage.revision_id)
        .join(Automation, Automation.id == AutomationMessage.automation_id)
        .where(AutomationMessage.subscriber_id == subscriber_id)
        .order_by(AutomationMessage.id.desc()).limit(limit)
    ).all()
    return [_Message(r.sent_at or r.updated_at or r.due_at, {
        "type": "automation", "subject": subject_of(r.subject), "automation": r.automation,
        "status": r.status, "due_at": _when(r.due_at), "sent_at": _when(r.sent_at),
        "last_change_at": _when(r.updated_at), "reason": shown(r.reason),
    }) for r in rows]


def _transactional_condition(subscriber_id: int, email: str):
    # The rows the owner's erase deletes: addressed to them by id or by address.
    return or_(TransactionalMessage.subscriber_id == subscriber_id,
               TransactionalMessage.to_email == email)


def _transactional_messages(session: Session, subscriber_id: int, email: str,
                            limit: int) -> list[_Message]:
    rows = session.execute(
        select(TransactionalMessage.kind, TransactionalMessage.subject,
               TransactionalMessage.status, TransactionalMessage.reason,
               TransactionalMessage.created_at, TransactionalMessage.sent_at,
               TransactionalMessage.content_removed_at, TransactionalMessage.content_sha256,
               TransactionalMessage.template_revision_id)
        .where(_transactional_condition(subscriber_id, email))
        .order_by(TransactionalMessage.id.desc()).limit(limit)
    ).all()
    # Their subject was stored as sent: nothing to fill in. After the retention only its
    # SHA-256 is held (broadside.delivery.content_retention), and the file says so.
    messages = []
    for r in rows:
        fields: dict[str, Any] = {
            "type": "confirmation" if r.kind == "confirmation" else "one-off",
            "subject": r.subject, "status": r.status, "created_at": _when(r.created_at),
            "sent_at": _when(r.sent_at), "reason": shown(r.reason),
        }
        removed = removal_words(r.kind, r.created_at, r.content_removed_at)
        if removed is not None:
            fields.update(subject=None, content=removed,
                          content_removed_at=_when(r.content_removed_at),
                          content_sha256=r.content_sha256, content_hash_form=HASH_FORM)
        if r.template_revision_id is not None:
            fields["template_revision_id"] = r.template_revision_id
        messages.append(_Message(r.sent_at or r.created_at, fields))
    return messages


def _message_total(session: Session, subscriber_id: int, email: str) -> int:
    counts = (
        select(func.count()).select_from(Delivery).where(Delivery.subscriber_id == subscriber_id),
        select(func.count()).select_from(AutomationMessage)
        .where(AutomationMessage.subscriber_id == subscriber_id),
        select(func.count()).select_from(TransactionalMessage)
        .where(_transactional_condition(subscriber_id, email)),
    )
    return sum(session.scalar(query) or 0 for query in counts)


def _subscriptions(session: Session, subscriber_id: int) -> list[dict[str, Any]]:
    rows = session.execute(
        select(MailingList.name, Subscription.status, Subscription.created_at,
               Subscription.confirmation_sent_at, Subscription.confirmed_at,
               Subscription.unsubscribed_at, Subscription.unsubscribe_source)
        .join(MailingList, MailingList.id == Subscription.list_id)
        .where(Subscription.subscriber_id == subscriber_id)
        .order_by(func.lower(MailingList.name))
    ).all()
    return [{
        "list": r.name, "status": r.status, "joined_at": _when(r.created_at),
        "confirmation_sent_at": _when(r.confirmation_sent_at),
        "confirmed_at": _when(r.confirmed_at), "left_at": _when(r.unsubscribed_at),
        "left_by": r.unsubscribe_source,
    } for r in rows]


def personal_data(session: Session, claim: UnsubscribeClaim, *,
                  limit: int = MESSAGE_LIMIT) -> dict[str, Any]:
    """Everything held about the person the token names, as one JSON-ready document, and an
    `exported` event in their history (committed)."""
    recipient = resolve(session, claim)
    subscriber_id = recipient.subscriber_id
    person = session.get(Subscriber, subscriber_id, populate_existing=True)
    assert person is not None  # resolve found them
    attributes = dict(person.attributes or {})
    subject_of = _Subjects(person.email, person.name or "", attributes)
    messages = sorted(
        _broadcast_messages(session, subscriber_id, subject_of, limit)
        + _automation_messages(session, subscriber_id, subject_of, limit)
        + _transactional_messages(session, subscriber_id, person.email, limit),
        key=lambda m: m.date or datetime.min, reverse=True,
    )[:limit]
    total = _message_total(session, subscriber_id, person.email)
    document: dict[str, Any] = {
        "format": FORMAT,
        "exported_at": _when(utcnow()),
        "about": "Everything this newsletter holds about you: your address and details, the "
                 "lists you are on or left, whether mail to you is stopped, and the messages "
                 "sent or due to be sent to you. Times are in UTC.",
        "person": {"email": person.email, "name": person.name or "", "attributes": attributes,
                   "added_at": _when(person.created_at)},
        "mail_stopped": None if person.suppression is None else {
            "because": person.suppression, "since": _when(person.suppressed_at),
            "detail": person.suppression_detail,
        },
        "soft_bounces": person.soft_bounce_count or 0,
        "subscriptions": _subscriptions(session, subscriber_id),
        "messages_total": total,
        "messages_included": len(messages),
        "messages_note": SUBJECT_NOTE,
        "messages": [m.fields for m in messages],
    }
    if total > len(messages):
        document["messages_note"] = (f"Only the newest {len(messages):,} of your {total:,} "
                                     f"messages are listed. {SUBJECT_NOTE}")
    record_event(session, "exported", subscriber_id=subscriber_id, list_id=claim.list_id,
                 detail="their own data, downloaded through the link in an email",
                 data={"messages": len(messages)})
    session.commit()
    return document


def erase_self(session: Session, claim: UnsubscribeClaim) -> str:
    """The owner's erase, asked for by the person the token names; returns their address (to
    say what was erased). The caller gets NotFound when the token's person is already gone."""
    recipient = resolve(session, claim)
    # `erase_uncommitted` is the owner's erase (`erase` is it plus a commit), so the same rows
    # go and stay; the anonymous record commits with it, in one transaction. Unlike `erase`,
    # the session is not emptied: the page that follows still reads the site's settings.
    subscribers.erase_uncommitted(session, [recipient.subscriber_id])
    record_event(session, "erased", list_id=claim.list_id,
                 detail="a subscriber erased themselves through the link in an email",
                 data={"by": "subscriber"})
    session.commit()
    return recipient.email
