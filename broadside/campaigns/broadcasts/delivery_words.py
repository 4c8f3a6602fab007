"""A delivery and its events in the owner's words: what happened to a row (`DeliveryRow.
explanation`), why a row was skipped, and each event of its timeline as a headline and a detail.

Who refused is read from the reason the worker recorded (jobs.classify: `Verdict.said`): a
mail server's reply begins with its code ("550 5.1.1 …"), a provider's answer with its name
("Postmark answered …"), and Broadside's own refusal before sending with "Broadside …". So
"Refused by the mail server" is said only when a server did refuse. A reason recorded before
reasons were all written for the owner may carry a Python exception's text; it is never shown
(`shown`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from broadside.core.errors import shown
from broadside.delivery.transports import PROVIDER_NAMES

SKIP_REASONS = {
    "unsubscribed": "they had unsubscribed",
    "unconfirmed": "their subscription is no longer confirmed",
    "suppressed: bounced": "their address bounced",
    "suppressed: complained": "they marked an email from you as spam",
    "suppressed: blocked": "you blocked this address",
    "cancelled": "the broadcast was cancelled",
    "subscriber erased": "the subscriber was erased",
    "no longer on the list": "they are no longer on the list",
}

UNSUBSCRIBE_SOURCES = {
    "one-click": "with the one-click button in their mail app",
    "link": "with the link in an email",
    "preferences": "on their preferences page",
    "owner": "by you",
    "api": "through the API",
    "import": "by an import",
}


def skip_words(reason: str | None) -> str:
    return SKIP_REASONS.get(reason or "", reason or "no reason recorded")


MAIL_SERVER = "the mail server"
US = "Broadside"
_SERVER_REPLY = re.compile(r"[2-5]\d\d(?:[ -]|$)")  # a mail server's reply: its code first


def refused_by(reason: str) -> str:
    """Who refused, from a recorded reason: the mail server, a provider (by its name), or
    Broadside itself, before sending (our own words, and anything older we cannot tell)."""
    if _SERVER_REPLY.match(reason):
        return MAIL_SERVER
    return next((name for name in PROVIDER_NAMES.values()
                 if reason.startswith((f"{name} ", f"{name}:"))), US)


def _accepted_by(reply: str) -> str:
    """A provider's API answers an accepted message with HTTP 200; a mail server with 250."""
    return "the provider" if reply.startswith("200 ") else MAIL_SERVER


def _gave_up(reason: str) -> bool:
    return reason.startswith(("Gave up after", "retry budget exhausted"))


@dataclass(frozen=True)
class DeliveryRow:
    id: int
    subscriber_id: int | None
    email: str | None
    name: str | None
    status: str
    reason: str | None
    smtp_code: int | None
    error_class: str | None
    attempts: int
    next_attempt_at: datetime | None
    sent_at: datetime | None
    updated_at: datetime | None

    @property
    def who(self) -> str:
        return self.email or "(erased subscriber)"

    @property
    def explanation(self) -> str:
        """What happened to this row, in words the owner can act on."""
        reason = self.reason or ""
        if self.status == "sent":
            reply = " ".join(str(part) for part in (self.smtp_code, reason) if part)
            who = _accepted_by(reply)
            return f"Accepted by {who} ({reply})" if reply else f"Accepted by {who}"
        if self.status == "skipped":
            return f"Not sent: {skip_words(self.reason)}."
        if self.status == "unknown":
            said = shown(reason)
            return f"Unknown: it may have arrived ({said})." if said else "Unknown: it may have arrived."
        if self.status == "failed":
            return self._failure(shown(reason))
        if self.status == "sending":
            return "Being sent right now."
        if self.attempts and self.next_attempt_at:
            return f"Waiting to try again ({shown(reason)})." if reason else "Waiting to try again."
        return "Waiting its turn."

    def _failure(self, reason: str) -> str:
        if not reason:
            return "Failed."
        if self.error_class == "transient" or _gave_up(reason):
            if reason.startswith("Gave up"):
                return f"{reason} You can send it again."
            return f"Gave up after {self.attempts} attempts ({reason}). You can send it again."
        fix = f"Check or fix {self.who} on the subscriber's page."
        by = refused_by(reason)
        if by == MAIL_SERVER:
            return f"Refused by the mail server for this address ({reason}). {fix}"
        if by != US:
            return f"Refused for this address: {reason}. {fix}"
        if reason.startswith(US):
            return reason  # ours: it says what happened and what to do
        return f"Not sent: {reason}. {fix}"


def delivery_words(kind: str, detail: str) -> tuple[str, str]:
    """(headline, detail) for an event on the delivery itself."""
    if kind == "claimed":
        return "Picked up by the worker to send", ""
    if kind == "sent":
        if detail.startswith("delivered:") or detail == "delivered":
            # An `unknown` row settled by the provider's signed delivery event.
            return ("Delivered, as the provider's delivery event confirmed",
                    detail.removeprefix("delivered:").strip())
        return f"Accepted by {_accepted_by(detail)}", detail
    if kind == "skipped":
        return f"Skipped: {skip_words(detail)}", ""
    detail = shown(detail)
    if kind == "failed":
        if _gave_up(detail):
            return "Given up: not accepted after the last attempt", detail
        by = refused_by(detail)
        if by == US:
            return "Not sent: refused by Broadside before sending, no server was asked", detail
        return f"Refused by {by}", detail
    if kind == "unknown":
        return "Outcome unknown", detail
    if kind == "retry":
        if detail.startswith("will retry"):
            return "Not accepted this time; will try again", detail.removeprefix("will retry: ")
        if detail.startswith("sent again by the owner"):
            return "Queued again by you", detail
        if detail.startswith("released"):
            return "Put back in the queue before any attempt", ""
        if detail.startswith("throttled by the provider"):
            return "The provider asked us to slow down; it waits its turn again", detail
        return "Put back in the queue", detail
    return kind.capitalize(), detail


def person_words(kind: str, detail: str) -> tuple[str, str]:
    """(headline, detail) for something the person did meanwhile (left, bounced, ...)."""
    if kind == "unsubscribed":
        return f"Unsubscribed {UNSUBSCRIBE_SOURCES.get(detail, '')}".strip(), ""
    words = {
        "resubscribed": "Subscribed again",
        "bounce": "Their mail server reported a bounce",
        "complaint": "Marked an email as spam",
        "suppressed": "No more email to this address (suppressed)",
        "unsuppressed": "Suppression lifted",
    }
    return words.get(kind, kind.capitalize()), detail
