"""A message's fields for a JSON API (Postmark, Resend), parsed back from its MIME bytes when
the worker gave none (a single send): the From, To, Subject, bodies, the headers it carries
(List-Unsubscribe and the rest) and its attachments. Split from `http.py`, which re-exports
`fields_of` and `mime_fields`."""

from __future__ import annotations

import email.policy
import email.utils
import re
from email.header import decode_header, make_header
from email.message import Message
from email.parser import BytesParser

from broadside.delivery.transports import MessageFields, Outgoing
from broadside.mail.mime import MailAttachment

MimeFields = MessageFields  # (the name this module's callers know)

# ------------------------------------------------------------------ MIME -> JSON fields

# Headers the JSON APIs take as fields of their own, or that describe the MIME structure.
_NOT_CARRIED = {"from", "to", "cc", "bcc", "subject", "date", "mime-version", "reply-to", "sender",
                "return-path", "received"}
# compat32 rather than email.policy.default: this runs for every message of a batch, and the
# default policy's header objects cost ~5 ms a message (2.5 s for a Postmark batch of 500);
# decoding the few headers we use ourselves costs ~0.2 ms.
_PARSER = BytesParser(policy=email.policy.compat32)
_FOLD = re.compile(r"\r?\n(?=[ \t])")
_SPECIALS = re.compile(r'[()<>\[\]:;@\\,."]')


def fields_of(item: Outgoing) -> MimeFields:
    """The JSON API's fields of a message: as the worker built them (no parsing), or parsed
    back from the MIME message when it gave none."""
    return item.fields if item.fields is not None else mime_fields(item.message, item.rcpt)


def mime_fields(message: bytes, rcpt: str) -> MimeFields:
    parsed = _PARSER.parsebytes(message)
    to = email.utils.getaddresses([_raw(parsed, "To")])
    text, html = _bodies(parsed)
    return MimeFields(
        sender=_addresses(_raw(parsed, "From")),
        to=_addresses(_raw(parsed, "To")) if [a.lower() for _, a in to] == [rcpt.lower()] else rcpt,
        subject=_decoded(_raw(parsed, "Subject")),
        text=text,
        html=html,
        reply_to=_addresses(_raw(parsed, "Reply-To")) or None,
        headers=[(name, _decoded(_unfold(str(value)))) for name, value in parsed.items()
                 if name.lower() not in _NOT_CARRIED and not name.lower().startswith("content-")],
        attachments=_attachments(parsed),
    )


def _attachments(message: Message) -> tuple[MailAttachment, ...]:
    """The parts sent as attachments (Content-Disposition: attachment), their names decoded
    from RFC 2231 or 2047, in order."""
    if not message.is_multipart():
        return ()
    found = []
    for part in message.walk():
        if not str(part.get("Content-Disposition", "")).lower().startswith("attachment"):
            continue
        payload = part.get_payload(decode=True)
        name = part.get_filename() or "attachment"
        found.append(MailAttachment(name=_decoded(name), content_type=part.get_content_type(),
                                    data=payload if isinstance(payload, bytes) else b""))
    return tuple(found)


def _unfold(value: str) -> str:
    return _FOLD.sub("", value).strip()


def _raw(message: Message, name: str) -> str:
    value = message.get(name)
    return _unfold(str(value)) if value is not None else ""


def _decoded(value: str) -> str:
    """RFC 2047 encoded words decoded (a subject with a subscriber's name, say)."""
    return str(make_header(decode_header(value))) if "=?" in value else value


def _addresses(value: str) -> str:
    """An address header as JSON APIs take it: `Name <address>`, the name decoded and quoted
    when it needs to be (parsed before decoding, so a decoded comma splits nothing)."""
    shown = []
    for name, address in email.utils.getaddresses([value]) if value else []:
        name = _decoded(name)
        if name and _SPECIALS.search(name):
            name = '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
        shown.append(f"{name} <{address}>" if name else address)
    return ", ".join(shown)


def _bodies(message: Message) -> tuple[str | None, str | None]:
    """The first text/plain and the first text/html part that are not attachments."""
    found: dict[str, str] = {}
    for part in message.walk():
        kind = part.get_content_type()
        if kind not in ("text/plain", "text/html") or kind in found:
            continue
        if str(part.get("Content-Disposition", "")).lower().startswith("attachment"):
            continue
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            continue
        charset = part.get_content_charset() or "utf-8"
        try:
            content = payload.decode(charset, "replace")
        except LookupError:  # a charset Python does not know
            content = payload.decode("utf-8", "replace")
        found[kind] = content.replace("\r\n", "\n")
    return found.get("text/plain"), found.get("text/html")
