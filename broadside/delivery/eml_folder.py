"""The outbox (no SMTP_URL): the last messages the worker wrote, readable as a recipient sees them.

Files are addressed by name only, and a name must be a plain `.eml` file directly inside the
outbox folder: no path, no `..`, no symlink out of it.
"""

from __future__ import annotations

import heapq
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.parser import BytesHeaderParser
from pathlib import Path

from broadside.core.errors import NotFound

NAME = re.compile(r"^[A-Za-z0-9@._+-]{1,200}\.eml$")
MAX_MESSAGE_BYTES = 10 * 1024 * 1024


def outbox_folder(instance_path: str) -> Path:
    return Path(instance_path) / "outbox"  # where broadside.delivery.transports.OutboxTransport writes


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
