"""Postmark's, Resend's and Mailgun's webhook payloads, parsed into `ProviderEvent`s before
anything is written: a body that is not the provider's documented shape is a BadPayload (400,
nothing written), and a kind of event we do not use (opens, clicks, ...) parses to no events
(acknowledged with a 200, so the provider stops sending it again).

Every event names the address and the message: the provider's own id for it (what its API
answered, kept as `provider_message_id`), and our Message-ID where the payload carries it.
What counts as a hard or a soft bounce follows each provider's documentation:

- Postmark: `Type` HardBounce, BadEmailAddress, ManuallyDeactivated are hard; a `Type` that
  is no failure to deliver to the address (an out-of-office reply, a challenge, a virus
  warning, ...) is ignored; every other one (SoftBounce, Transient, DnsError, Blocked, ...,
  and any type Postmark adds later) is soft. A `SpamComplaint` record, or a bounce of that
  type, is a complaint.
- Resend: `bounce.type` Permanent is hard; Transient and Undetermined (and anything else) are
  soft, as for SES, which Resend reports from.
- Mailgun: a `failed` event of severity `permanent` is hard. Mailgun posts a `temporary` one
  for every attempt it will retry (for up to 8 hours), so those are not counted: the outcome
  arrives later, as `delivered` or as the final failure, whose reason is `old` ("gave up
  after retrying"), which counts as one soft bounce.

Unknown classes are soft, conservatively: three soft bounces in a row suppress, one hard
bounce does at once, so a misread soft bounce costs a little mail and a misread hard bounce
would cost a reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broadside.feedback.payloads import (
    MAX_DETAIL,
    MAX_MESSAGE_ID,
    BadPayload,
    ProviderEvent,
    address_of,
    json_object,
    storable,
)
from broadside.mail.message_refs import TAG_NAME, row_of

POSTMARK_HARD = frozenset({"HardBounce", "BadEmailAddress", "ManuallyDeactivated"})
# Postmark files these under bounces, but none says this address cannot take our mail: an
# auto-reply even proves it can. Counting them as soft bounces would suppress, after three
# out-of-office replies, a reader who reads.
POSTMARK_NOT_FAILURES = frozenset({
    "AutoResponder", "AddressChange", "ChallengeVerification", "InboundError", "OpenRelayTest",
    "SMTPApiError", "Subscribe", "TemplateRenderingFailed", "Unsubscribe", "VirusNotification",
})
POSTMARK_COMPLAINT = "SpamComplaint"

RESEND_KINDS = {"email.delivered": "delivery", "email.bounced": "bounce",
                "email.complained": "complaint"}


@dataclass(frozen=True)
class PostmarkRecord:
    events: list[ProviderEvent] = field(default_factory=list)
    # Postmark signs and dates nothing: this names the record so that a repeat counts once
    # ("" when the record is ignored).
    key: str = ""


def _text(data: dict[str, Any], key: str, what: str, limit: int = MAX_DETAIL) -> str:
    """An optional string field ("" when absent or null), cut to `limit`."""
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise BadPayload(f"{what}'s {key!r} must be a string.")
    return str(value).strip()[:limit]


def _message_id(data: dict[str, Any], key: str, what: str) -> tuple[str, ...]:
    value = data.get(key)
    if value is None or value == "":
        return ()
    if not isinstance(value, str) or len(value) > MAX_MESSAGE_ID:
        raise BadPayload(f"{what}'s {key!r} must be a message id (a string of at most "
                         f"{MAX_MESSAGE_ID} characters).")
    return (value.strip(),)


def _our_ref(value: Any) -> tuple[str, ...]:
    """Our row reference, echoed by the provider (Postmark's Metadata, Resend's tags: a
    mapping, or a list of {"name", "value"}); () when absent or not ours."""
    if isinstance(value, list):
        value = {t.get("name"): t.get("value") for t in value if isinstance(t, dict)}
    if not isinstance(value, dict):
        return ()
    ref = value.get(TAG_NAME)
    return (ref,) if isinstance(ref, str) and row_of(ref) is not None else ()


def _email(data: dict[str, Any], key: str, what: str) -> str:
    address = address_of(data.get(key))
    if address is None:
        raise BadPayload(f"{what} has no {key!r} address.")
    return address


def _object(data: dict[str, Any], key: str, what: str) -> dict[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise BadPayload(f"{what} has no {key!r} object.")
    return value


def _detail(*parts: str) -> str:
    return " ".join(p for p in parts if p)[:MAX_DETAIL]


def _confirmed(provider: str, id_label: str, ids: tuple[str, ...], extra: str = "") -> str:
    """The evidence a delivery event leaves in the row's timeline."""
    named = f" ({id_label} {ids[0]})" if ids else ""
    return _detail(f"confirmed by {provider}'s delivery event{named}" + (":" if extra else ""),
                   extra)


