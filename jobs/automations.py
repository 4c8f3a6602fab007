"""Automation messages as a row source of the one send engine (jobs.engine, jobs.rows).

A slice of `AutomationRows` sends the due messages of every enabled automation of its
identity: the same lease check before each claim (invariant 1), the same pace (2), a
send-time re-check of the automation, the person and the list (3), claims committed before
any SMTP (4), `unknown` never resent (5), the one classifier and outcome policy (6), short
slices that continue from what is still pending (7), frozen revisions (8) and events for every
move (9). Only the rows, their re-check and their ledger differ
(`broadside.campaigns.automations.ledger`, the one writer of `AutomationMessage.status`).

Order within a person's series: a message is due only when no earlier step of the same
automation is still pending or in flight for them, so a step waiting for a retry holds the
next one back and the series arrives in order.

Fairness: the worker listens to `transactional`, then `automations`, then `broadcasts`. A
message that becomes due is picked up after the slice in progress (the broadcast slice
queues the automations job when it ends and something is due); a slice of automation messages
that has more to do queues its continuation behind the broadcasts, so the two take turns by
slice and a large import's welcomes never starve a broadcast.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from email.utils import formataddr

from sqlalchemy import and_, bindparam, exists, func, or_, select
from sqlalchemy.orm import Session, aliased

from broadside.campaigns.automations import entering, lifecycle, refreeze
from broadside.campaigns.automations import ledger as automation_ledger
from broadside.campaigns.broadcasts.ledger import Change
from broadside.campaigns.codes import minting
from broadside.core.models import (
    Automation,
    AutomationMessage,
    AutomationRevision,
    Subscriber,
    Subscription,
)
from broadside.core.models.automations import AutomationStatus
from broadside.core.timeutil import utcnow
from broadside.mail.attachment_use import parts_of
from broadside.mail.message_refs import automation_message_id
from broadside.mail.mime import MailAttachment
from broadside.mail.rendering import CompiledRevision, compiled_revision
from broadside.mail.unsubscribe_tokens import Tokens
from jobs.engine import SLICE_SECONDS, Slice
from jobs.languages import ReaderLanguages, RevisionMessages
from jobs.recheck import Recheck, skip_reason
from jobs.rows import Decision, Row
from jobs.runtime import Runtime

log = logging.getLogger("broadside.worker")

ENABLED = AutomationStatus.ENABLED.value
RECORDED_ONLY = "record only: logged, not sent"
DELETED = AutomationStatus.DELETED.value

_EARLIER = aliased(AutomationMessage)
# Not held back by an earlier step of the same series still pending or in flight.
_IN_ORDER = ~exists().where(
    _EARLIER.subscriber_id == AutomationMessage.subscriber_id,
    _EARLIER.automation_id == AutomationMessage.automation_id,
    _EARLIER.position < AutomationMessage.position,
    _EARLIER.status.in_(("pending", "sending")),
)
# A message whose revision prints no postal address is held, not sent (as a broadcast without
# one cannot be sent): it stays pending, out of the due rows, until a revision with an address
# reaches it (broadside.campaigns.automations.refreeze, when the address is added).
# (The few revisions without one are read once per statement, not once per message.)
_ADDRESSED = AutomationMessage.revision_id.not_in(
    select(AutomationRevision.id).where(automation_ledger.UNADDRESSED))
# (A record-only automation's messages are logged, never sent: no address needed.)
_WAITING = and_(AutomationMessage.status == "pending", Automation.status == ENABLED, _IN_ORDER,
                or_(_ADDRESSED, Automation.record_only))
_WHEN = func.coalesce(AutomationMessage.next_attempt_at, AutomationMessage.due_at)

_DUE_ROWS = (
    select(AutomationMessage.id, AutomationMessage.subscriber_id, AutomationMessage.list_id,
           AutomationMessage.automation_id, AutomationMessage.revision_id,
           AutomationMessage.step_id)
    .join(Automation, Automation.id == AutomationMessage.automation_id)
    .where(_WAITING, AutomationMessage.due_at <= bindparam("now"),
           (AutomationMessage.next_attempt_at.is_(None))
           | (AutomationMessage.next_attempt_at <= bindparam("now")))
    .order_by(AutomationMessage.due_at, AutomationMessage.id)
    .limit(bindparam("limit"))
)


def of_identity(identity_id: int | None):
    """The automations sent through one identity's stream (None: the default)."""
    return Automation.identity_id.is_(None) if identity_id is None else \
        Automation.identity_id == identity_id


def earliest_due(session: Session, identity_id: int | None = None) -> datetime | None:
    """When the next automation message of an identity may go (now or in the past: one is
    due)."""
    return session.scalar(
        select(func.min(_WHEN)).select_from(AutomationMessage)
        .join(Automation, Automation.id == AutomationMessage.automation_id)
        .where(_WAITING, of_identity(identity_id)))


