"""A message signed with DKIM (RFC 6376) by dkimpy: the DKIM-Signature header to prepend.

`DkimSigner.header(message)` signs one message's bytes as they will be delivered (CRLF lines,
before SMTP's dot-stuffing) with the identity's selector and key, for the domain of the
message's From address (so a transactional message's own sender is signed for its domain).
The signed headers (`h=`) are those a recipient's provider judges and the one-click
unsubscribe needs (RFC 8058 asks for both List-Unsubscribe headers to be signed).

Canonicalization is relaxed/relaxed: relays refold headers and touch whitespace at line ends,
and relaxed survives both while still covering every word; simple/simple breaks on the first
such relay. The key is checked when saved (broadside.mail.dkim_keys) but read again here: a
key that cannot sign raises `DkimFailure` (the transport makes it a channel-wide refusal:
nothing is sent unsigned).
"""

from __future__ import annotations

import re
from email.utils import parseaddr

import dkim  # type: ignore[import-untyped]

SIGNED_HEADERS = (b"From", b"Subject", b"List-Unsubscribe", b"List-Unsubscribe-Post",
                  b"Message-ID", b"To", b"Date", b"MIME-Version", b"Content-Type", b"Reply-To")
CANONICALIZATION = (b"relaxed", b"relaxed")
# The From header (with its folded lines) in the header block.
_FROM = re.compile(rb"^From:[ \t]*(.*(?:\r?\n[ \t].*)*)", re.IGNORECASE | re.MULTILINE)


class DkimFailure(Exception):
    """The message could not be signed: `words` say why, for the owner."""

    def __init__(self, words: str) -> None:
        super().__init__(words)
        self.words = words


class DkimSigner:
    def __init__(self, selector: str, private_key: str) -> None:
        self.selector = selector.encode("ascii", "replace")
        self.private_key = private_key.encode("ascii", "replace")
        self._domains: dict[bytes, bytes] = {}  # a From header's value -> its domain

    def _domain(self, message: bytes) -> bytes:
        end = message.find(b"\r\n\r\n")
        found = _FROM.search(message, 0, end if end >= 0 else len(message))
        value = found.group(1) if found else b""
        domain = self._domains.get(value)
        if domain is None:
            address = parseaddr(value.decode("utf-8", "replace"))[1]
            domain = address.rpartition("@")[2].strip().lower().encode("ascii", "replace")
            if not address or not domain:
                raise DkimFailure("Broadside did not send it: the message has no From address "
                                  "to sign for with DKIM.")
            self._domains[value] = domain
        return domain

    def header(self, message: bytes) -> bytes:
        """The DKIM-Signature header (ending in CRLF) for `message`; DkimFailure when the key
        or the message cannot be signed."""
        domain = self._domain(message)
        try:
            return bytes(dkim.sign(message, self.selector, domain, self.private_key,
                                   canonicalize=CANONICALIZATION,
                                   include_headers=list(SIGNED_HEADERS)))
        except dkim.DKIMException:
            raise DkimFailure(
                "Broadside did not send it: the DKIM private key of this identity cannot sign "
                "(it is damaged or not an RSA key). Nothing is sent unsigned: paste a working "
                "key or generate a new one (and publish its TXT record), then press Resume."
            ) from None
