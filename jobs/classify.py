"""Invariant 6, classify errors once, in one place.

transient  -> the row goes back to `pending` with backoff (4xx, timeouts and refused or lost
              connections before the end of DATA); bounded by MAX_ATTEMPTS.
recipient  -> permanent for this one address (550/551/552/553 or a 5.1.x status on RCPT):
              the row fails and the send goes on. When the reply names the recipient's
              address itself (`names_recipient`, table below) the verdict is also a bounce
              (`Verdict.bounce`): jobs.outcomes suppresses the address as `bounced` (hard), in
              the same transaction, as a reported hard bounce would. An address Broadside
              refused itself because it needs SMTPUTF8 and the server or provider does not
              offer it (broadside.delivery.smtp_envelope, providers.addressing) is a recipient
              verdict too: that row fails with our reason, never retried, never channel-wide,
              and the address is not suppressed (another identity may reach it).
channel    -> permanent for everyone (535/530 auth, sender rejected, TLS, content refused,
              anything unrecognised): the row goes back to `pending` and the broadcast pauses
              with the reason, because guessing wrong here would burn the whole list.
ambiguous  -> the connection was lost after the body was sent: the row becomes `unknown`
              and is never resent automatically (invariant 5).
throttled  -> the provider asked us to slow down (429, SES Throttling): the row goes back to
              `pending` without spending an attempt, and the stream waits (Retry-After when
              given) before its next request.

Providers' HTTP APIs are classified here too (`_provider`): a request that could not be sent
is transient, one sent without an answer is ambiguous, and each provider's answers (HTTP
status and its own code) map to the same kinds.

`next_step` is the one policy mapping a verdict to what becomes of the message, applied by
jobs.outcomes to the rows of every source (broadcast deliveries, automation messages,
transactional mail: jobs.rows); `channel_reason` and `connection_reason` are the owner's
words when a broadcast pauses.

Every reason written for the owner names who refused (`Verdict.said`): Broadside itself,
before anything was sent (`DeliveryError.ours`, `unwritable`: our own sentence, with what to
do); the mail server (its reply code and text, its own words); or the provider (its name,
message, HTTP status and code). A Python exception's text never becomes a reason: it goes to
the worker's log.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from enum import StrEnum

from broadside.delivery.transports import PROVIDER_NAMES, DeliveryError

log = logging.getLogger("broadside.worker")

MAX_ATTEMPTS = 5
RECIPIENT_CODES = {550, 551, 552, 553}

# A synchronous refusal that names the recipient: a hard bounce (`names_recipient`).
#
# | reply on RCPT                                   | bounce? | why                            |
# |-------------------------------------------------|---------|--------------------------------|
# | 550/551/553 with 5.1.0, 5.1.1, 5.1.2, 5.1.3,    | yes     | RFC 3463: the address (its     |
# |   5.1.6 or 5.1.10                               |         | mailbox, system, syntax, null  |
# |                                                 |         | MX) is bad                     |
# | 550/551/553 with any other enhanced code        | no      | 5.7.x is policy/spam, 5.2.x    |
# |   (5.7.1, 5.2.1, ...)                           |         | the mailbox's state: the code  |
# |                                                 |         | decides, whatever the text     |
# | 550/551/553 without an enhanced code, whose     | yes     | the classic texts of an        |
# |   text says user unknown, no such user, ...     |         | unknown mailbox                |
# |   (_ADDRESS_WORDS) and no policy word           |         |                                |
# | 552, or 5.2.2 (mailbox full)                    | soft    | counted as a soft bounce       |
# | anything else                                   | no      |                                |
_ADDRESS_STATUSES = frozenset({"5.1.0", "5.1.1", "5.1.2", "5.1.3", "5.1.6", "5.1.10"})
_BOUNCE_CODES = frozenset({550, 551, 553})
_ENHANCED = re.compile(r"\s*([245]\.\d{1,3}\.\d{1,3})(?!\d)")
_ADDRESS_WORDS = ("user unknown", "unknown user", "no such user", "no such mailbox",
                  "no such recipient", "mailbox unavailable", "mailbox not found",
                  "recipient unknown", "unknown recipient", "invalid recipient",
                  "does not exist", "user not found", "address rejected")
_POLICY_WORDS = ("spam", "policy", "block", "blacklist", "denylist", "reputation", "relay",
                 "not permitted", "authenticat")


def mailbox_full(code: int | None, reply: str) -> bool:
    """A 5xx on RCPT that says the mailbox is full: a soft bounce (counted, not suppressed
    at once; the third in a row suppresses, as reported soft bounces do)."""
    enhanced = _ENHANCED.match(reply)
    return code == 552 and (enhanced is None or enhanced.group(1) == "5.2.2") or (
        code is not None and 500 <= code < 600 and enhanced is not None
        and enhanced.group(1) == "5.2.2")


def names_recipient(code: int | None, reply: str) -> bool:
    """Whether a 5xx reply to RCPT says this recipient's address itself is bad (the table
    above): the row fails and the address is suppressed as a hard bounce."""
    if code not in _BOUNCE_CODES:
        return False
    enhanced = _ENHANCED.match(reply)
    if enhanced:
        return enhanced.group(1) in _ADDRESS_STATUSES
    text = reply.lower()
    return any(w in text for w in _ADDRESS_WORDS) and not any(w in text for w in _POLICY_WORDS)


@dataclass(frozen=True)
class Verdict:
    kind: str  # transient | recipient | channel | ambiguous | throttled
    code: int | None
    reply: str
    network: bool = False
    retry_after: float | None = None  # throttled: how long the provider asked us to wait
    provider: str | None = None
    provider_code: str | None = None
    ours: bool = False  # Broadside refused before sending: `reply` is our own sentence
    bounce: bool = False  # recipient: the server's reply names the address (a hard bounce)
    soft_bounce: bool = False  # recipient: the mailbox is full (552, 5.2.2): a soft bounce

    @property
    def summary(self) -> str:
        return f"{self.code} {self.reply}".strip() if self.code else self.reply

    @property
    def said(self) -> str:
        """Who answered what, in the owner's words: the reason a row keeps. A mail server's
        reply is its code and text; a provider's answer names it; our own words are ours."""
        if self.ours or not self.provider:
            return self.summary  # the server's reply, or our words (code None)
        name = provider_name(self.provider)
        if self.code is None:
            return f"{name}: {self.reply}"  # never answered (could not connect, no answer)
        status = f"HTTP {self.code}"
        if self.provider_code and self.provider_code != str(self.code):
            status += f", code {self.provider_code}"
        return f"{name} answered “{self.reply}” ({status})"