def anything_due(session: Session, now: datetime | None = None, identity_id: int | None = None) -> bool:
    earliest = earliest_due(session, identity_id)
    return earliest is not None and earliest <= (now or utcnow())


@dataclass(frozen=True)
class MessageRow(Row):
    """A claimed automation message."""

    automation_id: int = 0
    revision_id: int = 0
    step_id: int = 0


class AutomationLedger:
    """Outcomes recorded through the automations' own ledger."""

    def transition(self, session: Session, changes: Sequence[Change], *, source: str,
                   target: str, now: datetime) -> list[int]:
        return automation_ledger.transition(session, changes, source=source, target=target, now=now)

    def attempts_of(self, session: Session, row_id: int) -> int:
        return int(session.scalar(select(AutomationMessage.attempts)
                                  .where(AutomationMessage.id == row_id)) or 0)


_STATE = (
    select(Automation.status, Subscriber.email, Subscriber.name, Subscriber.attributes,
           Subscriber.suppression, Subscription.status, Subscriber.soft_bounce_count,
           Subscriber.created_at, Automation.record_only, Subscriber.locale)
    .select_from(Automation)
    .outerjoin(Subscriber, Subscriber.id == bindparam("subscriber_id"))
    .outerjoin(Subscription, and_(Subscription.subscriber_id == Subscriber.id,
                                  Subscription.list_id == bindparam("list_id")))
    .where(Automation.id == bindparam("automation_id"))
)


class AutomationRecheck(Recheck):
    """Invariant 3 for automation messages: at each person's turn, the automation is still
    enabled (held otherwise; skipped once deleted), its revision prints a postal address
    (held otherwise), and the person is still on the list, subscribed and unsuppressed. Each
    revision is compiled once per slice."""

    def __init__(self, session: Session, runtime: Runtime, *, fields: bool) -> None:
        self.session = session
        self.rt = runtime
        self.broadcast_id = None  # type: ignore[assignment]
        self.list_id = None
        self.cap_hours = None
        self.from_email = ""
        self.tokens = Tokens(runtime.config["SECRET_KEY"])
        self.base_url = runtime.config["BASE_URL"]
        # A provider taking many messages in one JSON request gets each message's fields.
        self.fields = fields
        self.revisions: dict[int, tuple[CompiledRevision, str, str, tuple[MailAttachment, ...],
                                        RevisionMessages] | None] = {}
        self.readers = ReaderLanguages(session)

    def _revision(self, revision_id: int) -> tuple[CompiledRevision, str, str, tuple[
            MailAttachment, ...], RevisionMessages] | None:
        """The revision compiled, with its From, its files and its messages by language (read
        once per slice); None when it prints no postal address."""
        if revision_id not in self.revisions:
            revision = self.session.get(AutomationRevision, revision_id)
            assert revision is not None  # messages keep their revision (ON DELETE CASCADE)
            compiled = compiled_revision(revision.subject, revision.html_template,
                                         revision.text_template)
            self.revisions[revision_id] = None if not revision.postal_address else (
                compiled, formataddr((revision.from_name, revision.from_email)),
                revision.from_email, parts_of(self.session, revision.attachment_ids),
                RevisionMessages(revision, compiled, None))
        return self.revisions[revision_id]

    def message_id(self, row: Row) -> str:
        automation = row.automation_id if isinstance(row, MessageRow) else 0
        return automation_message_id(row.id, automation, self.from_email)

    def decide(self, row: Row) -> Decision:
        assert isinstance(row, MessageRow)
        state = self.session.execute(_STATE, {"automation_id": row.automation_id,
                                              "subscriber_id": row.subscriber_id,
                                              "list_id": row.list_id}).first()
        if state is None or state[0] == DELETED:
            return Decision(skip=lifecycle.DELETED_REASON)
        if state[0] != ENABLED:
            return Decision(hold=True)
        if state.record_only:
            # Logged, never sent: its code (if its step mints one) was minted by the claim.
            return Decision(skip=RECORDED_ONLY)
        (status, email, name, attributes, suppression, subscription, soft_bounces, joined, _,
         locale) = state
        reason = skip_reason(email, suppression, subscription)
        if reason is not None:
            return Decision(skip=reason)
        revision = self._revision(row.revision_id)
        if revision is None:
            return Decision(hold=True)  # no postal address: held (the due query leaves these out)
        self.compiled, self.from_header, self.from_email, self.attachments, self.messages = revision
        decision = self.prepare(row, email, name or "", attributes or {}, joined, row.list_id,
                                locale=locale)
        if decision.message is not None:
            decision.message.soft_bounces = soft_bounces or 0
        return decision