# ------------------------------------------------------------------ Postmark


def parse_postmark(raw: bytes) -> PostmarkRecord:
    """One Postmark record: `RecordType` Delivery, Bounce or SpamComplaint (others ignored)."""
    data = json_object(raw, "The body")
    kind = data.get("RecordType")
    if not isinstance(kind, str):
        raise BadPayload("The body has no 'RecordType': it is not a Postmark webhook.")
    what = f"The Postmark {kind} record"
    if kind in ("Delivery", "Bounce", POSTMARK_COMPLAINT):
        storable(data, what)
    if kind == "Delivery":
        ids = _message_id(data, "MessageID", what) + _our_ref(data.get("Metadata"))
        email = _email(data, "Recipient", what)
        detail = _confirmed("postmark", "MessageID", ids, _text(data, "Details", what))
        key = f"Delivery:{ids[0] if ids else ''}:{email.lower()}"
        return PostmarkRecord([ProviderEvent("delivery", email, None, ids, detail, "postmark")],
                              key)
    if kind not in ("Bounce", POSTMARK_COMPLAINT):
        return PostmarkRecord()
    ids = _message_id(data, "MessageID", what) + _our_ref(data.get("Metadata"))
    email = _email(data, "Email", what)
    bounce_type = _text(data, "Type", what, 100) or kind
    record_id = _text(data, "ID", what, 100)
    key = (f"{kind}:{record_id}" if record_id
           else f"{kind}:{ids[0] if ids else ''}:{email.lower()}:{bounce_type}")
    description = _text(data, "Description", what)
    details = _text(data, "Details", what)
    if kind == POSTMARK_COMPLAINT or bounce_type == POSTMARK_COMPLAINT:
        event = ProviderEvent("complaint", email, None, ids,
                              _detail("Postmark spam complaint", details), "postmark")
        return PostmarkRecord([event], key)
    if bounce_type in POSTMARK_NOT_FAILURES:
        return PostmarkRecord()
    hard = bounce_type in POSTMARK_HARD
    detail = _detail(f"Postmark {bounce_type}:", description, details)
    return PostmarkRecord(
        [ProviderEvent("bounce", email, "hard" if hard else "soft", ids, detail, "postmark")], key)


# ------------------------------------------------------------------ Resend


def _resend_recipients(data: dict[str, Any]) -> list[str]:
    value = data.get("to")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise BadPayload("The Resend event's data has no 'to' list of addresses.")
    addresses = [address_of(raw) for raw in value]
    if any(a is None for a in addresses):
        raise BadPayload("The Resend event's 'to' must hold email addresses.")
    return [a for a in addresses if a]


