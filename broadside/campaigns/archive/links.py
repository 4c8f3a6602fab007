"""The "View in your browser" link: a signed token naming one delivery (one reader's copy of
one broadcast).

The token is `[delivery id, mark]`, signed with SECRET_KEY (itsdangerous, its own salt, so an
unsubscribe token is never one of these). The mark is a keyed digest of the delivery, its
broadcast, its subscriber and the moment that subscriber's row was created: the page checks it
against the delivery row as it is now, so a token shows exactly the copy it was made for and
nothing else. Changing any character breaks the signature; a database restored from a backup
that gave the delivery id to someone else fails the mark. Like an unsubscribe link, it carries
no timestamp: a link in a two-year-old email still works.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core.models import Broadcast, MailingList
from broadside.core.signing import FastDumps, KeyedDigest
from broadside.mail.unsubscribe_tokens import joined_text

SALT = "broadside.view-in-browser.v1"
MARK_BYTES = 12  # 96 bits: 16 URL-safe characters
MAX_TOKEN = 256


@dataclass(frozen=True)
class ViewClaim:
    delivery_id: int
    mark: str


class ViewTokens:
    def __init__(self, secret_key: str) -> None:
        self.serializer = URLSafeSerializer(secret_key, salt=SALT)
        self.key = hashlib.sha256(f"broadside.view-mark:{secret_key}".encode()).digest()
        # Per copy in the worker: the signer's key and the mark's HMAC keyed once.
        self._dumps = FastDumps(self.serializer)
        self._digest = KeyedDigest(self.key, hashlib.sha256)

    def make(self, delivery_id: int, broadcast_id: int, subscriber_id: int,
             joined: datetime | str) -> str:
        return self._dumps([delivery_id, self._mark(delivery_id, broadcast_id,
                                                    subscriber_id, joined)])

    def read(self, token: str) -> ViewClaim | None:
        """The claim in a token, or None when it is tampered, truncated or garbage."""
        if not token or len(token) > MAX_TOKEN:
            return None
        try:
            data = self.serializer.loads(token)
        except BadSignature:
            return None
        if not (isinstance(data, list) and len(data) == 2):
            return None
        delivery_id, mark = data
        if not (isinstance(delivery_id, int) and not isinstance(delivery_id, bool)
                and 0 < delivery_id < 2**31 and isinstance(mark, str) and len(mark) == 16):
            return None
        return ViewClaim(delivery_id, mark)

    def matches(self, claim: ViewClaim, broadcast_id: int, subscriber_id: int,
                joined: datetime | str) -> bool:
        """Whether the delivery as it is now is the one the token was made for."""
        expected = self._mark(claim.delivery_id, broadcast_id, subscriber_id, joined)
        return hmac.compare_digest(claim.mark, expected)

    def _mark(self, delivery_id: int, broadcast_id: int, subscriber_id: int,
              joined: datetime | str) -> str:
        message = f"{delivery_id}|{broadcast_id}|{subscriber_id}|{joined_text(joined)}"
        digest = self._digest(message.encode())[:MARK_BYTES]
        return base64.urlsafe_b64encode(digest).decode()


def view_url(token: str, base_url: str) -> str:
    return f"{base_url.rstrip('/')}/view/{token}"


def link_wanted(session: Session, broadcast_id: int) -> bool:
    """Whether this broadcast's copies carry the link: the owner's choice, or when they made
    none, whether its list's public archive is on."""
    row = session.execute(
        select(Broadcast.view_in_browser, MailingList.archive_enabled)
        .outerjoin(MailingList, MailingList.id == Broadcast.list_id)
        .where(Broadcast.id == broadcast_id)).first()
    if row is None:
        return False
    chosen, archive_on = row
    return bool(archive_on) if chosen is None else bool(chosen)


class ViewLinks:
    """The worker's link maker for one slice: the signer made once, one HMAC per copy."""

    def __init__(self, broadcast_id: int, secret_key: str, base_url: str) -> None:
        self.broadcast_id = broadcast_id
        self.tokens = ViewTokens(secret_key)
        self.base_url = base_url

    @classmethod
    def for_broadcast(cls, session: Session, broadcast_id: int, secret_key: str,
                      base_url: str) -> ViewLinks | None:
        """The link maker when this broadcast's copies carry the link; None otherwise."""
        if not link_wanted(session, broadcast_id):
            return None
        return cls(broadcast_id, secret_key, base_url)

    def url(self, delivery_id: int, subscriber_id: int | None, joined: datetime | str) -> str:
        if subscriber_id is None:
            return ""
        token = self.tokens.make(delivery_id, self.broadcast_id, subscriber_id, joined)
        return view_url(token, self.base_url)
