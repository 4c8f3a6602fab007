"""Provider events, parsed and checked before anything is written.

Here: Broadside's generic JSON (one event per request) and Amazon SES notifications (inside an
SNS message; one notification may name several recipients). Postmark's, Resend's and
Mailgun's own shapes are in broadside.feedback.provider_payloads; all become `ProviderEvent`s,
which broadside.feedback.service applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import parseaddr
from typing import Any

from broadside.core.addresses import normalise_email
from broadside.core.errors import DomainError, ValidationError
from broadside.core.json_input import json_within, refuse_unstorable

MAX_DETAIL = 1000
MAX_MESSAGE_ID = 250
MAX_EVENT_ID = 200
MAX_DEPTH = 16  # providers' events nest 5 deep at most (Mailgun's event-data.message.headers)


class BadPayload(DomainError):
    """The body is not JSON, or not an event we understand: 400, nothing written."""

    status_code = 400


@dataclass(frozen=True)
class ProviderEvent:
    type: str  # bounce | complaint | delivery
    email: str
    bounce_type: str | None = None  # hard | soft, for bounces
    # Our Message-ID header and/or the provider's own id for the message (what its API
    # answered, kept as `provider_message_id`): either finds what was sent.
    message_ids: tuple[str, ...] = ()
    # A delivery's detail is the evidence in words: "confirmed by postmark's delivery event
    # (MessageID …)".
    detail: str = ""
    source: str = "webhook"  # webhook (the generic endpoint) | ses | postmark | resend | mailgun
    event_id: str = ""  # the generic payload's `id`: a redelivery with the same id counts once


def json_object(raw: bytes | str, what: str) -> dict[str, Any]:
    """A JSON object read within bounds (broadside.core.json_input: at most MAX_DEPTH deep, no
    NaN), or a BadPayload (400) saying what is wrong, before anything else is done with it."""
    try:
        data = json_within(raw, what=what, max_depth=MAX_DEPTH)
    except ValidationError as exc:
        raise BadPayload(exc.message) from None
    if not isinstance(data, dict):
        raise BadPayload(f"{what} must be a JSON object.")
    return data


def storable(data: Any, what: str) -> None:
    """BadPayload (400) naming the field when a string of an event, once its sender is proved,
    holds a NUL or a lone surrogate: the whole event is refused before anything is written
    (PostgreSQL refuses NUL in text, and no driver encodes a lone surrogate). Refused rather
    than cleaned: no provider sends either, and an address or an id cleaned would name
    someone or something else."""
    try:
        refuse_unstorable(data, what)
    except ValidationError as exc:
        raise BadPayload(exc.message) from None


def _optional_text(data: dict[str, Any], key: str, limit: int | None = None) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadPayload(f"{key!r} must be a string.")
    if limit is not None and len(value) > limit:
        raise BadPayload(f"{key!r} is longer than {limit} characters.")
    return value


def parse_generic(raw: bytes) -> ProviderEvent:
    """`{"id": str, "type": "bounce"|"complaint", "email": str, "bounce_type": "hard"|"soft"?,
    "message_id": str?, "detail": str?}`. A bounce without `bounce_type` counts as hard:
    a provider that does not classify reports final failures. `id` names the event (the
    provider's own event id, or any unique string): a delivery whose id was seen before is
    acknowledged and changes nothing."""
    data = json_object(raw, "The body")
    storable(data, "The event")
    event_id = data.get("id")
    if (not isinstance(event_id, str) or not event_id.strip() or len(event_id) > MAX_EVENT_ID
            or not event_id.isprintable()):
        raise BadPayload(f"'id' must be a non-empty printable string of at most {MAX_EVENT_ID} "
                         "characters, unique to the event: a redelivery with the same id "
                         "counts once.")
    kind = data.get("type")
    if kind not in ("bounce", "complaint"):
        raise BadPayload("'type' must be \"bounce\" or \"complaint\".")
    email = data.get("email")
    if not isinstance(email, str) or not email.strip():
        raise BadPayload("'email' must be a non-empty string.")
    try:
        email = normalise_email(email)
    except ValidationError as exc:
        raise BadPayload(exc.message) from None
    bounce_type = data.get("bounce_type")
    if kind == "bounce":
        bounce_type = bounce_type or "hard"
        if bounce_type not in ("hard", "soft"):
            raise BadPayload("'bounce_type' must be \"hard\" or \"soft\".")
    elif bounce_type is not None:
        raise BadPayload("'bounce_type' belongs to bounces only.")
    message_id = _optional_text(data, "message_id", MAX_MESSAGE_ID)
    detail = _optional_text(data, "detail") or ""
    return ProviderEvent(
        type=kind, email=email, bounce_type=bounce_type if kind == "bounce" else None,
        message_ids=(message_id,) if message_id else (), detail=detail[:MAX_DETAIL],
        event_id=event_id,
    )


def _ses_message_ids(mail: Any) -> tuple[str, ...]:
    """Our Message-ID header first (what the pipeline stores), then SES's own id."""
    if not isinstance(mail, dict):
        return ()
    ids: list[str] = []
    common = mail.get("commonHeaders")
    if isinstance(common, dict) and isinstance(common.get("messageId"), str):
        ids.append(common["messageId"])
    for header in mail.get("headers") or []:
        if (isinstance(header, dict) and str(header.get("name", "")).lower() == "message-id"
                and isinstance(header.get("value"), str)):
            ids.append(header["value"])
    if isinstance(mail.get("messageId"), str):
        ids.append(mail["messageId"])
    return tuple(dict.fromkeys(i for i in ids if len(i) <= MAX_MESSAGE_ID))


def address_of(raw: Any) -> str | None:
    if not isinstance(raw, str):
        return None
    address = parseaddr(raw)[1].strip()
    return address or None


def _recipients(section: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = section.get(key)
    if not isinstance(value, list):
        raise BadPayload(f"The SES notification has no {key} list.")
    return [r for r in value if isinstance(r, dict)]


def parse_ses_notification(message: str) -> list[ProviderEvent]:
    """The `Message` of an SNS notification from SES (notifications or event publishing).

    Bounce `Permanent` is hard; `Transient` and `Undetermined` are soft. Complaints suppress.
    A `Delivery` resets the soft-bounce count and settles a row left `unknown` (found by
    `mail.messageId`, SES's id, or our Message-ID: broadside.feedback.settle). Other types
    (Send, Open, ...) are ignored.
    """
    data = json_object(message, "The SNS Message")
    kind = data.get("notificationType") or data.get("eventType")
    if kind in ("Bounce", "Complaint", "Delivery"):
        storable(data, f"The SES {str(kind).lower()} notification")
    message_ids = _ses_message_ids(data.get("mail"))
    events: list[ProviderEvent] = []
    if kind == "Bounce":
        bounce = data.get("bounce")
        if not isinstance(bounce, dict):
            raise BadPayload("The SES bounce notification has no 'bounce' object.")
        hard = bounce.get("bounceType") == "Permanent"
        kind_text = "/".join(str(bounce.get(k)) for k in ("bounceType", "bounceSubType")
                             if bounce.get(k))
        for recipient in _recipients(bounce, "bouncedRecipients"):
            address = address_of(recipient.get("emailAddress"))
            if address:
                reason = recipient.get("diagnosticCode") or recipient.get("status") or ""
                detail = " ".join(p for p in (f"SES {kind_text}".strip(), str(reason)) if p)
                events.append(ProviderEvent("bounce", address, "hard" if hard else "soft",
                                            message_ids, detail[:MAX_DETAIL], "ses"))
    elif kind == "Complaint":
        complaint = data.get("complaint")
        if not isinstance(complaint, dict):
            raise BadPayload("The SES complaint notification has no 'complaint' object.")
        feedback = complaint.get("complaintFeedbackType") or complaint.get("complaintSubType")
        detail = f"SES complaint ({feedback})" if feedback else "SES complaint"
        for recipient in _recipients(complaint, "complainedRecipients"):
            address = address_of(recipient.get("emailAddress"))
            if address:
                events.append(ProviderEvent("complaint", address, None, message_ids,
                                            detail[:MAX_DETAIL], "ses"))
    elif kind == "Delivery":
        delivery = data.get("delivery")
        recipients = delivery.get("recipients") if isinstance(delivery, dict) else None
        mail = data.get("mail")
        ses_id = mail.get("messageId") if isinstance(mail, dict) else None
        detail = "confirmed by ses's delivery event" + (
            f" (messageId {ses_id})" if isinstance(ses_id, str) and ses_id else "")
        for raw in recipients if isinstance(recipients, list) else []:
            address = address_of(raw)
            if address:
                events.append(ProviderEvent("delivery", address, None, message_ids,
                                            detail[:MAX_DETAIL], "ses"))
    elif not isinstance(kind, str):
        raise BadPayload("The SNS Message is not an SES notification.")
    return events
