"""Replay protection for provider webhooks: signed timestamps and event ids seen once.

A signature alone proves who wrote a request, not when: a captured request stays valid for
ever, and a soft bounce replayed three times would suppress an address. Two checks close that:

- Freshness. The generic webhook signs `"<timestamp>.<raw body>"` (HMAC-SHA256 keyed with
  WEBHOOK_SECRET, the timestamp being the `X-Broadside-Timestamp` header, Unix seconds) and is
  refused more than TIMESTAMP_TOLERANCE_SECONDS from now, either way; so are Resend's (Svix)
  and Mailgun's signed timestamps (`check_fresh`). An SNS message is refused when its signed
  `Timestamp` is older than SNS_MAX_AGE_SECONDS or further ahead than SNS_MAX_SKEW_SECONDS.
- Once only. Inside that window, each event id (the generic payload's `id`, SNS's
  `MessageId`, Svix's `svix-id`, Mailgun's token) is claimed in Redis with SET NX and a TTL
  far longer than the window; a second delivery finds the claim and changes nothing. Postmark
  signs nothing and dates nothing (broadside.feedback.providers): its records are claimed by
  their own ids for the same TTL, which outlasts Postmark's retries.

Plain functions and a small class over a Redis client: no Flask in here.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from datetime import datetime

from redis import Redis

TIMESTAMP_HEADER = "X-Broadside-Timestamp"
SIGNATURE_HEADER = "X-Broadside-Signature"

# How far the generic webhook's timestamp may be from our clock, in the past or the future.
TIMESTAMP_TOLERANCE_SECONDS = 5 * 60

# SNS retries an HTTP/S endpoint for at most 3,600 s in all (AWS's hard limit on an HTTP/S
# delivery policy; the default policy gives up after about a minute), and the Timestamp is
# when the message was published. An hour plus five minutes for clock skew therefore accepts
# every retry SNS can make and refuses anything older, which can only be a replay.
SNS_MAX_AGE_SECONDS = 3600 + 5 * 60
# SNS does not date messages in the future; allow our clock to be this far behind.
SNS_MAX_SKEW_SECONDS = 5 * 60

# How long an event id is remembered: far beyond both windows above (an id older than the
# window is refused by its timestamp anyway), small enough that Redis forgets by itself.
SEEN_TTL_SECONDS = 24 * 3600

# Unix seconds as every timestamped scheme here sends them (ours, Svix's, Mailgun's): ASCII
# digits only, no sign, no fraction, no spaces.
UNIX_SECONDS = re.compile(r"[0-9]{1,12}")


class Refused(Exception):
    """The request is not fresh, or not signed as required: 401, nothing written."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def signed_content(timestamp: str, body: bytes) -> bytes:
    """What the generic webhook signs: the timestamp header, a dot, then the raw body."""
    return timestamp.encode("ascii") + b"." + body


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The hex HMAC-SHA256 a sender puts in X-Broadside-Signature (`sha256=` prefix optional)."""
    return hmac.new(secret.encode(), signed_content(timestamp, body), hashlib.sha256).hexdigest()


def check_generic(secret: str, body: bytes, timestamp: str | None, signature: str | None,
                  now: float | None = None) -> None:
    """Raise Refused unless `signature` signs `timestamp` + body and `timestamp` is recent."""
    if not secret:
        raise Refused("Webhooks are refused: WEBHOOK_SECRET is not set.")
    timestamp = (timestamp or "").strip()
    if not UNIX_SECONDS.fullmatch(timestamp):
        raise Refused(f"A valid {TIMESTAMP_HEADER} (the Unix time in whole seconds, signed "
                      "with the body) is required.")
    given = (signature or "").strip()
    if given.lower().startswith("sha256="):
        given = given[len("sha256="):]
    given_bytes = given.lower().encode("utf-8", "replace")
    if not hmac.compare_digest(sign(secret, timestamp, body).encode(), given_bytes):
        body_only = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if hmac.compare_digest(body_only.encode(), given_bytes):
            raise Refused(f"This {SIGNATURE_HEADER} signs the body alone, which can be "
                          f"replayed: sign \"<{TIMESTAMP_HEADER}>.<raw body>\" instead.")
        raise Refused(f"A valid {SIGNATURE_HEADER} is required: the hex HMAC-SHA256, keyed "
                      f"with WEBHOOK_SECRET, of \"<{TIMESTAMP_HEADER}>.<raw body>\".")
    check_fresh(timestamp, TIMESTAMP_HEADER, now)


def check_fresh(timestamp: str, what: str, now: float | None = None,
                tolerance: int = TIMESTAMP_TOLERANCE_SECONDS) -> None:
    """Raise Refused unless `timestamp` (signed Unix seconds, already matched against
    UNIX_SECONDS) is within `tolerance` seconds of now, either way; `what` names it."""
    skew = int(timestamp) - (time.time() if now is None else now)
    if abs(skew) > tolerance:
        when = "in the future" if skew > 0 else "old"
        raise Refused(f"The {what} is {abs(int(skew))} s {when}; at most "
                      f"{tolerance} s either way is accepted.")


def check_sns_timestamp(value: str, now: float | None = None) -> None:
    """Raise Refused unless an SNS message's signed `Timestamp` (ISO 8601) is recent."""
    try:
        published = datetime.fromisoformat(value.strip())
    except ValueError:
        raise Refused("The SNS message's Timestamp is not an ISO 8601 time.") from None
    if published.tzinfo is None:
        raise Refused("The SNS message's Timestamp has no time zone.")
    age = (time.time() if now is None else now) - published.timestamp()
    if age > SNS_MAX_AGE_SECONDS:
        raise Refused(f"The SNS message is {int(age)} s old; SNS stops retrying after an hour, "
                      "so this is a replay.")
    if -age > SNS_MAX_SKEW_SECONDS:
        raise Refused(f"The SNS message's Timestamp is {int(-age)} s in the future.")


class SeenIds:
    """Event ids claimed once each, in Redis (`<namespace>:<prefix>:<id>`, SET NX with a TTL).

    Redis errors propagate: the caller refuses the request with a 503 so that the provider
    retries, rather than applying an event it cannot prove it has not applied before.
    """

    def __init__(self, redis: Redis, namespace: str, prefix: str,
                 ttl_seconds: int = SEEN_TTL_SECONDS) -> None:
        self.redis = redis
        self.namespace = namespace
        self.prefix = prefix
        self.ttl_seconds = ttl_seconds

    def key(self, event_id: str) -> str:
        return f"{self.namespace}:{self.prefix}:{event_id}"

    def claim(self, event_id: str) -> bool:
        """True the first time an id is seen (within the TTL), False for every repeat."""
        return bool(self.redis.set(self.key(event_id), 1, nx=True, ex=self.ttl_seconds))

    def forget(self, event_id: str) -> None:
        """Release a claim whose event could not be applied, so the provider's retry counts."""
        self.redis.delete(self.key(event_id))
