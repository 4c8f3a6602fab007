"""A rendered email and its wire form: the multipart/alternative bytes the transports send.

Split from broadside.rendering (which re-exports these names) along the seam between what an
email says and how it travels: headers one line each and RFC 2047-encoded when not ASCII (a
merge field can never inject a header), parts as they are or quoted-printable.
"""

from __future__ import annotations

import binascii
import email.policy
import email.utils
import functools
import re
import secrets
from dataclasses import dataclass
from email.header import Header
from email.headerregistry import Address
from email.message import EmailMessage


@dataclass(frozen=True)
class RenderedEmail:
    subject: str
    html: str
    text: str


def format_address(name: str, address: str) -> str:
    """`Name <address>` for a From/To header, quoted as needed."""
    if not name:
        return address
    return str(Address(display_name=name, addr_spec=address))


def _header_value(value: str) -> str:
    """One line, and RFC 2047-encoded when not ASCII: merge fields (a subscriber's name in the
    subject) can never inject a header."""
    value = " ".join(str(value).replace("\r", " ").replace("\n", " ").split())
    if value.isascii():
        return value
    return Header(value, "utf-8", maxlinelen=998).encode(linesep="\r\n")


_PLAIN_ADDRESS = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9.-]+")


@functools.lru_cache(maxsize=64)
def _address_header(value: str) -> str:
    if _PLAIN_ADDRESS.fullmatch(value):
        return value  # the usual To: a bare, already validated address
    name, address = email.utils.parseaddr(value.replace("\r", " ").replace("\n", " "))
    return email.utils.formataddr((name, address), charset="utf-8") if name else address


# Quoted-printable works line by line (binascii.b2a_qp with istext: soft breaks, trailing
# whitespace and a lone "." are decided within a line, and the data has no "\r" left), so the
# encoding of a body is the encodings of its lines joined. Most lines of a broadcast are the
# same for every recipient (the layout, the owner's words): each is encoded once per process
# and looked up after that. Bounded by the bytes it holds; emptied when full.
_QP_LINES: dict[bytes, bytes] = {}
_QP_CACHE_BYTES = 8_000_000
_qp_cached = 0


def _quoted_printable(data: bytes) -> bytes:
    """`binascii.b2a_qp(data, istext=True)` with CRLF line ends, byte for byte, per line cached."""
    global _qp_cached
    lines = _QP_LINES
    out = []
    for line in data.splitlines(keepends=True):  # bytes split on \n only here (no \r left)
        encoded = lines.get(line)
        if encoded is None:
            encoded = binascii.b2a_qp(line, istext=True).replace(b"\n", b"\r\n")
            if _qp_cached + len(line) > _QP_CACHE_BYTES:
                lines.clear()
                _qp_cached = 0
            lines[line] = encoded
            _qp_cached += len(line) + len(encoded)
        out.append(encoded)
    return b"".join(out)


def _text_part(content_type: str, body: str) -> bytes:
    """One text part: as it is (7bit) when it is plain ASCII in lines of at most 998 octets,
    as the email package itself would choose; otherwise quoted-printable (which turns every
    "=" of the HTML into "=3D"; encoded per line, each distinct line once: `_quoted_printable`)."""
    data = body.replace("\r\n", "\n").replace("\r", "\n").encode("utf-8")
    if data.isascii() and b"\x00" not in data and max(map(len, data.split(b"\n"))) <= 998:
        encoding, encoded = "7bit", data.replace(b"\n", b"\r\n")
    else:
        encoding, encoded = "quoted-printable", _quoted_printable(data)
    return (f"Content-Type: {content_type}; charset=\"utf-8\"\r\n"
            f"Content-Transfer-Encoding: {encoding}\r\n\r\n").encode() + encoded


def message_bytes(rendered: RenderedEmail, *, from_addr: str, to_addr: str, message_id: str,
                  headers: dict[str, str]) -> bytes:
    """The wire form of a multipart/alternative message (text/plain first, then text/html:
    RFC 2046 order, clients show the last part they understand), CRLF line endings.

    Assembled directly rather than through `email.message`, whose header handling cost
    ~3 ms a message: this is the worker's per-recipient hot path.
    """
    boundary = f"=_broadside_{secrets.token_hex(12)}"
    lines = [
        f"Subject: {_header_value(rendered.subject)}",
        f"From: {_address_header(from_addr)}",
        f"To: {_address_header(to_addr)}",
        f"Date: {email.utils.formatdate(usegmt=True)}",
        f"Message-ID: {message_id if message_id.startswith('<') else f'<{message_id}>'}",
        "MIME-Version: 1.0",
        *(f"{name}: {_header_value(value)}" for name, value in headers.items()),
        f'Content-Type: multipart/alternative; boundary="{boundary}"',
    ]
    delimiter = f"\r\n--{boundary}\r\n".encode()
    return b"".join([
        "\r\n".join(lines).encode("ascii"), b"\r\n", delimiter,
        _text_part("text/plain", rendered.text), delimiter,
        _text_part("text/html", rendered.html), f"\r\n--{boundary}--\r\n".encode(),
    ])


def build_message(rendered: RenderedEmail, *, from_addr: str, to_addr: str, message_id: str,
                  headers: dict[str, str]) -> EmailMessage:
    """The same message as `message_bytes`, parsed back into an object (for previews, tests)."""
    raw = message_bytes(rendered, from_addr=from_addr, to_addr=to_addr, message_id=message_id,
                        headers=headers)
    return email.message_from_bytes(raw, policy=email.policy.default)
