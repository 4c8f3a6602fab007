"""A rendered email and its wire form: the multipart/alternative bytes the transports send
(inside a multipart/mixed with the files after it, when the message carries attachments).

Split from broadside.mail.rendering (which re-exports these names) along the seam between what an
email says and how it travels: headers one line each and RFC 2047-encoded when not ASCII (a
merge field can never inject a header), parts as they are or quoted-printable.
"""

from __future__ import annotations

import base64
import binascii
import email.base64mime
import email.charset
import email.policy
import email.quoprimime
import email.utils
import functools
import re
import secrets
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from email.header import Header
from email.headerregistry import Address
from email.message import EmailMessage

from broadside.core.addresses import wire_address


@dataclass(frozen=True)
class RenderedEmail:
    subject: str
    html: str
    text: str


@dataclass(frozen=True, eq=False)
class MailAttachment:
    """A file sent with a message (broadside.mail.attachments decided its type). Its MIME part
    and its base64 are made once, on first use, and shared by every copy that carries it."""

    name: str
    content_type: str
    data: bytes

    @functools.cached_property
    def base64(self) -> str:
        """The bytes in base64, one line (the JSON APIs' `Content`/`content`)."""
        return base64.b64encode(self.data).decode("ascii")

    @functools.cached_property
    def mime_part(self) -> bytes:
        """The part's headers and body: base64 in lines of 76, the name in `filename` (RFC
        2183), written as RFC 2231 says when it is not plain ASCII; a text file is UTF-8
        (broadside.mail.attachments checked it)."""
        body = base64.encodebytes(self.data).replace(b"\n", b"\r\n")
        name = _parameter("name", self.name)
        filename = _parameter("filename", self.name)
        charset = '; charset="utf-8"' if self.content_type.startswith("text/") else ""
        return (f"Content-Type: {self.content_type}{charset}; {name}\r\n"
                f"Content-Disposition: attachment; {filename}\r\n"
                "Content-Transfer-Encoding: base64\r\n\r\n").encode("ascii") + body


_SAFE_NAME = re.compile(r"[A-Za-z0-9 ._()+,-]{1,200}")


def _parameter(key: str, value: str) -> str:
    """`key="value"` when the value is plain and short; else RFC 2231's
    `key*=utf-8''percent-encoded` (a header line stays within 998 octets: names are at most
    200 characters, 1,800 octets encoded, so a long one is split in RFC 2231 sections)."""
    if _SAFE_NAME.fullmatch(value):
        return f'{key}="{value}"'
    encoded = urllib.parse.quote(value, safe="")
    if len(encoded) <= 900:
        return f"{key}*=utf-8''{encoded}"
    sections, rest, index = [], encoded, 0
    while rest:
        cut = 900
        while cut < len(rest) and "%" in rest[cut - 2:cut]:  # never split a %XX
            cut -= 1
        piece, rest = rest[:cut], rest[cut:]
        charset = "utf-8''" if index == 0 else ""
        sections.append(f"{key}*{index}*={charset}{piece}")
        index += 1
    return ";\r\n ".join(sections)


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
    return _encoded_word(value)


# RFC 2047 chrome around a utf-8 encoded word: "=?utf-8?b?" ... "?=".
_WORD_ROOM = 998 - len("utf-8") - email.charset.RFC2047_CHROME_LEN


def _encoded_word(value: str) -> str:
    """`Header(value, "utf-8", maxlinelen=998).encode()` for a one-line value.

    Header picks, for the whole value, the shorter of base64 and Q encoding (utf-8's
    SHORTEST), then fits the value into lines by encoding every prefix of it, one character
    more each time (~200 µs for a subject: a person's non-ASCII name in it paid that per
    message). Each encoding's length only grows with the prefix, so when the whole value fits
    in the first line no split happens and the result is the one encoded word made here.
    Anything longer is left to Header itself."""
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError:
        data = b""  # Header raises its own error for it
    if data:
        b_length = email.base64mime.header_length(data)
        q_length = email.quoprimime.header_length(data)
        if b_length < q_length and b_length <= _WORD_ROOM:
            return email.base64mime.header_encode(data, "utf-8")
        if b_length >= q_length and q_length <= _WORD_ROOM:
            return email.quoprimime.header_encode(data, "utf-8")
    return Header(value, "utf-8", maxlinelen=998).encode(linesep="\r\n")


