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

`next_step` is the one policy mapping a verdict to what becomes of the message, shared by
broadcasts (jobs.outcomes) and transactional mail (jobs.transactional); `channel_reason` and
`connection_reason` are the owner's words when a broadcast pauses.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

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


def channel_reason(verdict: Verdict) -> str:
    """Why a broadcast paused on a channel-wide refusal, in words a non-engineer can act on."""
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


def connection_reason(failures: int, verdict: Verdict) -> str:
    """Why a broadcast paused after connection failures in a row."""
    return (
        f"The mail server could not be reached {failures} times in a "
        f"row ({verdict.summary}). Check SMTP_URL and that the server is up, then "
        f"press Resume."
    )


class Step(StrEnum):
    """What becomes of a message after an error: the one outcome policy (see `next_step`)."""

    UNKNOWN = "unknown"  # may have arrived: never resent automatically (invariant 5)
    FAILED = "failed"  # refused for this address: do not try again
    EXHAUSTED = "exhausted"  # transient, but the retry budget is spent: failed
    RETRY = "retry"  # back to pending, with backoff
    PAUSE = "pause"  # back to pending (no backoff); the broadcast pauses with the reason


def next_step(
    verdict: Verdict, attempts: Callable[[], int], *, pausable: bool, channel_down: bool = False
) -> tuple[Step, int | None]:
    """The one outcome policy, for broadcast deliveries and transactional mail alike.

    They differ in one way only, `pausable`: a broadcast can pause, so a channel-wide
    refusal (or `channel_down`: MAX_CONNECTION_FAILURES connection failures in a row) pauses
    it rather than burn the whole list. A transactional message (a test send, a sign-up
    confirmation) has no broadcast to pause and concerns one person: a channel refusal is
    retried with backoff within the same MAX_ATTEMPTS budget, and its failure shows on the
    System page. `attempts` is asked for only when the budget matters (it may be a query).
    Returns the step and, when it was read, the attempts so far.
    """
    if verdict.kind == "ambiguous":
        return Step.UNKNOWN, None
    if verdict.kind == "recipient":
        return Step.FAILED, None
    if pausable and (verdict.kind == "channel" or channel_down):
        return Step.PAUSE, None
    spent = attempts()
    if spent >= MAX_ATTEMPTS:
        return Step.EXHAUSTED, spent
    return Step.RETRY, spent