def provider_name(scheme: str) -> str:
    return PROVIDER_NAMES.get(scheme, scheme.capitalize())


# Providers' own codes (`DeliveryError.provider_code`) for a refusal of one recipient.
_RECIPIENT_CODES = {
    "postmark": {"300", "406"},  # invalid address; inactive recipient (bounced, unsubscribed)
    "resend": {"validation_error"},  # a per-position reject in a permissive batch
    "ses": {"BadRequestException"},  # an address SES cannot parse
    "mailgun": set(),
}
_THROTTLE_CODES = {"429", "Throttling", "ThrottlingException", "TooManyRequestsException",
                   "rate_limit_exceeded", "concurrent_idempotent_requests"}
# A whole-request validation error that is really about the sender or the account.
_SENDER_WORDS = ("not verified", "domain", "sender", "from address", "sandbox", "suspended")


def _provider(error: DeliveryError) -> str:
    """The kind of a provider's API answer (phase `api`)."""
    code, pcode, reply = error.code, error.provider_code or "", error.reply.lower()
    if code == 429 or pcode in _THROTTLE_CODES:
        return "throttled"
    if code is not None and code >= 500:
        return "transient"
    if code in (401, 403):
        return "channel"  # credentials, a suspended account, a sender not allowed
    if pcode in _RECIPIENT_CODES.get(error.provider or "", set()):
        if any(word in reply for word in _SENDER_WORDS):
            return "channel"
        return "recipient"
    if error.provider == "ses" and pcode == "MessageRejected":
        # SES rejects the message itself: an unverified address in the sandbox is the
        # channel; otherwise it is this message (its recipient or its content).
        return "channel" if "not verified" in reply else "recipient"
    if error.provider == "mailgun" and code == 400 and "'to'" in reply:
        return "recipient"
    # Anything else (sender not verified, account paused, a quota, an answer we do not
    # know) counts as channel-wide: guessing wrong would burn the whole list.
    return "channel"


def classify(error: DeliveryError) -> Verdict:
    code, phase = error.code, error.phase

    def verdict(kind: str) -> Verdict:
        return Verdict(kind, code, error.reply, error.network, error.retry_after, error.provider,
                       error.provider_code, error.ours)

    if error.ours:  # nothing was sent: the address is this row's, the sender everyone's
        return verdict("recipient" if phase == "rcpt" else "channel")
    if phase == "request":
        return verdict("transient")  # the request never left: not accepted
    if phase == "response":
        return verdict("ambiguous")  # sent, and no answer came
    if phase == "api":
        return verdict(_provider(error))
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
        return replace(verdict("recipient"), bounce=names_recipient(code, error.reply),
                       soft_bounce=mailbox_full(code, error.reply))
    # 5xx on MAIL (sender rejected), on DATA, 530/535 anywhere, or anything unrecognised.
    return verdict("channel")


