"""Answers whose time must not tell what the server found.

"Forgot your password?" mails a link only for an owner's address, and the public sign-up form
mails a confirmation only to someone not yet on the list (or gone from it): each does more
work in one case than in the other, while their words are the same for both. So such a view
notes when it began (`SteadyAnswer`, before it looks anybody up) and, before it answers,
waits until a fixed moment after that: the floor, set well beyond the difference, so every
answer leaves at the floor whichever case it was. Each floor is configurable (for tests and
slow machines); `bench/steady_answers.py` measures the two cases of the sign-up form.
"""

from __future__ import annotations

import time


class SteadyAnswer:
    """Made when the view starts; `wait()` returns no sooner than `seconds` after that."""

    def __init__(self, seconds: float) -> None:
        self.seconds = max(0.0, float(seconds))
        self.began = time.monotonic()

    def wait(self) -> None:
        left = self.began + self.seconds - time.monotonic()
        if left > 0:
            time.sleep(left)
