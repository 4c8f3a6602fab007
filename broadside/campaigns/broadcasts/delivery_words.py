"""A delivery and its events in the owner's words: what happened to a row (`DeliveryRow.
explanation`), why a row was skipped, and each event of its timeline as a headline and a detail.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

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
            return f"Accepted by the mail server ({reply})" if reply else "Accepted by the mail server"
        if self.status == "skipped":
            return f"Not sent: {skip_words(self.reason)}."
        if self.status == "unknown":
            return ("Unknown: the connection was lost after the message was handed over, "
                    "so it may have arrived.")
        if self.status == "failed":
            if self.error_class == "transient":
                return f"Gave up after {self.attempts} attempts ({reason}). You can send it again."
            if self.error_class == "recipient":
                return (f"Refused for this address ({reason}). Check or fix {self.who} "
                        "on the subscriber's page.")
            return f"Failed: {reason}" if reason else "Failed."
        if self.status == "sending":
            return "Being sent right now."
        if self.attempts and self.next_attempt_at:
            return f"Waiting to try again ({reason})." if reason else "Waiting to try again."
        return "Waiting its turn."


def delivery_words(kind: str, detail: str) -> tuple[str, str]:
    """(headline, detail) for an event on the delivery itself."""
    if kind == "claimed":
        return "Picked up by the worker to send", ""
    if kind == "sent":
        if detail.startswith("delivered:") or detail == "delivered":
            # An `unknown` row settled by the provider's signed delivery event.
            return ("Delivered, as the provider's delivery event confirmed",
                    detail.removeprefix("delivered:").strip())
        return "Accepted by the mail server", detail
    if kind == "skipped":
        return f"Skipped: {skip_words(detail)}", ""
    if kind == "failed":
        return "Refused by the mail server", detail
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
