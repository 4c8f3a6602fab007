"""The sample bounces of tests/fixtures/bounces/, filled for one message we sent."""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).parent / "fixtures" / "bounces"

# Each sample, and what reading it must find.
EXPECTED = {
    "postfix_dsn.eml": "hard",
    "exim_text.eml": "hard",
    "gmail_dsn.eml": "hard",
    "outlook_dsn.eml": "hard",
    "qmail.eml": "hard",
    "soft_mailbox_full.eml": "soft",
    "arf_complaint.eml": "complaint",
    "out_of_office.eml": None,
}
FORMATS = tuple(EXPECTED)


def fill(name: str, *, verp: str, rcpt: str, message_id: str, n: int = 1) -> bytes:
    """The sample `name` as the bounce of the message `message_id` sent to `rcpt` with the
    Return-Path `verp`; `n` makes its own Message-ID unique."""
    text = (FOLDER / name).read_text()
    for placeholder, value in (("{VERP}", verp), ("{RCPT}", rcpt), ("{MESSAGE_ID}", message_id),
                               ("{N}", str(n))):
        text = text.replace(placeholder, value)
    return text.replace("\n", "\r\n").encode()
