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
from broadside.core.i18n import _, _l
from broadside.core.timeutil import utcnow
from broadside.delivery.transports import PROVIDER_NAMES

SKIP_REASONS = {
    "unsubscribed": _l("they had unsubscribed"),
    "unconfirmed": _l("their subscription is no longer confirmed"),
    "suppressed: bounced": _l("their address bounced"),
    "suppressed: complained": _l("they marked an email from you as spam"),
    "suppressed: blocked": _l("you blocked this address"),
    "cancelled": _l("the broadcast was cancelled"),
    "subscriber erased": _l("the subscriber was erased"),
    "no longer on the list": _l("they are no longer on the list"),
}

# A whole sentence each (the place of "how" differs between languages).
UNSUBSCRIBED_HOW = {
    "one-click": _l("Unsubscribed with the one-click button in their mail app"),
    "link": _l("Unsubscribed with the link in an email"),
    "preferences": _l("Unsubscribed on their preferences page"),
    "owner": _l("Unsubscribed by you"),
    "api": _l("Unsubscribed through the API"),
    "import": _l("Unsubscribed by an import"),
}


def skip_words(reason: str | None) -> str:
    """Why a row was skipped, in the owner's language (a reason we do not know, as recorded)."""
    if reason in SKIP_REASONS:
        return str(SKIP_REASONS[reason])
    return reason or _("no reason recorded")


MAIL_SERVER = "the mail server"  # who refused: a marker compared, never shown as it is
PROVIDER = "the provider"
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
    return PROVIDER if reply.startswith("200 ") else MAIL_SERVER


def _accepted_words(reply: str) -> str:
    if _accepted_by(reply) == PROVIDER:
        return _("Accepted by the provider")
    return _("Accepted by the mail server")


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
        return self.email or _("(erased subscriber)")

    @property
    def explanation(self) -> str:
        """What happened to this row, in words the owner can act on."""
        reason = self.reason or ""
        if self.status == "sent":
            reply = " ".join(str(part) for part in (self.smtp_code, reason) if part)
            if not reply:
                return _accepted_words(reply)
            if _accepted_by(reply) == PROVIDER:
                return _("Accepted by the provider (%(reply)s)", reply=reply)
            return _("Accepted by the mail server (%(reply)s)", reply=reply)
        if self.status == "skipped":
            return _("Not sent: %(why)s.", why=skip_words(self.reason))
        if self.status == "unknown":
            said = shown(reason)
            if said:
                return _("Unknown: it may have arrived (%(said)s).", said=said)
            return _("Unknown: it may have arrived.")
        if self.status == "failed":
            return self._failure(shown(reason))
        if self.status == "sending":
            return _("Being sent right now.")
        if self.attempts and self.next_attempt_at:
            if reason:
                return _("Waiting to try again (%(reason)s).", reason=shown(reason))
            return _("Waiting to try again.")
        if self.next_attempt_at is not None and self.next_attempt_at > utcnow():
            return _("Waiting for their own hour.")  # "at each reader's own hour"
        return _("Waiting its turn.")

    def _failure(self, reason: str) -> str:
        if not reason:
            return _("Failed.")
        if self.error_class == "transient" or _gave_up(reason):
            if reason.startswith("Gave up"):
                return _("%(reason)s You can send it again.", reason=reason)
            return _("Gave up after %(attempts)s attempts (%(reason)s). You can send it again.",
                     attempts=self.attempts, reason=reason)
        by = refused_by(reason)
        if by == MAIL_SERVER:
            return _("Refused by the mail server for this address (%(reason)s). Check or fix "
                     "%(who)s on the subscriber's page.", reason=reason, who=self.who)
        if by != US:
            return _("Refused for this address: %(reason)s. Check or fix %(who)s on the "
                     "subscriber's page.", reason=reason, who=self.who)
        if reason.startswith(US):
            return reason  # ours: it says what happened and what to do
        return _("Not sent: %(reason)s. Check or fix %(who)s on the subscriber's page.",
                 reason=reason, who=self.who)


_RETRY_WORDS = (
    ("sent again by the owner", _l("Queued again by you"), True),
    ("released", _l("Put back in the queue before any attempt"), False),
    ("throttled by the provider", _l("The provider asked us to slow down; it waits its turn again"),
     True),
)


def delivery_words(kind: str, detail: str) -> tuple[str, str]:
    """(headline, detail) for an event on the delivery itself."""
    if kind == "claimed":
        return _("Picked up by the worker to send"), ""
    if kind == "sent":
        if detail.startswith("delivered:") or detail == "delivered":
            # An `unknown` row settled by the provider's signed delivery event.
            return (_("Delivered, as the provider's delivery event confirmed"),
                    detail.removeprefix("delivered:").strip())
        return _accepted_words(detail), detail
    if kind == "skipped":
        return _("Skipped: %(why)s", why=skip_words(detail)), ""
    detail = shown(detail)
    if kind == "failed":
        if _gave_up(detail):
            return _("Given up: not accepted after the last attempt"), detail
        by = refused_by(detail)
        if by == US:
            return _("Not sent: refused by Broadside before sending, no server was asked"), detail
        if by == MAIL_SERVER:
            return _("Refused by the mail server"), detail
        return _("Refused by %(provider)s", provider=by), detail
    if kind == "unknown":
        return _("Outcome unknown"), detail
    if kind == "retry":
        if detail.startswith("will retry"):
            return _("Not accepted this time; will try again"), detail.removeprefix("will retry: ")
        for start, words, keep in _RETRY_WORDS:
            if detail.startswith(start):
                return str(words), detail if keep else ""
        return _("Put back in the queue"), detail
    return kind.capitalize(), detail


_PERSON_WORDS = {
    "resubscribed": _l("Subscribed again"),
    "bounce": _l("Their mail server reported a bounce"),
    "complaint": _l("Marked an email as spam"),
    "suppressed": _l("No more email to this address (suppressed)"),
    "unsuppressed": _l("Suppression lifted"),
}


def person_words(kind: str, detail: str) -> tuple[str, str]:
    """(headline, detail) for something the person did meanwhile (left, bounced, ...)."""
    if kind == "unsubscribed":
        how = UNSUBSCRIBED_HOW.get(detail)
        return (str(how) if how is not None else _("Unsubscribed")), ""
    words = _PERSON_WORDS.get(kind)
    return (str(words) if words is not None else kind.capitalize()), detail
