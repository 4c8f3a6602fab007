"""VERP: the envelope sender (Return-Path) of an SMTP identity with a bounce mailbox names the
message it carried, so its bounce names the row even when the receiving server rewrites or
drops everything else in it:

    <local>+<kind><row id>-<mark>@<domain>        e.g.  bounces+d1234-k3m9xq2ta7pe@example.com

`kind` is the Message-ID's letter (broadside.mail.message_refs: d a broadcast's delivery,
m an automation message, t a transactional message), `mark` the first MARK_LENGTH characters
of an HMAC-SHA256 of "<kind><id>" under a key derived from SECRET_KEY, in base32's lowercase
letters and digits: some servers lowercase a local part, so nothing here depends on case. A
token whose mark does not verify names nothing (`row_of_token`): only this installation can
make one, so a forged bounce cannot suppress anyone by a guessed row id.

`<local>` is the mailbox login's local part when the login is an address (plus-addressing
delivers `returns+…@example.com` to `returns@example.com`), else `bounces`; `<domain>` the
identity's VERP domain when set, else the login's domain, else the IMAP host
(broadside.core.mailbox_urls.verp_parts). Providers' HTTP APIs have their own bounce
webhooks: VERP is for SMTP identities only (the caller decides).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

from broadside.mail.message_refs import KINDS, row_of

MARK_LENGTH = 12  # 60 bits: a guess is one in 10^18
_TOKEN = re.compile(rf"\+([dmt])(\d{{1,18}})-([a-z2-7]{{{MARK_LENGTH}}})@", re.IGNORECASE)
_LETTER = {kind: letter for letter, kind in KINDS.items()}


class Verp:
    """Makes and checks the tokens of one installation (its SECRET_KEY)."""

    def __init__(self, secret_key: str) -> None:
        self.key = hmac.new(secret_key.encode(), b"broadside verp return path",
                            hashlib.sha256).digest()

    def _mark(self, letter: str, row_id: int) -> str:
        digest = hmac.new(self.key, f"{letter}{row_id}".encode(), hashlib.sha256).digest()
        return base64.b32encode(digest).decode().lower()[:MARK_LENGTH]

    def token(self, message_id: str) -> str | None:
        """`d1234-k3m9xq2ta7pe` for one of our Message-IDs, None for another."""
        named = row_of(message_id)
        if named is None:
            return None
        letter = _LETTER[named[0]]
        return f"{letter}{named[1]}-{self._mark(letter, named[1])}"

    def address(self, message_id: str, local: str, domain: str) -> str | None:
        """The envelope sender for the message with this Message-ID (None: not ours)."""
        token = self.token(message_id)
        return None if token is None else f"{local}+{token}@{domain}"

    def rows_in(self, text: str) -> list[tuple[str, int]]:
        """Every (kind, row id) a verified token in `text` names, in order, once each; a
        token whose mark is wrong is ignored."""
        found: list[tuple[str, int]] = []
        for match in _TOKEN.finditer(text):
            letter, number, mark = match.group(1).lower(), match.group(2), match.group(3).lower()
            row_id = int(number)
            if hmac.compare_digest(mark, self._mark(letter, row_id)):
                named = (KINDS[letter], row_id)
                if named not in found:
                    found.append(named)
        return found


class ReturnPath:
    """One SMTP identity's envelope sender: the VERP address of each message of ours, the
    From address for anything else."""

    def __init__(self, verp: Verp, local: str, domain: str) -> None:
        self.verp, self.local, self.domain = verp, local, domain

    def mail_from(self, message_id: str, from_email: str) -> str:
        return self.verp.address(message_id, self.local, self.domain) or from_email