def parse_resend(raw: bytes) -> list[ProviderEvent]:
    """`{"type": "email.delivered"|"email.bounced"|"email.complained"|..., "data":
    {"email_id", "to": [...], "bounce": {"type", "subType", "message"}}}`."""
    body = json_object(raw, "The body")
    kind = body.get("type")
    if not isinstance(kind, str):
        raise BadPayload("The body has no 'type': it is not a Resend webhook.")
    if kind not in RESEND_KINDS:
        return []
    what = f"The Resend {kind} event"
    storable(body, what)
    data = _object(body, "data", what)
    ids = _message_id(data, "email_id", what) + _our_ref(data.get("tags"))
    recipients = _resend_recipients(data)
    if kind == "email.delivered":
        detail = _confirmed("resend", "email_id", ids)
        return [ProviderEvent("delivery", r, None, ids, detail, "resend") for r in recipients]
    if kind == "email.complained":
        return [ProviderEvent("complaint", r, None, ids, "Resend complaint", "resend")
                for r in recipients]
    bounce = data.get("bounce")
    bounce = bounce if isinstance(bounce, dict) else {}
    bounce_class = _text(bounce, "type", what, 100)
    sub_type = _text(bounce, "subType", what, 100)
    kind_text = "/".join(p for p in (bounce_class, sub_type) if p)
    detail = _detail(f"Resend {kind_text}:" if kind_text else "Resend bounce:",
                     _text(bounce, "message", what))
    bounce_type = "hard" if bounce_class == "Permanent" else "soft"
    return [ProviderEvent("bounce", r, bounce_type, ids, detail, "resend") for r in recipients]


# ------------------------------------------------------------------ Mailgun


def _mailgun_message_id(event: dict[str, Any]) -> tuple[str, ...]:
    message = event.get("message")
    headers = message.get("headers") if isinstance(message, dict) else None
    if not isinstance(headers, dict):
        return ()
    return _message_id(headers, "message-id", "The Mailgun event's message headers")


def _mailgun_failure(event: dict[str, Any], what: str) -> tuple[str, str] | None:
    """(hard|soft|complaint, words) for a `failed` event; None for a retry notice."""
    severity = _text(event, "severity", what, 50)
    reason = _text(event, "reason", what, 100)
    status = event.get("delivery-status")
    status = status if isinstance(status, dict) else {}
    said = _detail(_text(status, "code", what, 20),
                   _text(status, "message", what) or _text(status, "description", what))
    words = _detail(f"Mailgun {severity or 'failed'} failure" + (f" ({reason}):" if reason
                                                                 else ":"), said)
    if reason == "suppress-unsubscribe":
        return None  # Mailgun's own unsubscribe list (we send our own links): not a bounce
    if reason == "suppress-complaint":
        return "complaint", words
    if reason == "old":
        return "soft", words  # Mailgun gave up after retrying: one soft bounce
    if severity == "permanent":
        return "hard", words
    if severity == "temporary":
        return None  # Mailgun will try again; its outcome comes as another event
    return "soft", words


def parse_mailgun(body: dict[str, Any]) -> list[ProviderEvent]:
    """The `event-data` of a Mailgun webhook (its `signature` is checked beforehand):
    `delivered`, `failed` and `complained` are used, other events ignored."""
    what = "The Mailgun webhook"
    event = _object(body, "event-data", what)
    kind = event.get("event")
    if not isinstance(kind, str):
        raise BadPayload("The Mailgun event-data has no 'event'.")
    if kind not in ("delivered", "failed", "complained"):
        return []
    what = f"The Mailgun {kind} event"
    storable(body, what)
    email = _email(event, "recipient", what)
    ids = _mailgun_message_id(event)
    if kind == "delivered":
        return [ProviderEvent("delivery", email, None, ids,
                              _confirmed("mailgun", "message-id", ids), "mailgun")]
    if kind == "complained":
        return [ProviderEvent("complaint", email, None, ids, "Mailgun complaint", "mailgun")]
    failure = _mailgun_failure(event, what)
    if failure is None:
        return []
    outcome, words = failure
    if outcome == "complaint":
        return [ProviderEvent("complaint", email, None, ids, words, "mailgun")]
    return [ProviderEvent("bounce", email, outcome, ids, words, "mailgun")]
