"""Invariant 6, classify errors once, in one place.

transient  -> the row goes back to `pending` with backoff (4xx, timeouts and refused or lost
              connections before the end of DATA); bounded by MAX_ATTEMPTS.
recipient  -> permanent for this one address (550/551/552/553 or a 5.1.x status on RCPT):
              the row fails and the send goes on.
channel    -> permanent for everyone (535/530 auth, sender rejected, TLS, content refused,
              anything unrecognised): the row goes back to `pending` and the broadcast pauses
              with the reason, because guessing wrong here would burn the whole list.
ambiguous  -> the connection was lost after the body was sent: the row becomes `unknown`
              and is never resent automatically (invariant 5).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from broadside.transports import DeliveryError

MAX_ATTEMPTS = 5
RECIPIENT_CODES = {550, 551, 552, 553}


@dataclass(frozen=True)
class Verdict:
    kind: str  # transient | recipient | channel | ambiguous
    code: int | None
    reply: str
    network: bool = False

    @property
    def summary(self) -> str:
        return f"{self.code} {self.reply}".strip() if self.code else self.reply


def classify(error: DeliveryError) -> Verdict:
    code, phase = error.code, error.phase

    def verdict(kind: str) -> Verdict:
        return Verdict(kind, code, error.reply, error.network)

    if phase == "data-body":
        return verdict("ambiguous")
    if phase in ("tls", "auth"):
        return verdict("channel")
    if error.network or code is None:
        # Refused, reset or timed out before the body was sent: not accepted, try again.
        return (
            verdict("transient")
            if phase in ("connect", "mail", "rcpt", "data-command")
            else verdict("channel")
        )
    if 400 <= code < 500:
        return verdict("transient")
    if phase == "rcpt" and (code in RECIPIENT_CODES or error.reply.lstrip().startswith("5.1.")):
        return verdict("recipient")
    # 5xx on MAIL (sender rejected), on DATA, 530/535 anywhere, or anything unrecognised.
    return verdict("channel")


def backoff(attempts: int, base_seconds: float, rng: random.Random | None = None) -> timedelta:
    """Exponential backoff with jitter: base * 2^(attempts-1), between half and all of it."""
    rng = rng or random.Random()
    ceiling = min(base_seconds * (2 ** max(attempts - 1, 0)), 3600.0)
    return timedelta(seconds=ceiling * rng.uniform(0.5, 1.0))