class AutomationRows:
    """The row source of a slice of the due messages of every enabled automation of this
    stream's identity, oldest due first."""

    key_kind = "a"  # idempotency keys of its batches name automation messages
    pausable = True
    ledger = AutomationLedger()

    def __init__(self, session: Session, runtime: Runtime) -> None:
        self.session = session
        self.rt = runtime
        self.earliest: datetime | None = None
        self.recheck: AutomationRecheck | None = None
        self.prefixes: dict[int, str | None] = {}  # revision id -> its codes' prefix

    def open(self, fields: bool) -> str | None:
        self.recheck = AutomationRecheck(self.session, self.rt, fields=fields)
        return None

    def claim(self, limit: int) -> list[Row]:
        """This identity's due automation messages, read, then claimed (pending -> sending,
        each guarded: a row claimed meanwhile is not among those returned); not committed."""
        rows = [MessageRow(r.id, r.subscriber_id, r.list_id, automation_id=r.automation_id,
                           revision_id=r.revision_id, step_id=r.step_id)
                for r in self.session.execute(_DUE_ROWS.where(of_identity(self.rt.identity_id)),
                                              {"now": utcnow(), "limit": limit})]
        if not rows:
            return []
        claimed = automation_ledger.claim(self.session, [(r.id, r.subscriber_id) for r in rows])
        # Each with the revision its claim found (a newer one may have reached it since the read).
        rows = [replace(r, revision_id=claimed[r.id]) for r in rows if r.id in claimed]
        return self._with_codes(rows)

    def _with_codes(self, rows: list[MessageRow]) -> list[Row]:
        """The codes of the claimed messages whose revision mints them, minted in the claim's
        transaction (one INSERT for the batch; a message claimed again keeps its code)."""
        unknown = {r.revision_id for r in rows} - set(self.prefixes)
        if unknown:  # revisions never change: read once per slice
            self.prefixes.update(self.session.execute(
                select(AutomationRevision.id, AutomationRevision.codes_prefix)
                .where(AutomationRevision.id.in_(unknown))).all())
        minting_rows = [minting.ToMint(r.id, r.subscriber_id, prefix, automation_id=r.automation_id,
                                       step_id=r.step_id)
                        for r in rows if (prefix := self.prefixes.get(r.revision_id))]
        if not minting_rows:
            return list(rows)
        codes = minting.mint(self.session, minting.AUTOMATION_MESSAGE, minting_rows)
        return [replace(r, code=codes.get(r.id)) for r in rows]

    def decide(self, row: Row) -> Decision:
        assert self.recheck is not None, "decide() before open()"
        return self.recheck.decide(row)

    def finished(self, deadline: float) -> bool:
        """Done when nothing will be due before this slice would end anyway."""
        self.earliest = earliest_due(self.session, self.rt.identity_id)
        self.session.commit()
        if self.earliest is None:
            return True
        return (self.earliest - utcnow()).total_seconds() >= deadline - time.monotonic()

    def wait_for_due(self, deadline: float) -> bool:
        if self.earliest is None:
            return False
        wait = (self.earliest - utcnow()).total_seconds()
        if wait <= 0:
            # Due by the clock but not claimable (held back by order, or just claimed by
            # nobody): give it a moment rather than spin.
            wait = 0.05
        if time.monotonic() + wait >= deadline:
            return False
        self.rt.stop.wait(wait)
        return True

    def pause(self, reason: str) -> None:
        """A channel-wide error (invariant 6): every enabled automation of this identity
        pauses with the reason, holding its messages until the owner resumes it."""
        for automation_id in self.session.scalars(
                select(Automation.id).where(Automation.status == ENABLED,
                                            of_identity(self.rt.identity_id))).all():
            if lifecycle.move(self.session, automation_id, "pause", reason):
                log.warning("automation %s paused: %s", automation_id, reason)
        self.session.commit()

    def notice(self, text: str | None) -> None:
        if text:
            log.info("automations: %s", text)

    def close(self, attempts: int, seconds: float) -> None:
        pass


def automation_slice(session: Session, runtime: Runtime) -> Slice:
    """One slice of this stream's due automation messages."""
    return Slice(session, runtime, AutomationRows(session, runtime))


def follow_settings(session: Session, rt: Runtime) -> None:
    """The maintenance tick's catch-up: this stream's automations whose revisions print a
    sender or postal address no longer in force (frozen before automations followed Settings,
    or before MAIL_FROM changed) get new ones, which their held and future messages take."""
    result = refreeze.follow_stale(session, default_from=rt.config["MAIL_FROM"],
                                   identity_id=rt.identity_id)
    if result.names:
        log.info("automations refrozen with the sender and postal address in force: %s",
                 ", ".join(result.names))


def run_evaluation(session: Session, rt: Runtime) -> entering.EvaluationResult:
    budget = float(rt.config.get("SLICE_SECONDS", SLICE_SECONDS))
    return entering.evaluate(session, budget_seconds=budget)


def evaluation_due(session: Session, now: datetime | None = None) -> bool:
    return bool(entering.due_campaigns(session, now))