_PLAIN_ADDRESS = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9.-]+")


@functools.lru_cache(maxsize=64)
def _address_header(value: str) -> str:
    """A From/To value: the domain as its A-label (IDNA 2008: readable by every server), a
    display name RFC 2047-encoded when not ASCII, and a local part outside ASCII as UTF-8
    (RFC 6532: such a message goes only to a server that offers SMTPUTF8, which the
    transports check before anything is sent)."""
    if _PLAIN_ADDRESS.fullmatch(value):
        return value  # the usual To: a bare, already validated address
    name, address = email.utils.parseaddr(value.replace("\r", " ").replace("\n", " "))
    address = wire_address(address)
    if not name:
        return address
    if address.isascii():
        return email.utils.formataddr((name, address), charset="utf-8")
    # formataddr refuses a local part outside ASCII: the name as it writes it, our address.
    shown = email.utils.formataddr((name, "x@x"), charset="utf-8")
    return f"{shown[:-len('<x@x>')]}<{address}>"


# Quoted-printable works line by line (binascii.b2a_qp with istext: soft breaks, trailing
# whitespace and a lone "." are decided within a line, and the data has no "\r" left), so the
# encoding of a body is the encodings of its lines joined. Most lines of a broadcast are the
# same for every recipient (the layout, the owner's words): each is encoded once per process
# and looked up after that. Bounded by the bytes it holds; emptied when full.
_QP_LINES: dict[bytes, bytes] = {}
_QP_CACHE_BYTES = 8_000_000
_qp_cached = 0


def _quoted_printable(data: bytes, lines: list[bytes] | None = None) -> bytes:
    """`binascii.b2a_qp(data, istext=True)` with CRLF line ends, byte for byte, per line cached.
    `lines`: `data.split(b"\n")` when the caller has it already (data has no "\r" left)."""
    global _qp_cached
    cache = _QP_LINES
    if lines is None:
        lines = data.split(b"\n")
    # Every line but the last ends with "\n" in `data`; a cached line is keyed by its text and
    # encoded with its "\n" (how b2a_qp treats trailing whitespace depends on what follows).
    out = []
    for line in lines[:-1]:
        encoded = cache.get(line)
        if encoded is None:
            encoded = binascii.b2a_qp(line + b"\n", istext=True).replace(b"\n", b"\r\n")
            if _qp_cached + len(line) > _QP_CACHE_BYTES:
                cache.clear()
                _qp_cached = 0
            cache[line] = encoded
            _qp_cached += len(line) + len(encoded)
        out.append(encoded)
    if lines[-1]:  # text after the last "\n" (none when data ends with one)
        out.append(binascii.b2a_qp(lines[-1], istext=True).replace(b"\n", b"\r\n"))
    return b"".join(out)


def _text_part(content_type: str, body: str) -> bytes:
    """One text part: as it is (7bit) when it is plain ASCII in lines of at most 998 octets,
    as the email package itself would choose; otherwise quoted-printable (which turns every
    "=" of the HTML into "=3D"; encoded per line, each distinct line once: `_quoted_printable`)."""
    if "\r" in body:
        body = body.replace("\r\n", "\n").replace("\r", "\n")
    data = body.encode("utf-8")
    lines = data.split(b"\n")
    if data.isascii() and b"\x00" not in data and max(map(len, lines)) <= 998:
        encoding, encoded = "7bit", data.replace(b"\n", b"\r\n")
    else:
        encoding, encoded = "quoted-printable", _quoted_printable(data, lines)
    return (f"Content-Type: {content_type}; charset=\"utf-8\"\r\n"
            f"Content-Transfer-Encoding: {encoding}\r\n\r\n").encode() + encoded


_dates: list = [None, -1, ""]  # (formatdate, second, its text): the last Date made


def _date() -> str:
    """`formatdate(usegmt=True)`, made once per second rather than per message (the second it
    names is the one now is in). Keyed by the function too, so a replaced one is called."""
    second = int(time.time())
    format_date = email.utils.formatdate
    if _dates[0] is not format_date or _dates[1] != second:
        _dates[:] = [format_date, second, format_date(second, usegmt=True)]
    return _dates[2]


