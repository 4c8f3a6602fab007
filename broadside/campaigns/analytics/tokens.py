"""The signed tokens in a tracked email's pixel and links.

A click token is the HMAC (itsdangerous, SECRET_KEY, its own salt) over the broadcast id, the
link's position and the exact address it leads to, so the redirector (webapp/analytics) can
only ever send someone where a Broadside email of ours pointed: a changed byte, another
address or an unknown link fails the signature or the lookup and answers 404. It is never an
open redirect.

What a token carries:
- always: the broadcast, and the moment the message was rendered (just before its send), in
  10-second slots: what tells a scanner fetching within seconds of delivery from a reader.
  A slot is shared by every copy sent in those ten seconds, and it is never stored or logged.
- an aggregate token: nothing else. No subscriber id, no delivery id: the person is not in it,
  and its address is the owner's link as written, the same in every copy (a link whose address
  holds a merge field is left untracked in aggregate: rewrite.py).
- a per-person token (only for a list whose owner turned per-person tracking on): also the
  delivery id, the one thing per-person rows are keyed by; its address may hold the reader's
  own values (merge fields filled in).
"""

from __future__ import annotations

from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeSerializer

from broadside.core.signing import FastDumps

OPEN_SALT = "broadside.analytics.open.v1"
CLICK_SALT = "broadside.analytics.click.v1"
SLOT_SECONDS = 10


class BadToken(Exception):
    """Not one of our tokens (changed, cut, or signed with another key)."""


@dataclass(frozen=True)
class OpenClaim:
    broadcast_id: int
    slot: int  # when it was sent, in SLOT_SECONDS since the epoch
    delivery_id: int | None = None  # per-person mode only


@dataclass(frozen=True)
class ClickClaim:
    broadcast_id: int
    position: int
    url: str
    slot: int
    delivery_id: int | None = None  # per-person mode only


def slot_of(epoch_seconds: float) -> int:
    return int(epoch_seconds // SLOT_SECONDS)


def _ints(values: list, count: int) -> bool:
    return all(type(v) is int and v >= 0 for v in values[:count])


class TrackingTokens:
    """Makes and reads both kinds with one secret (the worker keeps one per slice)."""

    def __init__(self, secret_key: str) -> None:
        self.opens = URLSafeSerializer(secret_key, salt=OPEN_SALT)
        self.clicks = URLSafeSerializer(secret_key, salt=CLICK_SALT)
        # Per recipient in the worker: each signer's key derived once (byte-identical tokens).
        self._open_dumps = FastDumps(self.opens)
        self._click_dumps = FastDumps(self.clicks)

    def open_token(self, broadcast_id: int, slot: int, delivery_id: int | None = None) -> str:
        payload = [broadcast_id, slot] if delivery_id is None else [broadcast_id, slot, delivery_id]
        return self._open_dumps(payload)

    def click_token(self, broadcast_id: int, position: int, url: str, slot: int,
                    delivery_id: int | None = None) -> str:
        payload: list = [broadcast_id, position, url, slot]
        if delivery_id is not None:
            payload.append(delivery_id)
        return self._click_dumps(payload)

    def read_open(self, token: str) -> OpenClaim:
        try:
            data = self.opens.loads(token)
        except (BadSignature, ValueError, TypeError) as exc:
            raise BadToken() from exc
        if not isinstance(data, list) or len(data) not in (2, 3) or not _ints(data, len(data)):
            raise BadToken()
        return OpenClaim(data[0], data[1], data[2] if len(data) == 3 else None)

    def read_click(self, token: str) -> ClickClaim:
        try:
            data = self.clicks.loads(token)
        except (BadSignature, ValueError, TypeError) as exc:
            raise BadToken() from exc
        if (not isinstance(data, list) or len(data) not in (4, 5) or not _ints(data, 2)
                or not isinstance(data[2], str) or not _ints(data[3:], len(data) - 3)):
            raise BadToken()
        return ClickClaim(data[0], data[1], data[2], data[3], data[4] if len(data) == 5 else None)
