"""A provider's delivery event settles a message left `unknown`: it becomes `sent`.

A row is `unknown` when the worker handed the message over and then lost the answer (a crash,
a dropped connection: invariant 5); only the owner's "send again" moves it otherwise, because
a second copy is worse than a missing one. The provider's own signed word that it delivered
the message is the one other proof, so a verified delivery event moves the row `unknown ->
sent` here, through the row's ledger and nowhere else:

- a broadcast's delivery through `broadside.campaigns.broadcasts.ledger.transition` (guarded by
  `status = 'unknown'`; it moves the broadcast's counters and writes the `sent` event whose
  detail is the evidence: "delivered: confirmed by postmark's delivery event (MessageID …)");
- an automation message through `broadside.campaigns.automations.ledger.transition`, the same way;
- a transactional message (a test send, a confirmation) through
  `broadside.delivery.transactional_ledger.transition`, the same way: its `reason` and its
  `sent` event hold the evidence.

The row is found by the provider's id for the message (`provider_message_id`: deliveries,
then automation messages, then transactional messages), else by our Message-ID as recorded
(automation and transactional messages; a delivery's is not stored), else by the row our
Message-ID names (broadside.mail.message_refs: a row left `unknown` by a crash has neither
id recorded), and only if it was sent to the address the event names and through an identity
the event speaks for (`Senders`: the identity whose webhook received it; a broadcast's
delivery goes through its broadcast's identity, an automation's message through its
automation's, a transactional message through its own): an event at identity B's webhook that
names identity A's message settles nothing, whoever holds B's secret. A row in any other
state is left alone: `sent` already says it, and a `failed`, `pending` or `sending` row
belongs to the worker or the owner (it is logged). Whatever was found, a delivery ends the
address's run of soft bounces.

Lock order (docs/ARCHITECTURE.md): the ledger takes the broadcast row before the delivery, and
the subscriber's soft-bounce reset comes last.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, false, literal, or_, select
from sqlalchemy.orm import Session

from broadside.audience.unsubscribe.suppression import message_id_forms, reset_soft_bounces_for_email
from broadside.campaigns.automations import ledger as automation_ledger
from broadside.campaigns.broadcasts import ledger
from broadside.core.addresses import normalise_email
from broadside.core.errors import ValidationError
from broadside.core.models import (
    Automation,
    AutomationMessage,
    Broadcast,
    Delivery,
    Subscriber,
    TransactionalMessage,
)
from broadside.core.models.sending import DeliveryStatus
from broadside.core.timeutil import utcnow
from broadside.delivery import transactional_ledger
from broadside.feedback.payloads import ProviderEvent
from broadside.mail.message_refs import KINDS, row_of

log = logging.getLogger("broadside.feedback")

UNKNOWN = DeliveryStatus.UNKNOWN.value
SENT = DeliveryStatus.SENT.value
MAX_REASON = 500


@dataclass(frozen=True)
class Found:
    """The row a delivery event is about."""

    kind: str  # delivery | automation message | transactional message
    id: int
    status: str
    subscriber_id: int | None
    broadcast_id: int | None  # a delivery's broadcast (whose counters its ledger moves)
    claimed_at: datetime | None


@dataclass(frozen=True)
class Senders:
    """The identities whose rows an event may settle: rows by id (`ids`), and the default
    identity's (`default`: rows whose identity is NULL)."""

    ids: frozenset[int] = frozenset()
    default: bool = False

    @classmethod
    def of(cls, identity_ids: Iterable[int | None]) -> Senders:
        wanted = list(identity_ids)
        return cls(frozenset(i for i in wanted if i is not None), None in wanted)

    def match(self, column: Any) -> ColumnElement[bool]:
        """The clause on an identity_id column."""
        clauses = [column.in_(sorted(self.ids))] if self.ids else []
        if self.default:
            clauses.append(column.is_(None))
        return or_(*clauses) if clauses else false()


def _address(email: str) -> str:
    try:
        return normalise_email(email)
    except ValidationError:
        return (email or "").strip().lower()


_TABLES: dict[str, Any] = {"delivery": Delivery, "automation message": AutomationMessage,
                           "transactional message": TransactionalMessage}