def message_bytes(rendered: RenderedEmail, *, from_addr: str, to_addr: str, message_id: str,
                  headers: dict[str, str], attachments: Sequence[MailAttachment] = ()) -> bytes:
    """The wire form of a multipart/alternative message (text/plain first, then text/html:
    RFC 2046 order, clients show the last part they understand), CRLF line endings. With
    `attachments`, a multipart/mixed: that alternative first, then each file.

    Assembled directly rather than through `email.message`, whose header handling cost
    ~3 ms a message: this is the worker's per-recipient hot path.
    """
    if attachments:
        return _mixed_bytes(rendered, from_addr, to_addr, message_id, headers, attachments)
    boundary = f"=_broadside_{secrets.token_hex(12)}"
    delimiter = f"\r\n--{boundary}\r\n".encode()
    return b"".join([
        _head(rendered.subject, from_addr, to_addr, message_id, headers, boundary), b"\r\n",
        delimiter, _text_part("text/plain", rendered.text), delimiter,
        _text_part("text/html", rendered.html), f"\r\n--{boundary}--\r\n".encode(),
    ])


def _mixed_bytes(rendered: RenderedEmail, from_addr: str, to_addr: str, message_id: str,
                 headers: dict[str, str], attachments: Sequence[MailAttachment]) -> bytes:
    """multipart/mixed: the multipart/alternative of the text and HTML, then each file's part
    (made once per file, `MailAttachment.mime_part`)."""
    token = secrets.token_hex(12)
    outer, inner = f"=_broadside_{token}_m", f"=_broadside_{token}_a"
    delimiter = f"\r\n--{outer}\r\n".encode()
    between = f"\r\n--{inner}\r\n".encode()
    return b"".join([
        _head(rendered.subject, from_addr, to_addr, message_id, headers, outer, "mixed"),
        b"\r\n", delimiter,
        f'Content-Type: multipart/alternative; boundary="{inner}"\r\n'.encode(),
        between, _text_part("text/plain", rendered.text), between,
        _text_part("text/html", rendered.html), f"\r\n--{inner}--\r\n".encode(),
        *(piece for attachment in attachments for piece in (delimiter, attachment.mime_part)),
        f"\r\n--{outer}--\r\n".encode(),
    ])


def _head(subject: str, from_addr: str, to_addr: str, message_id: str, headers: dict[str, str],
          boundary: str, multipart: str = "alternative") -> bytes:
    lines = [
        f"Subject: {_header_value(subject)}",
        f"From: {_address_header(from_addr)}",
        f"To: {_address_header(to_addr)}",
        f"Date: {_date()}",
        f"Message-ID: {message_id if message_id.startswith('<') else f'<{message_id}>'}",
        "MIME-Version: 1.0",
        *(f"{name}: {_header_value(value)}" for name, value in headers.items()),
        f'Content-Type: multipart/{multipart}; boundary="{boundary}"',
    ]
    # ASCII but for a local part outside ASCII (`_address_header`): UTF-8 header text, RFC 6532.
    return "\r\n".join(lines).encode("utf-8")


def check_message(rendered: RenderedEmail, *, from_addr: str, to_addr: str, message_id: str,
                  headers: dict[str, str]) -> None:
    """Raise what `message_bytes` would raise for these values (a header that cannot be
    written, a body that is not text), without assembling the message: for a JSON API, which
    takes the parts as they are, so a person's message fails there exactly when it would
    over SMTP. Its headers are what can fail; the bodies only in their encoding."""
    _head(rendered.subject, from_addr, to_addr, message_id, headers, boundary="")
    rendered.text.encode("utf-8")
    rendered.html.encode("utf-8")


def build_message(rendered: RenderedEmail, *, from_addr: str, to_addr: str, message_id: str,
                  headers: dict[str, str], attachments: Sequence[MailAttachment] = ()
                  ) -> EmailMessage:
    """The same message as `message_bytes`, parsed back into an object (for previews, tests)."""
    raw = message_bytes(rendered, from_addr=from_addr, to_addr=to_addr, message_id=message_id,
                        headers=headers, attachments=attachments)
    return email.message_from_bytes(raw, policy=email.policy.default)
