"""Sending a claimed batch one message at a time: re-check, build, pace, send, read the verdict.

Every row here was claimed and committed before the batch began (invariant 4). Each person is
re-checked just before their send (invariant 3) and paced inside the transport, right before
MAIL FROM or the request (invariant 2); only real attempts wait, skipped rows never do.

When the pace leaves no wait before the next send (SEND_DELAY_MS=0, or a delay already spent),
the next person is re-checked and their message built while the server is still taking the
current one (after its final dot, before its reply): their MAIL FROM follows that reply at
once, so the check is still the last thing before their send, and the server's work overlaps
ours. Otherwise the pace is waited out first and the re-check comes after the wait. The
batch's last message is left in flight (`Turn.pending`), its verdict read after the next claim
(jobs.engine).
"""

from __future__ import annotations

from broadside.campaigns.broadcasts import lifecycle
from broadside.delivery.transports import DeliveryError, Transport
from jobs.rows import Decision, Prepared, Row
from jobs.turn import Turn


class OneByOneSending:
    fields = False

    def __init__(self, turn: Turn, transport: Transport) -> None:
        self.turn = turn
        self.transport = transport
        self.decide_seconds = 0.0  # how long a re-check and build take (a moving average)

    def batch_size(self, adaptive: int) -> int:
        return adaptive

    def send(self, rows: list[Row], deadline: float) -> str | None:
        turn = self.turn
        outcomes, decide, pacer = turn.outcomes, turn.source.decide, turn.rt.pacer
        in_flight, turn.pending = turn.pending, None  # the previous batch's last, if any
        for index, row in enumerate(rows):
            decision: Decision | None = None
            if in_flight is not None:
                if pacer.ready():
                    try:
                        decision = decide(row)
                    except Exception:
                        turn.finish(in_flight)  # its verdict is on the way: record it first
                        raise
                stop = turn.finish(in_flight)
                in_flight = None
                if stop:
                    return turn.stop(rows[index:], stop)
            if decision is None:
                # The pace is waited out first, so the re-check is as late as it can be: it
                # starts just early enough to be done (with the message built) when the pace
                # allows the send; the transport's own wait keeps the floor exact.
                pacer.settle(lead=2 * self.decide_seconds)
                began = pacer.clock()
                decision = decide(row)
                took = pacer.clock() - began
                self.decide_seconds = (
                    took if not self.decide_seconds else 0.8 * self.decide_seconds + 0.2 * took
                )
            if decision.stop is not None:
                outcomes.release(rows[index:], cancelled=(decision.stop == lifecycle.CANCELLED))
                return "stopped"
            if decision.hold:
                outcomes.release([row], cancelled=False)  # its automation is held: not now
                continue
            if decision.skip is not None:
                outcomes.skipped(row, decision.skip)
                turn.skipped += 1
                continue
            waited = turn.waited_for_cap
            if not turn.hourly_room(deadline):
                outcomes.release(rows[index:], cancelled=False)
                return "continue"
            if turn.waited_for_cap > waited:
                decision = decide(row)  # the hourly limit made us wait: ask again (invariant 3)
                if decision.stop is not None or decision.skip is not None or decision.hold:
                    outcomes.release(rows[index:], cancelled=False)
                    return "continue"
            if decision.fail is not None:
                outcomes.unbuildable(row, decision.fail)
                continue
            assert decision.message is not None
            on_the_wire, stop = self._start(decision.message)
            if stop:
                return turn.stop(rows[index + 1 :], stop)
            if on_the_wire:
                in_flight = decision.message
        # The last message's verdict is read after the next claim (jobs.engine, `Turn.settle`).
        turn.pending = in_flight
        return None

    def _start(self, message: Prepared) -> tuple[bool, str | None]:
        """Pace, then the message up to the end of DATA (or the whole request). Returns
        whether it is on the wire awaiting its verdict (read by `Turn.finish`), and the reason
        to stop, if any; a refusal before that is recorded here."""
        self.turn.counted(1)
        try:
            # Invariant 2: pace the side effect (inside the transport, right before MAIL FROM);
            # only real attempts wait, skipped recipients never do.
            self.transport.start(self.turn.rt.mail_from(message.message_id, message.from_email),
                                 message.email, message.wire, pace=self.turn.rt.pacer.wait)
        except DeliveryError as error:
            return False, self.turn.outcomes.refused(message, error)
        except Exception as error:  # unexpected: we cannot know if it went out
            return False, self.turn.outcomes.unexpected(message, error)
        return True, None
