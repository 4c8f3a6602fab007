"""One slice of a broadcast: send for a few seconds from the rows still pending, then hand over.

Invariant 7 (resume, never restart): each slice continues from the rows still `pending` and
enqueues its continuation, so a deploy, a SIGTERM or a SIGKILL loses at most the rows in
flight, and transactional mail waits at most one slice.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import formataddr
from typing import Any, NamedTuple

from redis.exceptions import RedisError
from sqlalchemy import and_, bindparam, exists, func, select, update
from sqlalchemy.orm import Session

from broadside.broadcasts import ledger
from broadside.broadcasts.ledger import ATTEMPTS_DELTA
from broadside.models import Broadcast, Delivery, Revision, Subscriber, Subscription
from broadside.rendering import MergeError, compiled_revision, message_bytes
from broadside.timeutil import utcnow
from broadside.transports import DeliveryError
from broadside.unsubscribe.tokens import token_serializer, unsubscribe_url
from broadside.waits import add_wait_seconds
from jobs.classify import MAX_ATTEMPTS, Verdict, backoff, classify
from jobs.runtime import Runtime

log = logging.getLogger("broadside.worker")
_SUBSCRIBERS = Subscriber.__table__

SLICE_SECONDS = 3.0
SLICE_MAX_SENDS = 1000
# Rows claimed (and so exposed to a crash) at once: about EXPOSURE_SECONDS of sends at the
# rate the worker is achieving, at most MAX_BATCH. At the default pace (200 ms), or with a
# slow server, that is one row: a crash loses at most the row in flight. Only when sends are
# fast are claims and outcomes batched, to keep up with the server (each batch costs a few
# fixed statements and commits).
EXPOSURE_SECONDS = 0.2
MAX_BATCH = 100
FIRST_BATCH = 20  # before any rate has been seen, at SEND_DELAY_MS=0
# Connection failures in a row (refused, reset, timed out) before the broadcast pauses.
MAX_CONNECTION_FAILURES = 5


@dataclass(frozen=True)
class Row:
    """A claimed delivery."""

    id: int
    subscriber_id: int | None


@dataclass
class Prepared:
    """One person's message, ready for the wire."""

    delivery_id: int
    subscriber_id: int | None
    email: str
    message_id: str
    wire: bytes = b""
    soft_bounces: int = 0  # their run of soft bounces when re-checked


@dataclass
class Decision:
    """What the send-time re-check decided for one claimed row."""

    stop: str | None = None  # the broadcast left `sending`: its status
    skip: str | None = None  # not to be sent: the reason
    fail: str | None = None  # their values cannot make a message: the reason
    message: Prepared | None = None


@dataclass
class SliceResult:
    outcome: str  # continue | finished | stopped | paused | lost-lease | nothing
    attempts: int = 0
    skipped: int = 0


@dataclass
class Outcome:
    target: str
    change: ledger.Change


@dataclass
class Batch:
    """The rows this slice claimed and what became of each, flushed together."""

    broadcast_id: int
    outcomes: list[Outcome] = field(default_factory=list)
    # delivery id -> subscriber id, for people sent to who had soft bounces (reset once sent)
    soft_bounced: dict[int, int] = field(default_factory=dict)

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
        """Record every outcome with an UPDATE guarded by status = 'sending', then commit."""
        now = utcnow()
        by_target: dict[str, list[ledger.Change]] = {}
        for outcome in self.outcomes:
            by_target.setdefault(outcome.target, []).append(outcome.change)
        moved: dict[str, list[int]] = {}
        for target, changes in by_target.items():
            moved[target] = ledger.transition(
                session, self.broadcast_id, changes, source="sending", target=target, now=now
            )
        delivered = [self.soft_bounced[d] for d in moved.get("sent", ()) if d in self.soft_bounced]
        if delivered:
            # A delivery that went through ends a run of soft bounces.
            session.connection().execute(
                update(_SUBSCRIBERS)
                .where(_SUBSCRIBERS.c.id.in_(delivered), _SUBSCRIBERS.c.soft_bounce_count > 0)
                .values(soft_bounce_count=0)
            )
        session.commit()
        self.outcomes.clear()
        self.soft_bounced.clear()


def batch_size_for(rows_per_second: float) -> int:
    """Rows to claim at once: about EXPOSURE_SECONDS of work at this rate."""
    return max(1, min(MAX_BATCH, int(rows_per_second * EXPOSURE_SECONDS)))


