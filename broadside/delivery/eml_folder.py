"""The outbox (no SMTP_URL): the worker writes each message as an `.eml` file
(`OutboxTransport`, a one-by-one `Transport`), and the System page reads the last ones back as a
recipient sees them (`list_outbox`, `read_outbox_message`): the file names' format is written
and read here.

Files are addressed by name only, and a name must be a plain `.eml` file directly inside the
outbox folder: no path, no `..`, no symlink out of it.
"""

from __future__ import annotations

import heapq
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.parser import BytesHeaderParser
from pathlib import Path

from broadside.core.errors import NotFound
from broadside.delivery.transports import DeliveryError, OneByOne, Pace, SendResult
from broadside.mail.dkim_signing import DkimFailure, DkimSigner

NAME = re.compile(r"^[A-Za-z0-9@._+-]{1,200}\.eml$")
MAX_MESSAGE_BYTES = 10 * 1024 * 1024


def outbox_folder(instance_path: str) -> Path:
    return Path(instance_path) / "outbox"  # where OutboxTransport writes


@dataclass(frozen=True)
class OutboxEntry:
    name: str
    to: str
    subject: str
    written_at: datetime  # naive UTC, like every stored time
    size: int


@dataclass(frozen=True)
class OutboxMessage:
    name: str
    headers: list[tuple[str, str]]
    text: str | None
    html: str | None


def list_outbox(folder: Path, limit: int = 20) -> list[OutboxEntry]:
    """The newest messages first (file names start with the time they were written)."""
    try:
        with os.scandir(folder) as entries:
            names = heapq.nlargest(limit, (e.name for e in entries if NAME.match(e.name) and e.is_file()))
    except FileNotFoundError:
        return []
    listing = []
    parser = BytesHeaderParser(policy=policy.default)
    for name in names:
        path = folder / name
        try:
            stat = path.stat()
            with path.open("rb") as handle:
                headers = parser.parse(handle, headersonly=True)
        except OSError:
            continue  # removed meanwhile
        listing.append(OutboxEntry(
            name=name,
            to=str(headers.get("To", "")),
            subject=str(headers.get("Subject", "")),
            written_at=datetime.fromtimestamp(stat.st_mtime, UTC).replace(tzinfo=None),
            size=stat.st_size,
        ))
    return listing


def _safe_path(folder: Path, name: str) -> Path:
    if not NAME.match(name or "") or name.startswith("."):
        raise NotFound("There is no such message in the outbox.")
    path = folder / name
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise NotFound("There is no such message in the outbox.") from None
    if resolved.parent != folder.resolve() or not resolved.is_file():
        raise NotFound("There is no such message in the outbox.")
    return resolved


def read_outbox_message(folder: Path, name: str) -> OutboxMessage:
    path = _safe_path(folder, name)
    if path.stat().st_size > MAX_MESSAGE_BYTES:
        raise NotFound("This message is too large to show here; open the file itself.")
    message = message_from_bytes(path.read_bytes(), policy=policy.default)
    assert isinstance(message, EmailMessage)
    text_part = message.get_body(("plain",))
    html_part = message.get_body(("html",))
    return OutboxMessage(
        name=name,
        headers=[(key, str(value)) for key, value in message.items()],
        text=text_part.get_content() if text_part is not None else None,
        html=html_part.get_content() if html_part is not None else None,
    )


class OutboxTransport:
    """No SMTP configured: each message becomes an .eml file under instance/outbox/.

    A file's name starts with the moment it was written, from one clock reading to the
    nanosecond (`20261201T100203-123456789-<rcpt>.eml`), so sorting the names gives the order
    they were written in: the System page lists the newest by name. A clock that repeats or
    steps back never reorders or overwrites: each name is at least a nanosecond after this
    transport's previous one, and a name already taken (another identity's worker process,
    the same person, the same nanosecond) moves on by one more.
    """

    description = "outbox"

    def __init__(self, folder: Path, clock_ns: Callable[[], int] = time.time_ns,
                 signer: DkimSigner | None = None) -> None:
        self.folder = Path(folder)
        self.signer = signer  # DKIM, as SMTP signs: after the pace's wait
        self._clock_ns = clock_ns
        self._last_ns = 0
        self._result: SendResult | None = None

    def shape(self) -> OneByOne:
        return OneByOne(self)

    @staticmethod
    def wire(message: bytes) -> bytes:
        return message  # a file, not an SMTP stream: nothing to stuff

    def start(
        self, mail_from: str, rcpt: str, wire: bytes, pace: Pace = lambda: None
    ) -> None:
        self._result = self.send(mail_from, rcpt, wire, pace)

    def finish(self) -> SendResult:
        assert self._result is not None, "finish() without start()"
        result, self._result = self._result, None
        return result

    @staticmethod
    def _name(ns: int, safe_rcpt: str) -> str:
        seconds, fraction = divmod(ns, 10**9)
        return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(seconds))}-{fraction:09d}-{safe_rcpt}.eml"

    def send(
        self, mail_from: str, rcpt: str, message: bytes, pace: Pace = lambda: None
    ) -> SendResult:
        pace()
        if self.signer is not None:
            try:
                message = self.signer.header(message) + message
            except DkimFailure as failure:  # channel-wide (jobs.classify): nothing unsigned
                raise DeliveryError("dkim", None, failure.words, ours=True) from None
        self.folder.mkdir(parents=True, exist_ok=True)
        safe_rcpt = re.sub(r"[^A-Za-z0-9@._-]", "_", rcpt)[:80]
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(message)
        ns = max(self._clock_ns(), self._last_ns + 1)  # one reading: the date and the fraction
        while (final := self.folder / self._name(ns, safe_rcpt)).exists():
            ns += 1  # another worker process wrote to this person in the same nanosecond
        os.replace(tmp, final)  # atomic: a reader never sees half a message
        self._last_ns = ns
        return SendResult(250, f"written to {final.name}")

    def close(self) -> None:
        pass

    def check(self) -> str:
        self.folder.mkdir(parents=True, exist_ok=True)
        return f"outbox at {self.folder}"
