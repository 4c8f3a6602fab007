"""Signed, non-expiring unsubscribe tokens, bound to the person they were made for.

A link in a two-year-old email must still work, so the token carries no timestamp; it is
signed with SECRET_KEY (itsdangerous) and URL-safe. It names the subscriber, the list and
(for the record) the broadcast, and carries a mark of the person: a keyed digest of their id
and the moment their row was created. Ids are never reused (see `broadside.core.db`), but a
database restored from a backup can hand an id to somebody new; the mark tells them apart, so
an old link never shows or unsubscribes anyone but its owner (`service.resolve` checks it).

Tokens made before the mark existed (three items) are still honoured: they are in inboxes
already, and their ids were not reused once ids stopped being reused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass, field
from datetime import datetime

from itsdangerous import BadSignature, URLSafeSerializer

from broadside.core.signing import FastDumps, KeyedDigest

SALT = "broadside.unsubscribe.v1"
MARK_BYTES = 9  # 72 bits: 12 URL-safe characters in the token


def joined_text(joined: datetime | str) -> str:
    """The creation moment as one canonical string, whether it comes from the ORM (a datetime)
    or from SQLite's raw cursor (its stored text, which may omit the microseconds)."""
    if isinstance(joined, str):
        if len(joined) == 26 and _CANONICAL.fullmatch(joined):
            return joined  # already the canonical form (parsing and printing it gives it back)
        joined = datetime.fromisoformat(joined)
    if joined.tzinfo is None and joined.year >= 1000:
        # The same text, a third of strftime's cost (it runs for every recipient): isoformat
        # pads the year to four digits and adds no offset to a naive moment.
        return joined.isoformat(" ", "microseconds")
    return f"{joined:%Y-%m-%d %H:%M:%S.%f}"


_CANONICAL = re.compile(r"[1-9]\d{3}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", re.ASCII)


@dataclass(frozen=True)
class UnsubscribeClaim:
    subscriber_id: int
    list_id: int
    broadcast_id: int | None
    person: str | None = None  # the mark; None in a token from before marks
    key: bytes = field(default=b"", repr=False, compare=False)

    def made_for(self, joined: datetime | str) -> bool:
        """Whether the subscriber now at this id (created at `joined`) is the one the token was
        made for."""
        if self.person is None:
            return True
        return hmac.compare_digest(self.person, _mark(self.key, self.subscriber_id, joined))


class Tokens:
    """Makes and reads tokens with one secret; the worker keeps one per slice."""

    def __init__(self, secret_key: str) -> None:
        self.serializer = URLSafeSerializer(secret_key, salt=SALT)
        self.key = hashlib.sha256(f"broadside.person-mark:{secret_key}".encode()).digest()
        # Per recipient in the worker: the signer's key and the mark's HMAC keyed once.
        self._dumps = FastDumps(self.serializer)
        self._digest = KeyedDigest(self.key, hashlib.sha256)

    def make(self, subscriber_id: int, list_id: int, broadcast_id: int | None,
             joined: datetime | str) -> str:
        message = f"{subscriber_id}|{joined_text(joined)}".encode()
        mark = _urlsafe(self._digest(message)[:MARK_BYTES])  # = _mark(self.key, ...)
        return self._dumps([subscriber_id, list_id, broadcast_id, mark])

    def read(self, token: str) -> UnsubscribeClaim | None:
        """The claim in a token, or None when it is tampered, truncated or garbage."""
        if not token or len(token) > 512:
            return None
        try:
            data = self.serializer.loads(token)
        except BadSignature:
            return None
        if not isinstance(data, list) or len(data) not in (3, 4):
            return None
        subscriber_id, list_id, broadcast_id, *mark = data
        if not (_is_id(subscriber_id) and _is_id(list_id)
                and (broadcast_id is None or _is_id(broadcast_id))):
            return None
        person = mark[0] if mark else None
        if person is not None and not (isinstance(person, str) and len(person) == 12):
            return None
        return UnsubscribeClaim(subscriber_id, list_id, broadcast_id, person, self.key)


def _is_id(value: object) -> bool:
    # A database id: an int (not a bool) within the columns' range.
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


def _mark(key: bytes, subscriber_id: int, joined: datetime | str) -> str:
    digest = hmac.new(key, f"{subscriber_id}|{joined_text(joined)}".encode(), hashlib.sha256)
    return _urlsafe(digest.digest()[:MARK_BYTES])


def _urlsafe(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


def make_token(subscriber_id: int, list_id: int, broadcast_id: int | None, *, joined: datetime | str,
               secret_key: str) -> str:
    return Tokens(secret_key).make(subscriber_id, list_id, broadcast_id, joined)


def read_token(token: str, *, secret_key: str) -> UnsubscribeClaim | None:
    return Tokens(secret_key).read(token)


def unsubscribe_url(token: str, base_url: str) -> str:
    return f"{base_url.rstrip('/')}/u/{token}"
