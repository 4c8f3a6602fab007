"""The `Broadside-Signature` header: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`
with the endpoint's secret, so a receiver can check that the body came from this Broadside and
refuse an old one replayed (README, "Outgoing webhooks", has the same check for receivers).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

HEADER = "Broadside-Signature"
SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    payload = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()


def header_value(secret: str, timestamp: int, body: bytes) -> str:
    return f"t={timestamp},v1={signature(secret, timestamp, body)}"


def verify(secret: str, header: str, body: bytes, now: int, tolerance: int = 300) -> bool:
    """The receiver's check (the README's snippet does the same)."""
    parts = dict(item.split("=", 1) for item in header.split(",") if "=" in item)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > tolerance:
        return False
    return hmac.compare_digest(signature(secret, timestamp, body), parts.get("v1", ""))