def pace_limit(delay_seconds: float) -> float:
    """The fastest the pace allows, in sends per second."""
    return 1.0 / delay_seconds if delay_seconds > 0 else float("inf")


def message_id_for(delivery_id: int, broadcast_id: int, from_email: str) -> str:
    """Stable per delivery: a manual resend carries the same Message-ID."""
    domain = from_email.rpartition("@")[2] or "localhost"
    return f"<broadside.d{delivery_id}.b{broadcast_id}@{domain}>"


_RECIPIENT_STATE = (
    select(
        Broadcast.status,
        Subscriber.email,
        Subscriber.name,
        Subscriber.attributes,
        Subscriber.suppression,
        Subscription.status,
        Subscriber.soft_bounce_count,
    )
    .select_from(Broadcast)
    .outerjoin(Subscriber, Subscriber.id == bindparam("subscriber_id"))
    .outerjoin(
        Subscription,
        and_(Subscription.subscriber_id == Subscriber.id, Subscription.list_id == bindparam("list_id")),
    )
    .where(Broadcast.id == bindparam("broadcast_id"))
)


_DUE_ROWS = (
    select(Delivery.id, Delivery.subscriber_id)
    .where(
        Delivery.broadcast_id == bindparam("broadcast_id"),
        Delivery.status == "pending",
        (Delivery.next_attempt_at.is_(None)) | (Delivery.next_attempt_at <= bindparam("now")),
    )
    .order_by(Delivery.id)
    .limit(bindparam("limit"))
)


class RecipientState(NamedTuple):
    broadcast_status: str
    email: str | None  # None: the subscriber was erased
    name: str | None
    attributes: dict | None
    suppression: str | None
    subscription: str | None  # None: no longer on the list
    soft_bounces: int | None


_compiled_state: dict[str, tuple[str, tuple[str, ...] | None]] = {}


def recipient_state(
    session: Session, broadcast_id: int, list_id: int | None, subscriber_id: int | None
) -> RecipientState:
    """Invariant 3, ask again at send time: one indexed query for the broadcast's state and
    this person's subscription and suppression, read just before their send.

    It runs before every send, so the statement is compiled once per dialect and run on the
    driver's own cursor: SQLAlchemy's per-execution work (result objects, type processing)
    cost more than the query itself (bench/bookkeeping_costs.py: ~80 against ~15 µs on SQLite).
    It runs in the session's transaction, on the session's connection."""
    connection = session.connection()
    compiled = _compiled_state.get(connection.dialect.name)
    if compiled is None:
        statement = _RECIPIENT_STATE.compile(dialect=connection.dialect)
        compiled = (str(statement), statement.positiontup if statement.positional else None)
        _compiled_state[connection.dialect.name] = compiled
    sql, order = compiled
    params = {"broadcast_id": broadcast_id, "list_id": list_id, "subscriber_id": subscriber_id}
    cursor = connection.connection.cursor()
    try:
        cursor.execute(sql, tuple(params[name] for name in order) if order is not None else params)
        row = cursor.fetchone()
    finally:
        cursor.close()
    if row is None:
        raise LookupError(f"broadcast {broadcast_id} is gone")
    state = RecipientState(*row)
    if isinstance(state.attributes, str):  # SQLite keeps JSON as text
        state = state._replace(attributes=json.loads(state.attributes))
    return state


def skip_reason(email: str | None, suppression: str | None, subscription: str | None) -> str | None:
    if email is None:
        return "subscriber erased"
    if suppression is not None:
        return f"suppressed: {suppression}"
    if subscription is None:
        return "no longer on the list"
    if subscription != "active":
        return subscription  # unsubscribed, or unconfirmed again
    return None


def _start(session: Session, broadcast_id: int) -> Broadcast | None:
    now = utcnow()
    started = session.execute(
        update(Broadcast)
        .where(Broadcast.id == broadcast_id, Broadcast.status == "queued")
        .values(status="sending", started_at=func.coalesce(Broadcast.started_at, now), updated_at=now)
    ).rowcount
    if started:
        ledger.broadcast_event(session, broadcast_id, "started")
        log.info("broadcast started")
    session.commit()
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is not None:
        session.refresh(broadcast)
    return broadcast


