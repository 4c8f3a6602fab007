"""Signed, non-expiring unsubscribe tokens: subscriber, list and (for the record) broadcast.

A link in a two-year-old email must still work, so the token carries no timestamp; it is
signed with SECRET_KEY (itsdangerous) and URL-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeSerializer

SALT = "broadside.unsubscribe.v1"


@dataclass(frozen=True)
class UnsubscribeClaim:
    subscriber_id: int
    list_id: int
    broadcast_id: int | None


def token_serializer(secret_key: str) -> URLSafeSerializer:
    """Reusable: the worker makes one per slice rather than one per recipient."""
    return URLSafeSerializer(secret_key, salt=SALT)


def make_token(subscriber_id: int, list_id: int, broadcast_id: int | None, *, secret_key: str) -> str:
    return token_serializer(secret_key).dumps([subscriber_id, list_id, broadcast_id])


def read_token(token: str, *, secret_key: str) -> UnsubscribeClaim | None:
    """The claim in a token, or None when it is tampered, truncated or garbage."""
    if not token or len(token) > 512:
        return None
    try:
        data = token_serializer(secret_key).loads(token)
    except BadSignature:
        return None

    def is_id(value: object) -> bool:
        # A database id: an int (not a bool) within the columns' range.
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31

    if (
        not isinstance(data, list)
        or len(data) != 3
        or not all(is_id(v) for v in data[:2])
        or not (data[2] is None or is_id(data[2]))
    ):
        return None
    return UnsubscribeClaim(data[0], data[1], data[2])


def unsubscribe_url(token: str, base_url: str) -> str:
    return f"{base_url.rstrip('/')}/u/{token}"
