"""Invariant 2, pace the side effect, not the loop.

One pacer per identity's stream (its thread of the worker process), shared by that stream's
broadcast slices, automation messages and transactional mail, so the provider sees one paced
stream. The transport calls `wait()` right before it opens a mail
transaction (MAIL FROM, after any connect or TLS handshake): it sleeps until `delay` has
passed since the previous attempt *began*, so the gap between the starts of two real sends,
as the server sees them, is never shorter than the delay. Skipped recipients never call it.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Pacer:
    # Loopback and scheduler jitter is well under a millisecond; this margin keeps the floor
    # true at the server, at a cost of 1 ms per send (2% of the rate at a 50 ms pace).
    MARGIN_S = 0.001

    def __init__(
        self,
        delay_ms: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        margin: float | None = None,
    ) -> None:
        self.delay = delay_ms / 1000.0
        self.margin = (self.MARGIN_S if margin is None else margin) if delay_ms > 0 else 0.0
        self.clock = clock
        self.sleep = sleep
        self._last_start: float | None = None
        self.waited_seconds = 0.0

    @property
    def limited(self) -> bool:
        """Whether a ceiling above the pace may hold a send (jobs.runtime.LeasedPacer's)."""
        return False

    def ready(self) -> bool:
        """True when the next send may begin now (no wait left)."""
        return self._last_start is None or self.clock() >= self._last_start + self.delay + self.margin

    def settle(self, lead: float = 0.0) -> float:
        """Sleep until `lead` seconds before the next send may begin, without starting it.
        The sender calls this before its send-time re-check, so the check is made at the end
        of the wait, not at its start (invariant 3: at a 200 ms pace, 200 ms fresher); `lead`
        is about how long the check and the message take, so the send is not late for them."""
        now = self.clock()
        if self._last_start is not None:
            ready_at = self._last_start + self.delay + self.margin - max(0.0, min(lead, self.delay))
            if ready_at > now:
                self.sleep(ready_at - now)
                self.waited_seconds += ready_at - now
                now = self.clock()
                while now < ready_at:  # sleep() may wake early; the floor is a promise
                    self.sleep(ready_at - now)
                    now = self.clock()
        return now

    def wait(self) -> float:
        """Sleep until the next send may begin; returns the moment it begins."""
        now = self.settle()
        self._last_start = now
        return now
