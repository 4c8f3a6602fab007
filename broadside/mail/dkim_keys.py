"""DKIM keys: made, checked and published (RFC 6376 3.6.1).

An identity that signs its mail holds a selector and an RSA private key (PEM). The owner
publishes the public half as a TXT record at `<selector>._domainkey.<From domain>`:
`v=DKIM1; k=rsa; p=<the public key's DER, base64>`. The private key is a secret, like a
transport URL's password: it is stored, used by the worker to sign, and never shown back;
the pages and the API show its size and fingerprint (the SHA-256 of the public key).

Only RSA is offered: RSA of at least 1024 bits is refused below (a verifier ignores
shorter keys), and one under 2048 bits is accepted with a warning. Ed25519 (RFC 8463) is
not offered: the large mailbox providers still do not verify it alone, so it would only be
worth it as a second signature beside an RSA one.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

DEFAULT_SELECTOR = "broadside"
KEY_BITS = 2048
MIN_BITS = 1024
MAX_BITS = 4096
MAX_PEM = 10_000
# One or more DNS labels (RFC 6376 3.1: a selector may have dots), 63 characters in all.
_SELECTOR = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$")


class KeyProblem(ValueError):
    """A private key or selector that cannot be used: the message says why, in words."""


@dataclass(frozen=True)
class KeySummary:
    """What may be shown of a private key: never the key itself."""

    bits: int
    fingerprint: str  # "SHA256:" and the public key's digest, base64 (as ssh-keygen shows it)
    warning: str | None  # a usable key that should be replaced


def generate_private_key(bits: int = KEY_BITS) -> str:
    """A new RSA private key, PEM (PKCS#1, `BEGIN RSA PRIVATE KEY`, as opendkim-genkey writes)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption()).decode("ascii")


def _load(pem: str) -> rsa.RSAPrivateKey:
    if not isinstance(pem, str) or not pem.strip():
        raise KeyProblem("Paste the private key (PEM, starting with “-----BEGIN”).")
    if len(pem) > MAX_PEM or not pem.isascii() or "-----BEGIN" not in pem:
        raise KeyProblem("This is not a PEM private key: paste the whole key, from "
                         "“-----BEGIN … PRIVATE KEY-----” to its END line.")
    if "ENCRYPTED" in pem:
        raise KeyProblem("This private key is protected by a passphrase; paste it without "
                         "one (openssl pkey -in key.pem -out plain.pem).")
    try:
        key = serialization.load_pem_private_key(pem.strip().encode("ascii"), password=None)
    except (ValueError, TypeError):
        raise KeyProblem("This private key could not be read: paste the whole PEM key, from "
                         "its BEGIN line to its END line.") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise KeyProblem("Only RSA keys are offered for DKIM signing (not Ed25519 or EC, "
                         "which the large mailbox providers do not verify alone).")
    if not MIN_BITS <= key.key_size <= MAX_BITS:
        raise KeyProblem(f"This RSA key has {key.key_size} bits; DKIM needs {MIN_BITS} to "
                         f"{MAX_BITS} ({KEY_BITS} is recommended).")
    return key


def check_private_key(pem: str) -> KeySummary:
    """The key's summary when it can sign; KeyProblem otherwise."""
    key = _load(pem)
    warning = None
    if key.key_size < KEY_BITS:
        warning = (f"This key has {key.key_size} bits: it works, but {KEY_BITS} bits is the "
                   "recommended size; generate a new one when you can.")
    return KeySummary(key.key_size, _fingerprint(key), warning)


def normalised_pem(pem: str) -> str:
    """A checked key as stored: PKCS#1 PEM, whatever PEM form was pasted (dkimpy reads it)."""
    return _load(pem).private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.TraditionalOpenSSL,
                                    serialization.NoEncryption()).decode("ascii")


def _public_der(key: rsa.RSAPrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def _fingerprint(key: rsa.RSAPrivateKey) -> str:
    digest = hashlib.sha256(_public_der(key)).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def public_key_b64(pem: str) -> str:
    """The `p=` value: the public key (SubjectPublicKeyInfo DER), base64."""
    return base64.b64encode(_public_der(_load(pem))).decode("ascii")


def txt_record(pem: str) -> str:
    """The TXT record's text to publish (DNS splits it into strings of at most 255 bytes;
    most DNS panels do that themselves)."""
    return f"v=DKIM1; k=rsa; p={public_key_b64(pem)}"


def record_name(selector: str, domain: str) -> str:
    """Where the TXT record goes: `<selector>._domainkey.<domain>`."""
    return f"{selector}._domainkey.{domain.lower().rstrip('.')}"


def check_selector(selector: object) -> str:
    """A selector as stored (one or more DNS labels, at most 63 characters); KeyProblem
    otherwise. Empty: DEFAULT_SELECTOR."""
    if selector is None or selector == "":
        return DEFAULT_SELECTOR
    if not isinstance(selector, str):
        raise KeyProblem("The selector must be text, like “broadside”.")
    selector = selector.strip().lower()
    if len(selector) > 63 or not _SELECTOR.match(selector):
        raise KeyProblem("The selector may hold letters, digits, dashes and dots (DNS labels, "
                         "at most 63 characters), like “broadside” or “news2026”.")
    return selector
