"""What one message in a bounce mailbox says: a hard or soft bounce, a complaint, or nothing
we understand; and what it names of ours. Pure: bytes in, a `Report` out, no database.

- Delivery status notifications (RFC 3464) and the common non-standard bounces (Exim's and
  qmail's text, and the many others Mailman 3 knows) through `flufl.bounce`'s detectors
  (`all_failures`: temporary and permanent addresses); a DSN's own `Status` refines it: a
  4.x.x status is a soft bounce whatever its Action says.
- Complaints: an ARF feedback report (RFC 5965: multipart/report; report-type=feedback-report,
  its message/feedback-report part) read with the email package.
- What it names: the rows of the verified VERP tokens in it (broadside.mail.verp: the
  Return-Path we sent with comes back in the bounce's To, Delivered-To or the quoted
  headers), and else the Message-IDs of ours it quotes (broadside.mail.message_refs), which
  the caller accepts only for the address the bounce reports failed.
"""

from __future__ import annotations

import email
import hashlib
import logging
import re
from dataclasses import dataclass, field
from email.message import Message

from flufl.bounce import all_failures

from broadside.mail.message_refs import row_of
from broadside.mail.verp import Verp

log = logging.getLogger("broadside.feedback")

HARD, SOFT, COMPLAINT = "hard", "soft", "complaint"
_OUR_IDS = re.compile(r"<broadside[._][dmt]\d{1,18}(?:[._][ab]\d{1,18})?@[^>\s]{1,253}>", re.I)
_STATUS = re.compile(r"^\s*([245])\.\d{1,3}\.\d{1,3}")
MAX_DETAIL = 300
MAX_MESSAGE_KEY = 250


@dataclass(frozen=True)
class Report:
    kind: str | None  # hard, soft, complaint; None: not understood
    rows: list[tuple[str, int]] = field(default_factory=list)  # from verified VERP tokens
    message_ids: list[str] = field(default_factory=list)  # ours, quoted in it
    addresses: list[str] = field(default_factory=list)  # reported failed (lowercased)
    detail: str = ""
    message_key: str = ""  # its Message-ID, else sha256:<hex> of the bytes


def message_key(message: Message, raw: bytes) -> str:
    value = " ".join(str(message.get("Message-ID", "") or "").split())
    if value and len(value) <= MAX_MESSAGE_KEY:
        return value
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _lower(addresses: object) -> list[str]:
    found: list[str] = []
    for value in addresses or ():  # type: ignore[attr-defined]
        text = (value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value))
        text = text.strip().strip("<>").lower()
        if text and text not in found:
            found.append(text)
    return found


def _failures(message: Message) -> tuple[list[str], list[str]]:
    """flufl.bounce's (temporary, permanent) addresses; a detector that trips on a message
    (an IndexError on one without From:, see FIELD-NOTES) finds nothing."""
    try:
        temporary, permanent = all_failures(message)
    except Exception as exc:
        log.info("flufl.bounce could not read a mailbox message: %s", exc.__class__.__name__)
        return [], []
    return _lower(temporary), _lower(permanent)


def _parts(message: Message, content_type: str) -> list[Message]:
    return [part for part in message.walk() if part.get_content_type() == content_type]


def _dsn(message: Message) -> tuple[list[str], str]:
    """The status classes ("4", "5") of a DSN's recipients, and its first diagnostic."""
    classes: list[str] = []
    diagnostic = ""
    for part in _parts(message, "message/delivery-status"):
        blocks = part.get_payload()
        for block in blocks if isinstance(blocks, list) else []:
            if not isinstance(block, Message):
                continue
            match = _STATUS.match(str(block.get("Status", "") or ""))
            if match:
                classes.append(match.group(1))
                code = " ".join(str(block.get("Diagnostic-Code", "") or "").split())
                said = code.partition(";")[2].strip()
                diagnostic = diagnostic or (said if match.group(0).strip() in said
                                            else f"{match.group(0).strip()} {said}".strip())
    return classes, diagnostic


def _complaint(message: Message) -> tuple[bool, list[str], str]:
    """Whether it is an ARF report of a complaint, the original recipients, its type."""
    report_type = message.get_param("report-type")
    if (message.get_content_type() != "multipart/report" or not isinstance(report_type, str)
            or report_type.lower() != "feedback-report"):
        return False, [], ""
    for part in _parts(message, "message/feedback-report"):
        fields = part.get_payload()
        first = fields[0] if isinstance(fields, list) and fields else None
        block = (first if isinstance(first, Message)
                 else email.message_from_string(str(part.get_payload())))
        kind = str(block.get("Feedback-Type", "") or "").strip().lower()
        if kind and kind != "not-spam":
            recipients = _lower(block.get_all("Original-Rcpt-To") or [])
            return True, recipients, kind
    return False, [], ""


def read_report(raw: bytes, verp: Verp) -> Report:
    """What the message says and names (see the module's docstring)."""
    message = email.message_from_bytes(raw)
    text = raw.decode("latin-1")
    rows = verp.rows_in(text)
    ours = [m.group(0) for m in _OUR_IDS.finditer(text) if row_of(m.group(0).strip("<>"))]
    ours = list(dict.fromkeys(ours))
    key = message_key(message, raw)
    complaint, recipients, feedback_type = _complaint(message)
    if complaint:
        detail = f"spam complaint ({feedback_type} report)"[:MAX_DETAIL]
        return Report(COMPLAINT, rows, ours, recipients, detail, key)
    temporary, permanent = _failures(message)
    classes, diagnostic = _dsn(message)
    if not temporary and not permanent:
        return Report(None, rows, ours, [], "", key)
    if permanent and not (classes and all(c == "4" for c in classes)):
        kind, addresses = HARD, permanent
    else:
        kind, addresses = SOFT, temporary or permanent
    sender = " ".join(str(message.get("From", "") or "").split())[:80]
    detail = diagnostic or f"{'permanent' if kind == HARD else 'temporary'} failure reported by {sender}"
    return Report(kind, rows, ours, addresses, detail[:MAX_DETAIL], key)
