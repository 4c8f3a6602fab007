"""A batch of claimed rows in one provider request (Postmark's /email/batch, Resend's
/emails/batch), without weakening a guarantee:

- claim before send (invariant 4): the rows were claimed and committed by the slice first;
- the re-check (invariant 3): each person is asked again just before the request, at most
  one request's preparation (~a second at 500) before it leaves;
- pace the side effect (invariant 2): the pause is after each request, the unit the
  provider counts;
- outcomes by position: each row's result is read from its place in the answer, never by
  matching ids; every row not rejected was accepted;
- a crash exposes at most one batch (invariant 5): its rows are `sending` until the answer
  is recorded, so orphan repair makes them `unknown`, never resent automatically;
- a request that may have reached the provider and got no answer is retried with the same
  rows and the same Idempotency-Key where the provider honours one (Resend: the same key
  and payload return the first answer without sending again); otherwise its rows become
  `unknown`.
"""

from __future__ import annotations

import logging
import uuid

from broadside.campaigns.broadcasts import lifecycle
from broadside.delivery.transports import BatchTransport, DeliveryError, Outgoing, SendResult
from jobs.classify import classify
from jobs.rows import Prepared, Row
from jobs.turn import Turn

log = logging.getLogger("broadside.worker")

# Retries of a request that got no answer, with the same idempotency key (seconds to wait).
IDEMPOTENT_RETRIES = (1.0, 2.0, 4.0)


def idempotency_key(namespace: str, kind: str, first_id: int) -> str:
    """Unique per claimed batch and kept for its retries (≤ 256 characters)."""
    return f"broadside-{namespace}-{kind}{first_id}-{uuid.uuid4().hex}"[:256]


class BatchSending:
    """A provider batch: each claimed row re-checked and built, the rest in one request."""

    fields = True  # a JSON API takes each message's parts, no MIME made

    def __init__(self, turn: Turn, transport: BatchTransport) -> None:
        self.turn = turn
        self.transport = transport

    def batch_size(self, adaptive: int) -> int:
        """One full request per claim: the exposure to a crash is that one batch."""
        return self.transport.batch_limit

    def send(self, rows: list[Row], deadline: float) -> str | None:
        """Re-check and build each claimed row, send the rest in one request, record each
        outcome. Returns the reason to stop the slice, or None to go on."""
        turn, rt = self.turn, self.turn.rt
        outcomes, decide = turn.outcomes, turn.source.decide
        # The pace is waited out first, so the re-checks are as late as they can be.
        rt.pacer.settle()
        ready: list[Prepared] = []
        for index, row in enumerate(rows):
            decision = decide(row)
            if decision.stop is not None:
                outcomes.release(rows[index:], cancelled=(decision.stop == lifecycle.CANCELLED))
                outcomes.release([m.row for m in ready], cancelled=False)
                return "stopped"
            message = turn.message_of(row, decision)
            if message is not None:
                ready.append(message)
        if not ready:
            return None
        if not turn.hourly_room(deadline):
            outcomes.release([m.row for m in ready], cancelled=False)
            return "continue"
        items = [Outgoing(m.from_email, m.email, m.wire, m.fields) for m in ready]
        key = idempotency_key(rt.config["BROADSIDE_NAMESPACE"], turn.source.key_kind,
                              ready[0].delivery_id)
        turn.counted(len(ready))
        try:
            results = self._request(items, key)
        except DeliveryError as error:
            return self._stopped(outcomes.refused_all(ready, error))
        except Exception as error:  # unexpected: we cannot know whether it went out
            stop = None
            for message in ready:
                stop = outcomes.unexpected(message, error) or stop
            return self._stopped(stop)
        if len(results) != len(ready):  # a provider answering with another count: trust nothing
            mismatch = DeliveryError("response", None, f"the provider answered {len(results)} "
                                     f"results for {len(ready)} messages")
            return self._stopped(outcomes.refused_all(ready, mismatch))
        stop = None
        for message, result in zip(ready, results, strict=True):
            if isinstance(result, SendResult):
                outcomes.sent(message, result.code, result.reply, result.provider_id)
            else:
                stop = outcomes.refused(message, result) or stop
        return self._stopped(stop)

    def _stopped(self, stop: str | None) -> str | None:
        """A verdict that pauses: every row is recorded already; pause what they belong to."""
        if stop == "paused" or self.turn.outcomes.pause_reason:
            return self.turn.stop([], "paused")
        return stop

    def _request(self, items: list[Outgoing], key: str) -> list[SendResult | DeliveryError]:
        """The request, and its retries under the same key when no answer came and the
        provider honours idempotency keys."""
        rt = self.turn.rt
        waits = IDEMPOTENT_RETRIES if self.transport.idempotent else ()
        for attempt in range(len(waits) + 1):
            try:
                # The pace is waited before each request, the unit the provider counts.
                return self.transport.send_batch(items, key, pace=rt.pacer.wait)
            except DeliveryError as error:
                if attempt >= len(waits) or classify(error).kind != "ambiguous" or rt.stop.is_set():
                    raise
                log.warning("no answer to a batch of %d (%s); retrying with the same idempotency "
                            "key", len(items), error.reply)
                rt.stop.wait(waits[attempt])
        raise AssertionError("unreachable")