def finish_if_done(session: Session, broadcast_id: int) -> bool:
    """sending -> sent, only when no row is pending or in flight (a guarded UPDATE)."""
    now = utcnow()
    done = session.execute(
        update(Broadcast)
        .where(
            Broadcast.id == broadcast_id,
            Broadcast.status == "sending",
            ~exists().where(
                Delivery.broadcast_id == broadcast_id, Delivery.status.in_(("pending", "sending"))
            ),
        )
        .values(status="sent", finished_at=now, notice=None, updated_at=now)
    ).rowcount
    if done:
        ledger.broadcast_event(session, broadcast_id, "finished")
        log.info("broadcast finished")
    session.commit()
    return bool(done)


def pause(session: Session, broadcast_id: int, reason: str) -> None:
    changed = session.execute(
        update(Broadcast)
        .where(Broadcast.id == broadcast_id, Broadcast.status.in_(("queued", "sending")))
        .values(status="paused", pause_reason=reason, notice=None, updated_at=utcnow())
    ).rowcount
    if changed:
        ledger.broadcast_event(session, broadcast_id, "paused", reason)
        log.warning("broadcast paused: %s", reason)
    session.commit()


def _set_notice(session: Session, broadcast_id: int, notice: str | None) -> None:
    session.execute(update(Broadcast).where(Broadcast.id == broadcast_id).values(notice=notice))
    session.commit()


