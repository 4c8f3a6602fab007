"""Sending a claimed batch over SMTP that pipelines, each next envelope riding behind the
previous body (RFC 2920 3.1; the transport's side is broadside.delivery.smtp).

At full speed (no pace to keep, no hourly limit, no hold) on a live connection to a server
that pipelines, the next person is re-checked and their message built while the server takes
the body on the wire, and *before* the next body is written, so their MAIL/RCPT/DATA go out in
the same write as that body. The server answers the body and the envelope together: per
message, one round trip fewer on the wire's critical path. Otherwise a batch goes one by one
(jobs.one_by_one), decided batch by batch.

Invariant 3: a person's re-check is still the last read before their MAIL FROM, which goes out
in the write that follows it. Nothing is written once a verdict or a re-check says stop: an
envelope already riding is abandoned (the connection dropped before any dot, so nothing of it
is delivered) and its row released, not attempted, as is every message decided but not yet
written. Invariant 4 is unchanged: every row here was claimed and committed before the batch.
"""

from __future__ import annotations

from broadside.campaigns.broadcasts import lifecycle
from broadside.delivery.transports import DeliveryError, FollowingTransport
from jobs.one_by_one import OneByOneSending
from jobs.rows import Prepared, Row
from jobs.turn import Turn


class RidingSending:
    fields = False

    def __init__(self, turn: Turn, transport: FollowingTransport) -> None:
        self.turn = turn
        self.transport = transport
        self.one_by_one = OneByOneSending(turn, transport)

    def batch_size(self, adaptive: int) -> int:
        return adaptive

    def send(self, rows: list[Row], deadline: float) -> str | None:
        if self._may_ride():
            return self._send_riding(rows)
        return self.one_by_one.send(rows, deadline)

    def _may_ride(self) -> bool:
        """Full speed only (no pace to keep, no account ceiling, no hourly limit, no hold), on
        a server that pipelines (or is not yet known not to)."""
        pacer = self.turn.rt.pacer
        return (pacer.delay <= 0 and not pacer.limited and self.turn.straight_on()
                and self.transport.follows())

    def _send_riding(self, rows: list[Row]) -> str | None:
        turn, transport = self.turn, self.transport
        outcomes = turn.outcomes
        in_flight, turn.pending = turn.pending, None  # body written, verdict unread
        riding: tuple[Prepared, Row] | None = None  # its envelope behind in_flight's body
        ahead: list[tuple[Prepared, Row]] = []  # decided, nothing written yet
        index = 0
        halt: str | None = None  # a re-check saw what the rows belong to leave `sending`

        def unwritten() -> list[Row]:
            return [r for _, r in ([riding] if riding else []) + ahead] + rows[index:]

        while True:
            # The next people's re-checks and messages, while the server works: one to ride
            # behind the body about to be written, two when nothing rides yet (one to start,
            # one behind it).
            while halt is None and index < len(rows) and len(ahead) < (1 if riding else 2):
                row = rows[index]
                try:
                    decision = turn.source.decide(row)
                except Exception:
                    self._let_go(in_flight, riding)
                    outcomes.release([r for _, r in ahead], cancelled=False)
                    raise
                if decision.stop is not None:
                    halt = decision.stop
                    break
                index += 1
                message = turn.message_of(row, decision)
                if message is not None:
                    ahead.append((message, row))
            stop = turn.finish(in_flight) if in_flight is not None else None
            in_flight = None
            if stop or halt is not None or not turn.straight_on():
                # Nothing more is written: what rides is abandoned, the rest released.
                if riding is not None:
                    transport.abandon()
                left = unwritten()
                if stop:
                    return turn.stop(left, stop)
                if halt is not None:
                    outcomes.release(left, cancelled=(halt == lifecycle.CANCELLED))
                    return "stopped"
                outcomes.release(left, cancelled=False)  # the loop waits out the hold
                return None
            # This turn's message: the one riding (its replies come now), else the first ahead.
            current, rides = riding, riding is not None
            riding = None
            if current is not None and not transport.following:
                outcomes.release([current[1]], cancelled=False)  # its connection went: not sent
                current, rides = None, False
            if current is None:
                if not ahead:
                    if index < len(rows):
                        continue  # more people to re-check before anything is written
                    return None  # every row decided, nothing left on the wire
                current = ahead.pop(0)
            message = current[0]
            then = ahead[0][0] if ahead else None
            on_the_wire, stop = self._start(message, then, rides)
            if then is not None and transport.following:
                riding = ahead.pop(0)
            if stop:
                if riding is not None:  # refused after its body: nothing of the rider is read
                    transport.abandon()
                return turn.stop(unwritten(), stop)
            if on_the_wire:
                in_flight = message
            if not ahead and riding is None and index >= len(rows):
                turn.pending = in_flight  # read after the next claim (jobs.engine)
                return None

    def _let_go(self, in_flight: Prepared | None, riding: tuple[Prepared, Row] | None) -> None:
        """On the way out with an error: the body on the wire gets its verdict recorded, and
        the envelope behind it, sent nowhere, is abandoned and its row released."""
        if in_flight is not None:
            self.turn.finish(in_flight)
        if riding is not None:
            self.transport.abandon()
            self.turn.outcomes.release([riding[1]], cancelled=False)

    def _start(self, message: Prepared, then: Prepared | None,
               rides: bool) -> tuple[bool, str | None]:
        """Pace, then the message up to the end of DATA, `then`'s envelope riding behind its
        body when the transport can; `rides`: this message's own envelope rode behind the
        previous body (its replies come now). Returns whether it is on the wire awaiting its
        verdict, and the reason to stop, if any (a refusal before that is recorded here)."""
        self.turn.counted(1)
        rt = self.turn.rt
        after = ((rt.mail_from(then.message_id, then.from_email), then.email)
                 if then is not None else None)
        pace = rt.pacer.wait  # waited inside the transport, right before MAIL FROM
        try:
            if rides:
                self.transport.start_next(message.wire, then=after, pace=pace)
            else:
                self.transport.start(rt.mail_from(message.message_id, message.from_email),
                                     message.email, message.wire, pace=pace, then=after)
        except DeliveryError as error:
            return False, self.turn.outcomes.refused(message, error)
        except Exception as error:  # unexpected: we cannot know if it went out
            return False, self.turn.outcomes.unexpected(message, error)
        return True, None
