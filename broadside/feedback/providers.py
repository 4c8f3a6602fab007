"""How each provider proves that a webhook came from it: Postmark, Resend and Mailgun.

Each sending identity has its own `webhook_secret`, and each provider its own scheme; every
check is a pure function over the request's headers or body, the secret and the clock, and
raises `replay.Refused` (401, nothing written) with a message that says what was expected:

- Postmark signs nothing. Its documented protection is HTTP Basic credentials written into
  the webhook URL (`https://postmark:SECRET@news.example.com/webhooks/postmark/3`): the
  `Authorization: Basic` password must be the identity's secret (any user name), compared in
  constant time. Nothing is dated either, so replays are refused by the record's own id
  (`provider_payloads.parse_postmark`), claimed once for a day: longer than Postmark retries
  (about ten and a half hours).
- Resend signs with Svix: `svix-signature` lists `v1,<base64>` signatures, each an
  HMAC-SHA256 keyed with the base64-decoded part of the `whsec_…` secret, over
  `"<svix-id>.<svix-timestamp>.<raw body>"`; any one of them may match. The timestamp must be
  within replay.TIMESTAMP_TOLERANCE_SECONDS of now (Svix signs every retry afresh), and the
  `svix-id` is the event id claimed once.
- Mailgun signs inside the JSON body: `signature.signature` is the hex HMAC-SHA256, keyed with
  the domain's webhook signing key, of `timestamp + token`. The timestamp must be recent (see
  MAILGUN_MAX_AGE_SECONDS) and the token, fifty random characters, is claimed once.

The signature is checked before the timestamp: only a signed timestamp means anything.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Any

from broadside.feedback.replay import (
    TIMESTAMP_TOLERANCE_SECONDS,
    UNIX_SECONDS,
    Refused,
    check_fresh,
)

SVIX_ID = "svix-id"
SVIX_TIMESTAMP = "svix-timestamp"
SVIX_SIGNATURE = "svix-signature"
SVIX_PREFIX = "whsec_"
MAX_REPLAY_KEY = 200  # an svix-id or a Mailgun token longer than this is no real one

# Mailgun asks receivers to check "that the timestamp is not too far from the current time"
# without a number; this is the five minutes every other scheme here uses. Should Mailgun's
# retries (for up to 8 hours after a failed POST) turn out to keep the first attempt's
# timestamp, they would be refused: the token, claimed once for a day, would then be the
# replay protection alone, and this could safely grow to 8 h 5 min, as SNS's bound does.
MAILGUN_MAX_AGE_SECONDS = TIMESTAMP_TOLERANCE_SECONDS


def _require_secret(secret: str) -> None:
    if not secret:
        raise Refused("This identity has no webhook secret: set one on its page, as the "
                      "provider shows it, before pointing the provider's webhook here.")


def _replay_key(value: Any, label: str) -> str:
    if (not isinstance(value, str) or not value.strip() or len(value) > MAX_REPLAY_KEY
            or not value.isprintable()):
        raise Refused(f"A {label} (a printable string of at most {MAX_REPLAY_KEY} "
                      "characters) is required.")
    return value


# ------------------------------------------------------------------ Postmark


def check_postmark(authorization: str | None, secret: str) -> None:
    """Raise Refused unless `authorization` is HTTP Basic with `secret` as its password."""
    _require_secret(secret)
    scheme, _, credentials = (authorization or "").strip().partition(" ")
    wanted = ("Postmark webhooks are proved by HTTP Basic credentials: write the webhook URL "
              "as https://postmark:SECRET@HOST/webhooks/postmark/ID, with this identity's "
              "webhook secret as the password.")
    if scheme.lower() != "basic" or not credentials.strip():
        raise Refused(wanted)
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise Refused(wanted) from None
    _, colon, password = decoded.partition(b":")
    if not colon or not hmac.compare_digest(password, secret.encode("utf-8")):
        raise Refused("The HTTP Basic password is not this identity's webhook secret.")


# ------------------------------------------------------------------ Resend (Svix)


def svix_key(secret: str) -> bytes:
    """The HMAC key of a Svix secret: the base64 after `whsec_` (the prefix is optional)."""
    encoded = secret.strip().removeprefix(SVIX_PREFIX)
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        raise Refused("This identity's webhook secret is not a Resend signing secret: copy "
                      "the whsec_… secret from the webhook's page at Resend.")
    return key


def svix_signature(key: bytes, svix_id: str, timestamp: str, body: bytes) -> str:
    """The base64 HMAC-SHA256 Svix puts after `v1,`."""
    content = f"{svix_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode("ascii")


def check_resend(svix_id: str | None, timestamp: str | None, signatures: str | None,
                 body: bytes, secret: str, now: float | None = None) -> str:
    """Raise Refused unless one `v1` signature in `signatures` signs this request and its
    timestamp is recent; returns the `svix-id` (the event id to claim once)."""
    _require_secret(secret)
    event_id = _replay_key(svix_id, f"{SVIX_ID} header")
    timestamp = (timestamp or "").strip()
    if not UNIX_SECONDS.fullmatch(timestamp):
        raise Refused(f"A valid {SVIX_TIMESTAMP} header (Unix seconds) is required.")
    expected = svix_signature(svix_key(secret), event_id, timestamp, body).encode("ascii")
    for candidate in (signatures or "").split():
        version, _, signature = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(signature.encode("utf-8", "replace"),
                                                   expected):
            break
    else:
        raise Refused(f"No {SVIX_SIGNATURE} matches: each is v1,<base64 HMAC-SHA256 of "
                      f"\"<{SVIX_ID}>.<{SVIX_TIMESTAMP}>.<raw body>\"> keyed with the "
                      "identity's whsec_… secret.")
    check_fresh(timestamp, SVIX_TIMESTAMP, now)
    return event_id


# ------------------------------------------------------------------ Mailgun


def mailgun_signature(secret: str, timestamp: str, token: str) -> str:
    """The hex HMAC-SHA256 Mailgun puts in `signature.signature`."""
    return hmac.new(secret.encode("utf-8"), (timestamp + token).encode("utf-8"),
                    hashlib.sha256).hexdigest()


def check_mailgun(signature: Any, secret: str, now: float | None = None) -> str:
    """Raise Refused unless the body's `signature` object signs its timestamp and token and
    is recent; returns the token (the event id to claim once)."""
    _require_secret(secret)
    if not isinstance(signature, dict):
        raise Refused("A Mailgun webhook carries a \"signature\" object with timestamp, "
                      "token and signature.")
    timestamp = signature.get("timestamp")
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        timestamp = str(timestamp)
    if not isinstance(timestamp, str) or not UNIX_SECONDS.fullmatch(timestamp.strip()):
        raise Refused("The Mailgun signature's timestamp must be Unix seconds.")
    timestamp = timestamp.strip()
    token = _replay_key(signature.get("token"), "Mailgun signature token")
    given = signature.get("signature")
    if not isinstance(given, str) or not hmac.compare_digest(
            mailgun_signature(secret, timestamp, token).encode("ascii"),
            given.strip().lower().encode("utf-8", "replace")):
        raise Refused("The Mailgun signature does not match: it is the hex HMAC-SHA256 of "
                      "timestamp + token, keyed with the identity's webhook signing key.")
    check_fresh(timestamp, "Mailgun signature's timestamp", now, MAILGUN_MAX_AGE_SECONDS)
    return token