def _one(session: Session, kind: str, address: str, column: str, values: list[Any],
         senders: Senders) -> Found | None:
    """The newest row of one kind whose `column` is one of `values`, sent to `address`
    through one of `senders`."""
    table = _TABLES[kind]
    if kind == "transactional message":
        query = select(table.id, table.status, table.subscriber_id, literal(None),
                       literal(None)).where(table.to_email == address,
                                            senders.match(table.identity_id))
    else:
        broadcast = table.broadcast_id if kind == "delivery" else literal(None)
        owner, owner_id = ((Broadcast, table.broadcast_id) if kind == "delivery"
                           else (Automation, table.automation_id))
        query = (select(table.id, table.status, table.subscriber_id, broadcast, table.claimed_at)
                 .join(Subscriber, Subscriber.id == table.subscriber_id)
                 .join(owner, owner.id == owner_id)
                 .where(Subscriber.email == address, senders.match(owner.identity_id)))
    row = session.execute(query.where(getattr(table, column).in_(values))
                          .order_by(table.id.desc()).limit(1)).first()
    return None if row is None else Found(kind, *row)


def find_row(session: Session, message_ids: tuple[str, ...], email: str,
             senders: Senders) -> Found | None:
    """What a provider's event names, among the rows sent through `senders`: by the
    provider's id first (deliveries, then automation messages, then transactional messages),
    then by our Message-ID as recorded, then by the row our Message-ID (or its echoed
    reference) names: a row whose ids were never recorded because the worker died between
    handing it over and the answer."""
    forms = message_id_forms(message_ids)
    if not forms:
        return None
    address = _address(email)
    for column in ("provider_message_id", "message_id"):
        for kind in KINDS.values():
            if kind == "delivery" and column == "message_id":
                continue  # not stored: the row it names is found below (message_refs)
            found = _one(session, kind, address, column, list(forms), senders)
            if found is not None:
                return found
    for value in message_ids:
        named = row_of(value)
        if named is not None:
            kind, row_id = named
            found = _one(session, kind, address, "id", [row_id], senders)
            if found is not None:
                return found
    return None


def _to_sent(session: Session, row: Found, detail: str, data: dict[str, Any],
             now: datetime) -> bool:
    """unknown -> sent through the row's own ledger; True when this call moved it."""
    # When it went out is when it was handed over: its claim, moments before (the provider's
    # delivery time is later still, and would make the frequency cap read it as newer).
    values = {"sent_at": row.claimed_at or now, "reason": detail[:MAX_REASON],
              "error_class": None}
    change = ledger.Change(row.id, row.subscriber_id, values, detail, data)
    if row.kind == "delivery":
        assert row.broadcast_id is not None
        moved = ledger.transition(session, row.broadcast_id, [change], source=UNKNOWN,
                                  target=SENT, now=now)
    elif row.kind == "automation message":
        moved = automation_ledger.transition(session, [change], source=UNKNOWN, target=SENT,
                                             now=now)
    else:
        # Transactional mail keeps no counters; its sent time is the event's (no claim time).
        moved = transactional_ledger.transition(session, [transactional_ledger.Move(
            row.id, row.subscriber_id, {"sent_at": now, "reason": detail[:MAX_REASON]}, detail,
            data)], source=UNKNOWN, target=SENT, now=now)
    return bool(moved)


def confirm_delivery(session: Session, event: ProviderEvent, senders: Senders,
                     now: datetime | None = None) -> str:
    """Apply one delivery event received for `senders`; commits. Returns what happened, for
    the logs and the tests: `settled` (unknown -> sent), `already sent`, `left <status>`, or
    `unmatched` (also when the row went through another identity)."""
    now = now or utcnow()
    row = find_row(session, event.message_ids, event.email, senders)
    outcome = "unmatched"
    if row is not None and row.status == UNKNOWN:
        detail = f"delivered: {event.detail}" if event.detail else "delivered"
        data = {"source": event.source, "message_ids": list(event.message_ids)}
        outcome = "settled" if _to_sent(session, row, detail, data, now) else "raced"
        if outcome == "settled":
            log.info("%s %s: unknown -> sent, %s", row.kind, row.id, detail)
        else:
            # Moved meanwhile (the owner's "send again", or a second copy of this event).
            log.info("%s %s left unknown before this delivery event; left alone", row.kind,
                     row.id)
    elif row is not None and row.status == SENT:
        outcome = "already sent"
    elif row is not None:
        outcome = f"left {row.status}"
        log.warning("%s's delivery event names %s %s, which is %s here; left alone",
                    event.source, row.kind, row.id, row.status)
    # A delivery ends a run of soft bounces (the subscriber row last: the lock order).
    reset_soft_bounces_for_email(session, event.email)  # commits
    return outcome
