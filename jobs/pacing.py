"""Invariant 2, pace the side effect, not the loop.

One pacer per worker process, shared by broadcast slices and transactional mail, so the
provider sees one paced stream. `wait()` is called just before a real send attempt: it sleeps
until `delay` has passed since the previous attempt *began*, so the gap between the starts of
two real sends is never shorter than the delay. Skipped recipients never call it.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Pacer:
    def __init__(self, delay_ms: int, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.delay = delay_ms / 1000.0
        self.clock = clock
        self.sleep = sleep
        self._last_start: float | None = None
        self.waited_seconds = 0.0

    def wait(self) -> float:
        """Sleep until the next send may begin; returns the moment it begins."""
        now = self.clock()
        if self._last_start is not None:
            ready_at = self._last_start + self.delay
            if ready_at > now:
                self.sleep(ready_at - now)
                self.waited_seconds += ready_at - now
                now = self.clock()
                while now < ready_at:  # sleep() may wake early; the floor is a promise
                    self.sleep(ready_at - now)
                    now = self.clock()
        self._last_start = now
        return now