class Slice:
    def __init__(self, session: Session, runtime: Runtime, broadcast_id: int) -> None:
        self.session = session
        self.rt = runtime
        self.broadcast_id = broadcast_id
        self.batch = Batch(broadcast_id)
        self.attempts = 0
        self.skipped = 0
        # The rate the last batches achieved (kept by the runtime from slice to slice), never
        # above what the pace allows.
        rate = min(runtime.rows_per_second or FIRST_BATCH / EXPOSURE_SECONDS, pace_limit(runtime.pacer.delay))
        self.batch_size = batch_size_for(rate)
        self.decide_seconds = 0.0  # how long a re-check and build take (a moving average)
        self.pause_reason: str | None = None
        self.waited_for_cap = 0  # times this slice waited for the hourly limit

    # -------------------------------------------------------------- the loop

    def run(self) -> SliceResult:
        broadcast = _start(self.session, self.broadcast_id)
        if broadcast is None or broadcast.status != "sending":
            return SliceResult("nothing")
        revision = self.session.scalar(select(Revision).where(Revision.broadcast_id == broadcast.id))
        if revision is None:
            pause(
                self.session,
                broadcast.id,
                "This broadcast has no frozen content; duplicate it and send the copy.",
            )
            return SliceResult("paused")

        self.list_id = broadcast.list_id
        self.revision = revision
        # Compiled once per worker process (the revision never changes), rendered per recipient.
        self.compiled = compiled_revision(revision.subject, revision.html_template, revision.text_template)
        self.from_header = formataddr((revision.from_name, revision.from_email))
        self.tokens = token_serializer(self.rt.config["SECRET_KEY"])  # one per slice
        started = time.monotonic()
        deadline = started + float(self.rt.config.get("SLICE_SECONDS", SLICE_SECONDS))
        try:
            outcome = self._loop(deadline)
        finally:
            if self.batch.outcomes:
                self.batch.flush(self.session)
        elapsed = max(time.monotonic() - started, 1e-6)
        if self.attempts:
            self.session.execute(
                update(Broadcast)
                .where(Broadcast.id == self.broadcast_id)
                .values(send_rate=round(self.attempts / elapsed, 2))
            )
            self.session.commit()
        log.info(
            "slice done: %s, %d sent or attempted, %d skipped in %.2fs",
            outcome,
            self.attempts,
            self.skipped,
            elapsed,
        )
        return SliceResult(outcome, self.attempts, self.skipped)

    def _loop(self, deadline: float) -> str:
        while True:
            if self.rt.stop.is_set() or time.monotonic() >= deadline or self.attempts >= SLICE_MAX_SENDS:
                return "continue"
            # Invariant 1: the lease is re-checked before every claim. A claim covers at most
            # ~0.2 s of sends, so a worker that lost its lease stops within that.
            if not self._lease_ok():
                return "lost-lease"
            if not self._hourly_room(deadline):
                return "continue"
            rows = self._due_rows()
            if not rows:
                if finish_if_done(self.session, self.broadcast_id):
                    return "finished"
                if not self._wait_for_due(deadline):
                    return "continue"
                continue
            # Invariant 4, claim before send: pending -> sending, committed before any SMTP.
            claimed = set(
                ledger.claim(self.session, self.broadcast_id, [(r.id, r.subscriber_id) for r in rows])
            )
            self.session.commit()
            began = time.monotonic()
            stop = self._send_claimed([r for r in rows if r.id in claimed], deadline)
            self.batch.flush(self.session)
            if stop:
                return stop
            self._adapt_batch(len(claimed), time.monotonic() - began)

    def _due_rows(self) -> list[Row]:
        return [
            Row(*r)
            for r in self.session.connection().execute(
                _DUE_ROWS, {"broadcast_id": self.broadcast_id, "now": utcnow(), "limit": self.batch_size}
            )
        ]

    def _wait_for_due(self, deadline: float) -> bool:
        """Rows wait for their retry time: sleep until the first is due, within this slice."""
        earliest = self.session.scalar(
            select(func.min(Delivery.next_attempt_at)).where(
                Delivery.broadcast_id == self.broadcast_id, Delivery.status == "pending"
            )
        )
        self.session.commit()
        if earliest is None:
            return False  # nothing pending at all; rows in flight belong to a crashed run
        wait = (earliest - utcnow()).total_seconds()
        if time.monotonic() + wait >= deadline:
            self._sleep(max(0.0, deadline - time.monotonic()))
            return False
        self._sleep(max(wait, 0.0))
        return True

    def _sleep(self, seconds: float) -> None:
        self.rt.stop.wait(seconds)

    def _adapt_batch(self, rows: int, seconds: float) -> None:
        """Size the next claim to about EXPOSURE_SECONDS at the rate this batch achieved
        (sends and skips, bookkeeping included), never above what the pace allows."""
        if rows <= 0 or seconds <= 0:
            return
        rate = min(rows / seconds, pace_limit(self.rt.pacer.delay))
        self.rt.rows_per_second = rate
        self.batch_size = batch_size_for(rate)

    def _lease_ok(self) -> bool:
        try:
            return self.rt.lease.still_mine()
        except RedisError:
            return False

    def _hourly_room(self, deadline: float) -> bool:
        cap = self.rt.hourly
        if cap.limit <= 0:
            return True
        try:
            free_at = cap.free_at()
        except RedisError:
            return True
        if free_at is None:
            return True
        when = datetime.fromtimestamp(free_at, UTC).strftime("%H:%M UTC")
        _set_notice(
            self.session,
            self.broadcast_id,
            f"Waiting for the hourly limit ({cap.limit} per hour): sending resumes at {when}.",
        )
        waited_from = time.monotonic()
        self.waited_for_cap += 1
        self._sleep(max(0.0, min(free_at - time.time(), deadline - time.monotonic())))
        try:  # a running total in Redis of the time spent waiting for the cap, for /metrics

            add_wait_seconds(
                cap.redis, self.rt.config["BROADSIDE_NAMESPACE"], "hourly", time.monotonic() - waited_from
            )
        except RedisError:
            pass
        if cap.free_at() is None:
            _set_notice(self.session, self.broadcast_id, None)
            return True
        return False

    # -------------------------------------------------------------- one batch

    def _send_claimed(self, rows: list[Row], deadline: float) -> str | None:
        """Each person in turn: re-check, build, send, read the server's verdict.

        When the pace leaves no wait before the next send (SEND_DELAY_MS=0, or a delay
        already spent), the next person is re-checked and their message built while the server
        is still taking the current one (after its final dot, before its reply): their MAIL
        FROM follows that reply at once, so the check is still the last thing before their
        send, and the server's work overlaps ours. Otherwise the pace is waited out first and
        the re-check comes after the wait.
        """
        in_flight: Prepared | None = None
        for index, row in enumerate(rows):
            decision = None
            if in_flight is not None:
                if self.rt.pacer.ready():
                    try:
                        decision = self._decide(row)
                    except Exception:
                        self._finish(in_flight)  # its verdict is on the way: record it first
                        raise
                stop = self._finish(in_flight)
                in_flight = None
                if stop:
                    return self._stop(rows[index:], stop)
            if decision is None:
                # The pace is waited out first, so the re-check is as late as it can be: it
                # starts just early enough to be done (with the message built) when the pace
                # allows the send; the transport's own wait keeps the floor exact.
                self.rt.pacer.settle(lead=2 * self.decide_seconds)
                began = self.rt.pacer.clock()
                decision = self._decide(row)
                took = self.rt.pacer.clock() - began
                self.decide_seconds = (
                    took if not self.decide_seconds else 0.8 * self.decide_seconds + 0.2 * took
                )
            if decision.stop is not None:
                self._release(rows[index:], cancelled=(decision.stop == "cancelled"))
                return "stopped"
            if decision.skip is not None:
                # Skipped at send time: no SMTP, no pause.
                self.batch.add(
                    "skipped", row.id, row.subscriber_id, {"reason": decision.skip}, detail=decision.skip
                )
                self.skipped += 1
                continue
            waited = self.waited_for_cap
            if not self._hourly_room(deadline):
                self._release(rows[index:], cancelled=False)
                return "continue"
            if self.waited_for_cap > waited:
                decision = self._decide(row)  # the hourly limit made us wait: ask again
                if decision.stop is not None or decision.skip is not None:
                    self._release(rows[index:], cancelled=False)
                    return "continue"
            if decision.fail is not None:
                self.batch.add(
                    "failed",
                    row.id,
                    row.subscriber_id,
                    {"reason": decision.fail, "error_class": "recipient"},
                    detail=decision.fail,
                )
                log.warning("delivery %s failed before sending: %s", row.id, decision.fail)
                continue
            assert decision.message is not None
            on_the_wire, stop = self._start(decision.message)
            if stop:
                return self._stop(rows[index + 1 :], stop)
            if on_the_wire:
                in_flight = decision.message
        if in_flight is not None:
            stop = self._finish(in_flight)
            if stop:
                return self._stop([], stop)
        return None

    def _decide(self, row: Row) -> Decision:
        """Invariant 3: the send-time re-check of this row, and this person's message built
        from the values it read."""
        state = recipient_state(self.session, self.broadcast_id, self.list_id, row.subscriber_id)
        if state.broadcast_status != "sending":
            return Decision(stop=state.broadcast_status)
        reason = skip_reason(state.email, state.suppression, state.subscription)
        if reason is not None:
            return Decision(skip=reason)
        decision = self._prepare(row, state.email, state.name or "", state.attributes or {})
        if decision.message is not None:
            decision.message.soft_bounces = state.soft_bounces or 0
        return decision

    def _stop(self, unattempted: list[Row], stop: str) -> str:
        self._release(unattempted, cancelled=False)
        if self.pause_reason:
            # Every claimed row is back to pending before the owner sees "paused".
            self.batch.flush(self.session)
            pause(self.session, self.broadcast_id, self.pause_reason)
        return stop

    def _release(self, rows: list[Row], *, cancelled: bool) -> None:
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

    def _prepare(self, row: Row, email: str, name: str, attributes: dict) -> Decision:
        """This person's message, ready for the wire; or why their values cannot make one
        (a merge field that breaks on them, an address that cannot go in a header), which
        fails just their row."""

        token = self.tokens.dumps([row.subscriber_id or 0, self.list_id or 0, self.broadcast_id])
        link = unsubscribe_url(token, self.rt.config["BASE_URL"])
        message_id = message_id_for(row.id, self.broadcast_id, self.revision.from_email)
        try:
            rendered = self.compiled.render(
                email=email, name=name, attributes=attributes, unsubscribe_url=link
            )
            payload = message_bytes(
                rendered,
                from_addr=self.from_header,
                to_addr=email,
                message_id=message_id,
                headers={
                    "List-Unsubscribe": f"<{link}>",
                    "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
                },
            )
            wire = self.rt.transport.wire(payload)
        except MergeError as error:
            return Decision(fail=f"could not fill in the merge fields: {error.message}"[:500])
        except Exception as error:  # noqa: BLE001 - one person's message, not the whole send
            return Decision(
                fail=f"could not build this person's message ({error.__class__.__name__}: {error})"[:500]
            )
        return Decision(message=Prepared(row.id, row.subscriber_id, email, message_id, wire))

    def _start(self, message: Prepared) -> tuple[bool, str | None]:
        """Pace, then the mail transaction up to the end of DATA. Returns whether the message
        is on the wire awaiting the server's verdict (read by `_finish`), and the reason to
        stop, if any; a refusal before that is recorded here."""
        rt = self.rt
        self.attempts += 1
        try:
            rt.hourly.record()
        except RedisError:
            pass
        try:
            # Invariant 2: pace the side effect (inside the transport, right before MAIL FROM);
            # only real attempts wait, skipped recipients never do.
            rt.transport.start(self.revision.from_email, message.email, message.wire, pace=rt.pacer.wait)
        except DeliveryError as error:
            verdict = classify(error)
            return False, self._failed(
                message.delivery_id, message.subscriber_id, verdict, message.message_id
            )
        except Exception as error:  # noqa: BLE001 - unexpected: we cannot know if it went out
            return False, self._unexpected(message, error)
        return True, None

    def _finish(self, message: Prepared) -> str | None:
        rt = self.rt
        try:
            result = rt.transport.finish()
        except DeliveryError as error:
            return self._failed(
                message.delivery_id, message.subscriber_id, classify(error), message.message_id
            )
        except Exception as error:  # noqa: BLE001 - unexpected: we cannot know if it went out
            return self._unexpected(message, error)
        rt.connection_failures = 0
        self.batch.add(
            "sent",
            message.delivery_id,
            message.subscriber_id,
            {
                "sent_at": utcnow(),
                "smtp_code": result.code,
                "reason": result.reply[:500],
                "message_id": message.message_id,
                "error_class": None,
            },
            detail=f"{result.code} {result.reply}"[:500],
        )
        if message.soft_bounces and message.subscriber_id is not None:
            self.batch.soft_bounced[message.delivery_id] = message.subscriber_id
        return None

    def _unexpected(self, message: Prepared, error: Exception) -> str | None:
        log.exception("unexpected error while sending")
        verdict = Verdict("ambiguous", None, f"unexpected error: {error!r}")
        return self._failed(message.delivery_id, message.subscriber_id, verdict, message.message_id)

    def _failed(
        self, delivery_id: int, subscriber_id: int | None, verdict: Verdict, message_id: str
    ) -> str | None:
        rt = self.rt
        values = {
            "smtp_code": verdict.code,
            "reason": verdict.summary[:500],
            "message_id": message_id,
            "error_class": verdict.kind,
        }
        if verdict.kind == "ambiguous":
            log.warning("delivery %s unknown: %s", delivery_id, verdict.summary)
            self.batch.add(
                "unknown",
                delivery_id,
                subscriber_id,
                values,
                detail=f"connection lost after the message was sent: {verdict.summary}",
            )
            return None
        if verdict.kind == "recipient":
            rt.connection_failures = 0
            log.info("delivery %s failed: %s", delivery_id, verdict.summary)
            self.batch.add("failed", delivery_id, subscriber_id, values, detail=verdict.summary)
            return None
        if verdict.kind == "transient":
            if verdict.network:
                rt.connection_failures += 1
                if rt.connection_failures >= MAX_CONNECTION_FAILURES:
                    self._pause_for_channel(
                        delivery_id,
                        subscriber_id,
                        values,
                        f"The mail server could not be reached {rt.connection_failures} times in a "
                        f"row ({verdict.summary}). Check SMTP_URL and that the server is up, then "
                        f"press Resume.",
                    )
                    return "paused"
            attempts = self._attempts_of(delivery_id)
            if attempts >= MAX_ATTEMPTS:
                values["reason"] = f"retry budget exhausted after {attempts} attempts: {verdict.summary}"[
                    :500
                ]
                self.batch.add("failed", delivery_id, subscriber_id, values, detail=values["reason"])
                return None
            base = float(rt.config.get("RETRY_BASE_SECONDS", 30))
            values["next_attempt_at"] = utcnow() + backoff(attempts, base)
            self.batch.add(
                "pending", delivery_id, subscriber_id, values, detail=f"will retry: {verdict.summary}"
            )
            return None
        self._pause_for_channel(delivery_id, subscriber_id, values, channel_reason(verdict))
        return "paused"

    def _pause_for_channel(
        self, delivery_id: int, subscriber_id: int | None, values: dict[str, Any], reason: str
    ) -> None:
        # Not accepted (the failure came before the end of DATA): the row waits for resume.
        # The broadcast pauses once the rest of the batch is released too (see _send_claimed).
        values = {**values, "next_attempt_at": None}
        self.batch.add("pending", delivery_id, subscriber_id, values, detail=reason)
        self.pause_reason = reason

    def _attempts_of(self, delivery_id: int) -> int:
        return int(self.session.scalar(select(Delivery.attempts).where(Delivery.id == delivery_id)) or 0)


def channel_reason(verdict: Verdict) -> str:
    """Words a non-engineer can act on."""
    code = verdict.code
    if code in (530, 534, 535, 538):
        return (
            f"The mail server refused our login ({verdict.summary}). Check the user name and "
            "password in SMTP_URL, restart the worker, then press Resume."
        )
    if code is None and "TLS" in verdict.reply:
        return (
            f"A secure connection to the mail server failed ({verdict.summary}). "
            "Check SMTP_URL, then press Resume."
        )
    return (
        f"The mail server refused this broadcast ({verdict.summary}). Nothing more will be "
        "sent until you fix the cause (often the sender address or the account) and press Resume."
    )
