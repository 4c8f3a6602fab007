"""Amazon SNS message verification (how SES delivers bounce and complaint notifications).

Follows AWS's "Verifying the signatures of Amazon SNS messages": build the canonical string
from the message's own fields in a fixed order, fetch the X.509 certificate named by
`SigningCertURL` (only over https, only from a host `sns.<region>.amazonaws.com`), and check
the RSA PKCS#1 v1.5 signature with SHA1 (SignatureVersion 1) or SHA256 (SignatureVersion 2).
Certificates are cached per URL. The HTTP GET is injectable (`app.config["SNS_HTTP_GET"]`)
so tests can sign real messages with their own key without reaching AWS.

A valid signature proves only that SNS sent the message, not that it came from *our* topic:
anyone can publish to a topic of their own and subscribe our URL. The view therefore also
checks the TopicArn against `SNS_TOPIC_ARNS` before doing anything.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from broadside.feedback.payloads import BadPayload, json_object

HttpGet = Callable[[str], bytes]

# The signed fields, in the order AWS concatenates them ("Key\nValue\n" each).
NOTIFICATION_KEYS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
CONFIRMATION_KEYS = (
    "Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type",
)
SIGNED_KEYS = {
    "Notification": NOTIFICATION_KEYS,
    "SubscriptionConfirmation": CONFIRMATION_KEYS,
    "UnsubscribeConfirmation": CONFIRMATION_KEYS,
}
HASHES = {"1": hashes.SHA1, "2": hashes.SHA256}
# AWS's own SDK validators accept this host pattern (the .cn suffix is AWS China).
SNS_HOST = re.compile(r"^sns\.[a-z0-9-]{3,}\.amazonaws\.com(\.cn)?$")
MAX_CERT_BYTES = 64 * 1024
CACHE_SIZE = 32


class SignatureInvalid(Exception):
    """Unsigned, wrongly signed, or signed with a certificate from the wrong place."""


class CertificateUnavailable(Exception):
    """The signing certificate could not be fetched (worth a retry by SNS)."""


def parse_message(raw: bytes) -> dict[str, Any]:
    """The SNS envelope, with the fields its type needs; BadPayload otherwise."""
    message = json_object(raw, "The body (an Amazon SNS message)")
    if message.get("Type") not in SIGNED_KEYS:
        raise BadPayload("The body is not an Amazon SNS message of a known Type.")
    required = [k for k in SIGNED_KEYS[message["Type"]] if k != "Subject"]
    missing = [k for k in required if not isinstance(message.get(k), str)]
    if missing:
        raise BadPayload(f"The SNS message lacks {', '.join(missing)}.")
    if "Subject" in message and not isinstance(message["Subject"], str):
        raise BadPayload("The SNS message's Subject must be a string.")
    return message


def is_sns_url(url: str) -> bool:
    """An https URL on an Amazon SNS host (default port, no credentials)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return (
        parts.scheme == "https"
        and port in (None, 443)
        and not parts.username
        and not parts.password
        and bool(SNS_HOST.match(parts.hostname or ""))
    )


def canonical_string(message: dict[str, Any]) -> bytes:
    keys = SIGNED_KEYS[message["Type"]]
    return "".join(f"{k}\n{message[k]}\n" for k in keys if k in message).encode("utf-8")


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def urllib_get(url: str) -> bytes:
    """The default SNS_HTTP_GET: https only, no redirects, a size cap, a short timeout."""
    if not is_sns_url(url):
        raise ValueError(f"refusing to fetch {url!r}: not an Amazon SNS https URL")
    opener = urllib.request.build_opener(_RefuseRedirects)
    with opener.open(url, timeout=10) as response:
        return response.read(MAX_CERT_BYTES + 1)[:MAX_CERT_BYTES]


class CertificateCache:
    """Public keys by certificate URL; at most CACHE_SIZE, shared by the app's threads."""

    def __init__(self) -> None:
        self._keys: dict[str, tuple[rsa.RSAPublicKey, datetime]] = {}
        self._lock = threading.Lock()

    def public_key(self, url: str, http_get: HttpGet) -> rsa.RSAPublicKey:
        now = datetime.now(UTC)
        with self._lock:
            cached = self._keys.get(url)
        if cached and cached[1] > now:
            return cached[0]
        try:
            pem = http_get(url)
        except Exception as exc:
            raise CertificateUnavailable(f"fetching the certificate failed: {exc}") from None
        try:
            certificate = x509.load_pem_x509_certificate(pem)
        except ValueError:
            raise SignatureInvalid("the signing certificate is not a PEM certificate") from None
        if not certificate.not_valid_before_utc <= now <= certificate.not_valid_after_utc:
            raise SignatureInvalid("the signing certificate is expired or not yet valid")
        key = certificate.public_key()
        if not isinstance(key, rsa.RSAPublicKey):
            raise SignatureInvalid("the signing certificate does not hold an RSA key")
        with self._lock:
            if len(self._keys) >= CACHE_SIZE:
                self._keys.clear()
            self._keys[url] = (key, certificate.not_valid_after_utc)
        return key


def verify(message: dict[str, Any], http_get: HttpGet, cache: CertificateCache) -> None:
    """Raise SignatureInvalid (or CertificateUnavailable) unless SNS signed this message."""
    for field in ("Signature", "SignatureVersion", "SigningCertURL"):
        if not isinstance(message.get(field), str) or not message[field]:
            raise SignatureInvalid(f"the message is not signed (no {field})")
    algorithm = HASHES.get(message["SignatureVersion"])
    if algorithm is None:
        raise SignatureInvalid("unknown SignatureVersion")
    url = message["SigningCertURL"]
    if not is_sns_url(url):
        raise SignatureInvalid("SigningCertURL is not an Amazon SNS https URL")
    try:
        signature = base64.b64decode(message["Signature"], validate=True)
    except (binascii.Error, ValueError):
        raise SignatureInvalid("the signature is not base64") from None
    key = cache.public_key(url, http_get)
    try:
        key.verify(signature, canonical_string(message), padding.PKCS1v15(), algorithm())
    except InvalidSignature:
        raise SignatureInvalid("the signature does not match the message") from None


def confirm_subscription(message: dict[str, Any], http_get: HttpGet) -> None:
    """Finish the SNS handshake by visiting SubscribeURL (same host rule as certificates)."""
    url = message["SubscribeURL"]
    if not is_sns_url(url):
        raise BadPayload("SubscribeURL is not an Amazon SNS https URL.")
    http_get(url)