def backoff(attempts: int, base_seconds: float, rng: random.Random | None = None) -> timedelta:
    """Exponential backoff with jitter: base * 2^(attempts-1), between half and all of it."""
    rng = rng or random.Random()
    ceiling = min(base_seconds * (2 ** max(attempts - 1, 0)), 3600.0)
    return timedelta(seconds=ceiling * rng.uniform(0.5, 1.0))


def channel_reason(verdict: Verdict, where: str = "SMTP_URL") -> str:
    """Why a broadcast paused on a channel-wide refusal, in words a non-engineer can act on.
    `where`: what to fix (SMTP_URL for the default identity, another identity's page)."""
    code = verdict.code
    if verdict.ours:
        return verdict.reply  # what we refused, and what to fix
    if verdict.provider:
        name = provider_name(verdict.provider)
        if code in (401, 403):
            return (
                f"{name} refused our credentials or this account ({verdict.said}). Fix the "
                "transport URL on Settings → Sending identities (saving it resumes the "
                "identity), then press Resume."
            )
        return (
            f"{name} refused to send for this identity ({verdict.said}). Nothing more will "
            "be sent through it until you fix the cause (often an unverified sender or domain, "
            "or a paused account) and press Resume."
        )
    if code in (530, 534, 535, 538):
        return (
            f"The mail server refused our login ({verdict.summary}). Check the user name and "
            f"password in {where}, restart the worker, then press Resume."
        )
    if code is None and "TLS" in verdict.reply:
        return (
            f"A secure connection to the mail server failed ({verdict.summary}). "
            f"Check {where}, then press Resume."
        )
    return (
        f"The mail server refused this broadcast ({verdict.summary}). Nothing more will be "
        "sent until you fix the cause (often the sender address or the account) and press Resume."
    )


def connection_reason(failures: int, verdict: Verdict, where: str = "SMTP_URL") -> str:
    """Why a broadcast paused after connection failures in a row."""
    if verdict.provider:
        return (f"{provider_name(verdict.provider)} could not be reached {failures} times in a "
                f"row ({verdict.reply}). Check {where} and the provider's status page, then "
                "press Resume.")
    return (
        f"The mail server could not be reached {failures} times in a "
        f"row ({verdict.summary}). Check {where} and that the server is up, then "
        f"press Resume."
    )


def exhausted_reason(verdict: Verdict, attempts: int | None) -> str:
    """Why a message failed after its every attempt was refused for a temporary reason."""
    if verdict.code is not None and not verdict.provider and not verdict.ours:
        last = f"the mail server's last answer was {verdict.summary}"
    else:
        last = f"the last time: {verdict.said}"
    return f"Gave up after {attempts} attempts; {last}."


def unwritable(error: Exception, *, to_addr: str, from_email: str, what: str) -> str:
    """Why Broadside did not send a message it could not write (no server was asked), with
    what to do; the exception itself goes to the log. `what`: the row, for the log."""
    log.warning("%s could not be written", what, exc_info=error)
    if not to_addr.isascii():
        return ("Broadside did not send it: the domain of the address is not a valid "
                "international domain name. Correct the address on the subscriber's page, or "
                "ask them for another one.")
    if not from_email.isascii():
        return ("Broadside did not send it: the domain of the sender address is not a valid "
                "international domain name. Change the sender address (Settings, or the "
                "sending identity).")
    return ("Broadside did not send it: this message could not be written (the worker's log "
            "has the details). Check this person's name and attributes, then send it again.")


def what_to_fix(identity_name: str, identity_id: int | None) -> str:
    """Where the owner fixes an identity's transport: SMTP_URL for the default."""
    if identity_id is None:
        return "SMTP_URL"
    return f"the transport URL of “{identity_name}” (Settings → Sending identities)"


class Step(StrEnum):
    """What becomes of a message after an error: the one outcome policy (see `next_step`)."""

    UNKNOWN = "unknown"  # may have arrived: never resent automatically (invariant 5)
    THROTTLE = "throttle"  # the provider asked us to slow down: back to pending, no attempt spent
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
    if verdict.kind == "throttled":
        return Step.THROTTLE, None
    if verdict.kind == "recipient":
        return Step.FAILED, None
    if pausable and (verdict.kind == "channel" or channel_down):
        return Step.PAUSE, None
    spent = attempts()
    if spent >= MAX_ATTEMPTS:
        return Step.EXHAUSTED, spent
    return Step.RETRY, spent
