"""What became of each claimed row in a slice, recorded together through its source's ledger.

Every outcome is a transition out of `sending` through the row source's `Ledger` (jobs.rows:
the deliveries', the automation messages' or the transactional messages' own, each guarded by
`WHERE status = 'sending'`): a row
that orphan repair or anyone else moved meanwhile is left alone, and nothing is
read-then-written (invariant 4). Outcomes are kept in a `Batch` and flushed in one
transaction per batch of sends, with their counters and events (invariant 9).

Errors are classified once (invariant 6, jobs.classify) and mapped to a step by the one
outcome policy, `jobs.classify.next_step`, that transactional mail shares: lost after the
body was sent -> `unknown`, never resent automatically (invariant 5); refused for this
address -> `failed`; transient -> back to `pending` with backoff, within the retry budget;
channel-wide -> back to `pending`, and the broadcast pauses with the reason once the rest of
the batch is released (a source that cannot pause, transactional mail, retries with backoff).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from broadside.audience.unsubscribe.refusals import count_full_mailbox, suppress_refused
from broadside.campaigns.broadcasts import ledger
from broadside.campaigns.broadcasts.ledger import ATTEMPTS_DELTA
from broadside.core.models import Subscriber
from broadside.core.timeutil import utcnow
from broadside.delivery.transports import DeliveryError
from jobs.classify import (
    Step,
    Verdict,
    backoff,
    channel_reason,
    classify,
    connection_reason,
    exhausted_reason,
    next_step,
    what_to_fix,
)
from jobs.rows import Ledger, Prepared, Row
from jobs.runtime import MAX_THROTTLES, Runtime

log = logging.getLogger("broadside.worker")
_SUBSCRIBERS = Subscriber.__table__

# Connection failures in a row (refused, reset, timed out) before the broadcast pauses.
MAX_CONNECTION_FAILURES = 5


@dataclass
class Outcome:
    target: str
    change: ledger.Change


@dataclass
class Batch:
    """The rows this slice claimed and what became of each, flushed together."""

    ledger: Ledger
    outcomes: list[Outcome] = field(default_factory=list)
    # delivery id -> subscriber id, for people sent to who had soft bounces (reset once sent)
    soft_bounced: dict[int, int] = field(default_factory=dict)
    # row id -> (subscriber id, code, reply, Message-ID): refused at RCPT in words that name
    # the address (jobs.classify `Verdict.bounce`), suppressed if the row's failure is recorded
    refused: dict[int, tuple[int, int, str, str]] = field(default_factory=dict)
    full: dict[int, tuple[int, int, str, str]] = field(default_factory=dict)  # 552: soft

    def add(
        self,
        target: str,
        delivery_id: int,
        subscriber_id: int | None,
        values: dict[str, Any] | None = None,
        detail: str = "",
        data: dict[str, Any] | None = None,
    ) -> None:
        self.outcomes.append(
            Outcome(target, ledger.Change(delivery_id, subscriber_id, values or {}, detail, data))
        )

    def flush(self, session: Session) -> None:
        """Record every outcome with an UPDATE guarded by status = 'sending', then commit.

        Lock order (broadside.campaigns.broadcasts.ledger): the deliveries' ledger takes the
        broadcast row (its counters) before the deliveries; the subscribers' soft-bounce reset
        comes last, with the suppression of the addresses a server refused (in the same
        transaction as their rows' failure, and only for rows that did move)."""
        now = utcnow()
        by_target: dict[str, list[ledger.Change]] = {}
        for outcome in self.outcomes:
            by_target.setdefault(outcome.target, []).append(outcome.change)
        moved: dict[str, list[int]] = {}
        for target, changes in by_target.items():
            moved[target] = self.ledger.transition(session, changes, source="sending",
                                                   target=target, now=now)
        delivered = [self.soft_bounced[d] for d in moved.get("sent", ()) if d in self.soft_bounced]
        if delivered:
            # A delivery that went through ends a run of soft bounces.
            session.connection().execute(
                update(_SUBSCRIBERS)
                .where(_SUBSCRIBERS.c.id.in_(delivered), _SUBSCRIBERS.c.soft_bounce_count > 0)
                .values(soft_bounce_count=0)
            )
        for row_id in moved.get("failed", ()):
            if row_id in self.refused:
                subscriber_id, code, reply, message_id = self.refused[row_id]
                suppress_refused(session, subscriber_id, code=code, reply=reply,
                                 message_id=message_id)
            elif row_id in self.full:
                subscriber_id, code, reply, message_id = self.full[row_id]
                count_full_mailbox(session, subscriber_id, code=code, reply=reply,
                                   message_id=message_id)
        session.commit()
        self.outcomes.clear()
        self.soft_bounced.clear()
        self.refused.clear()
        self.full.clear()


class Outcomes:
    """One slice's record of outcomes: the batch, and the reason to pause if one arose.

    The methods that record an SMTP result return the reason to stop the slice ("paused"),
    or None to go on."""

    def __init__(self, session: Session, runtime: Runtime, ledger: Ledger, *,
                 pausable: bool = True) -> None:
        self.session = session
        self.rt = runtime
        self.batch = Batch(ledger)
        self.pausable = pausable  # see jobs.rows.RowSource.pausable
        self.pause_reason: str | None = None

    def flush(self) -> None:
        self.batch.flush(self.session)

    # -------------------------------------------------------------- before any SMTP

    def skipped(self, row: Row, reason: str) -> None:
        """Skipped at send time (invariant 3): no SMTP, no pause."""
        self.batch.add("skipped", row.id, row.subscriber_id, {"reason": reason}, detail=reason)

    def unbuildable(self, row: Row, reason: str) -> None:
        """Their values cannot make a message: just their row fails."""
        self.batch.add(
            "failed", row.id, row.subscriber_id, {"reason": reason, "error_class": "recipient"}, detail=reason
        )
        log.warning("row %s failed before sending: %s", row.id, reason)

    def release(self, rows: Iterable[Row], *, cancelled: bool) -> None:
        """Claimed but never attempted: back to pending (or skipped when cancelled)."""
        for row in rows:
            if cancelled:
                self.batch.add(
                    "skipped", row.id, row.subscriber_id, {"reason": "cancelled"}, detail="cancelled"
                )
            else:
                self.batch.add(
                    "pending",
                    row.id,
                    row.subscriber_id,
                    {ATTEMPTS_DELTA: -1},
                    detail="released, not attempted",
                )

    # -------------------------------------------------------------- the server's verdict

    def sent(self, message: Prepared, code: int, reply: str, provider_id: str | None = None) -> None:
        self.rt.connection_failures = 0
        self.rt.throttles = 0
        self.batch.add(
            "sent",
            message.delivery_id,
            message.subscriber_id,
            {
                "sent_at": utcnow(),
                "smtp_code": code,
                "reason": reply[:500],
                "message_id": message.message_id,
                "provider_message_id": provider_id[:255] if provider_id else None,
                "error_class": None,
            },
            detail=f"{code} {reply}"[:500],
        )
        if message.soft_bounces and message.subscriber_id is not None:
            self.batch.soft_bounced[message.delivery_id] = message.subscriber_id

    def refused(self, message: Prepared, error: DeliveryError) -> str | None:
        """The server's refusal or a lost connection, classified once (invariant 6)."""
        return self.error(message, classify(error))

    def refused_all(self, messages: list[Prepared], error: DeliveryError) -> str | None:
        """A whole batch request failed: one verdict for all its rows, counted once (one
        request failed, not a hundred connections). A pause puts every row back."""
        verdict = classify(error)
        if verdict.kind == "recipient":
            # A code that names one recipient, given for the whole request (a bad From, an
            # invalid request): it is about the channel, never a reason to fail everyone.
            verdict = replace(verdict, kind="channel")
        first, rest = messages[0], messages[1:]
        stop = self.error(first, verdict)
        failures, throttles = self.rt.connection_failures, self.rt.throttles
        for message in rest:
            if stop:
                self.batch.add("pending", message.delivery_id, message.subscriber_id,
                               {ATTEMPTS_DELTA: -1}, detail="released, not attempted")
                continue
            self.error(message, verdict)
            self.rt.connection_failures, self.rt.throttles = failures, throttles
        return stop

    def unexpected(self, message: Prepared, error: Exception) -> str | None:
        """Not a DeliveryError: we cannot know whether it went out, so `unknown`. The error
        itself goes to the log; the owner reads what it means."""
        log.exception("unexpected error while sending")
        return self.error(message, Verdict(
            "ambiguous", None, "Broadside met an unexpected error while handing this message "
            "over, so it may or may not have gone out (the worker's log has the details)",
            ours=True))

    def error(self, message: Prepared, verdict: Verdict) -> str | None:
        rt = self.rt
        delivery_id, subscriber_id = message.delivery_id, message.subscriber_id
        values: dict[str, Any] = {
            "smtp_code": verdict.code,
            "reason": verdict.said[:500],
            "message_id": message.message_id,
            "error_class": verdict.kind,
        }
        if verdict.kind == "recipient":
            rt.connection_failures = 0
        elif verdict.kind == "transient" and verdict.network:
            rt.connection_failures += 1
        step, attempts = next_step(
            verdict,
            lambda: self._attempts_of(delivery_id),
            pausable=self.pausable,
            channel_down=verdict.kind == "transient"
            and verdict.network
            and rt.connection_failures >= MAX_CONNECTION_FAILURES,
        )
        if step is Step.THROTTLE:
            # Not an attempt against this person: back to pending as if never claimed, and
            # the stream holds its next request (Slice waits it out, stop-aware).
            wait = rt.throttled(verdict.retry_after)
            if rt.throttles < MAX_THROTTLES:
                self.batch.add("pending", delivery_id, subscriber_id,
                               {ATTEMPTS_DELTA: -1, "reason": verdict.said[:500]},
                               detail=f"throttled by the provider, waiting {wait:.0f} s: "
                                      f"{verdict.said}"[:500])
                return None
            reason = (f"The provider kept asking us to slow down ({rt.throttles} times in a row; "
                      f"{verdict.said}). Check the identity's sending limits at the provider "
                      "and its pace, then press Resume.")
            values["next_attempt_at"] = None
            self.batch.add("pending", delivery_id, subscriber_id, values, detail=reason)
            self.pause_reason = reason
            return "paused"
        if step is Step.UNKNOWN:
            log.warning("delivery %s unknown: %s", delivery_id, verdict.summary)
            self.batch.add("unknown", delivery_id, subscriber_id, values, detail=verdict.said)
            return None
        if step is Step.FAILED:
            log.info("delivery %s failed: %s", delivery_id, verdict.summary)
            self.batch.add("failed", delivery_id, subscriber_id, values, detail=verdict.said)
            if subscriber_id is not None and verdict.code is not None:
                said = (subscriber_id, verdict.code, verdict.reply, message.message_id)
                if verdict.bounce:
                    self.batch.refused[delivery_id] = said
                elif verdict.soft_bounce:
                    self.batch.full[delivery_id] = said
            return None
        if step is Step.EXHAUSTED:
            values["reason"] = exhausted_reason(verdict, attempts)[:500]
            self.batch.add("failed", delivery_id, subscriber_id, values, detail=values["reason"])
            return None
        if step is Step.RETRY:
            base = float(rt.config.get("RETRY_BASE_SECONDS", 30))
            values["next_attempt_at"] = utcnow() + backoff(attempts or 0, base)
            self.batch.add(
                "pending", delivery_id, subscriber_id, values, detail=f"will retry: {verdict.said}"
            )
            return None
        where = what_to_fix(rt.identity_name, rt.identity_id)
        reason = (
            connection_reason(rt.connection_failures, verdict, where)
            if verdict.kind == "transient"
            else channel_reason(verdict, where)
        )
        # Not accepted (the failure came before the end of DATA): the row waits for resume.
        # The broadcast pauses once the rest of the batch is released too (see jobs.turn `Turn.stop`).
        values["next_attempt_at"] = None
        self.batch.add("pending", delivery_id, subscriber_id, values, detail=reason)
        self.pause_reason = reason
        return "paused"

    def _attempts_of(self, delivery_id: int) -> int:
        return self.batch.ledger.attempts_of(self.session, delivery_id)
