"""What a DNS check finds, as data, and the small rules the checks share: a domain's
organisational domain (DMARC's relaxed alignment), alignment itself, and the DKIM public key
Broadside's own signing key publishes.

A `DnsCheck` is one finding: its kind (spf, dkim, dmarc, mx), the name asked, its state, the
owner's sentence, and the exact record to add when something is missing or wrong ("" when
nothing is to be added). States:

    ok             published and right
    missing        nothing published where it should be
    wrong          published, but it would not do what it must (the sentence says why)
    could_not_ask  the resolver did not answer (the sentence names it); nothing is known
    unchecked      Broadside cannot know what to look for (a selector only the provider knows)
"""

from __future__ import annotations

import base64
from dataclasses import asdict, dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

STATES = ("ok", "missing", "wrong", "could_not_ask", "unchecked")
KINDS = ("spf", "dkim", "dmarc", "mx")

# Public suffixes of two labels under which registrations sit at the third label. A simple
# rule, said as such on the page: the organisational domain is the last two labels, or the
# last three under one of these (RFC 7489 §3.2 asks for the Public Suffix List, which
# Broadside does not carry).
TWO_LEVEL_SUFFIXES = frozenset({
    "co.uk", "org.uk", "ac.uk", "gov.uk", "me.uk", "ltd.uk", "plc.uk", "net.uk", "sch.uk",
    "com.au", "net.au", "org.au", "edu.au", "gov.au", "co.nz", "org.nz", "net.nz",
    "co.jp", "ne.jp", "or.jp", "ac.jp", "co.za", "org.za", "com.br", "net.br", "org.br",
    "com.cn", "net.cn", "org.cn", "co.in", "net.in", "org.in", "co.kr", "or.kr",
    "com.mx", "com.ar", "com.tr", "com.tw", "com.sg", "com.hk", "co.il", "com.my", "co.id",
})


@dataclass(frozen=True)
class DnsCheck:
    kind: str
    name: str  # the DNS name the check is about
    state: str
    sentence: str
    record: str = ""  # the record to add, in zone-file form

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    @property
    def label(self) -> str:
        return {"spf": "SPF", "dkim": "DKIM", "dmarc": "DMARC", "mx": "MX"}[self.kind]

    @property
    def state_words(self) -> str:
        return {"ok": "ok", "missing": "missing", "wrong": "wrong", "could_not_ask": "could not ask",
                "unchecked": "not checked"}[self.state]


def organisational_domain(domain: str) -> str:
    labels = domain.rstrip(".").lower().split(".")
    keep = 3 if ".".join(labels[-2:]) in TWO_LEVEL_SUFFIXES else 2
    return ".".join(labels[-keep:])


def aligned(from_domain: str, other: str, mode: str) -> bool:
    """DMARC identifier alignment: strict ("s") the same name, relaxed ("r") the same
    organisational domain."""
    a, b = from_domain.rstrip(".").lower(), other.rstrip(".").lower()
    if mode == "s":
        return a == b
    return organisational_domain(a) == organisational_domain(b)


def dkim_public_key(private_pem: str) -> tuple[str, str] | None:
    """(`k=`, `p=`) of a PEM private key: RSA's public key as base64 of its
    SubjectPublicKeyInfo, Ed25519's as base64 of its 32 raw bytes (RFC 8463). None when the
    text is no key."""
    try:
        key = serialization.load_pem_private_key(private_pem.encode(), password=None)
    except (ValueError, TypeError):
        return None
    if isinstance(key, ed25519.Ed25519PrivateKey):
        raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return "ed25519", base64.b64encode(raw).decode()
    if not isinstance(key, rsa.RSAPrivateKey):
        return None
    der = key.public_key().public_bytes(serialization.Encoding.DER,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    return "rsa", base64.b64encode(der).decode()


def tags(record: str) -> dict[str, str]:
    """`k=v; k=v` (DKIM, DMARC) -> {k: v}, names lowercased, whitespace dropped."""
    found: dict[str, str] = {}
    for part in record.split(";"):
        name, sep, value = part.partition("=")
        if sep:
            found.setdefault(name.strip().lower(), "".join(value.split()))
    return found


def quoted(text: str) -> str:
    """A TXT value as a zone file writes it: strings of at most 255 bytes, each quoted."""
    parts = [text[i:i + 255] for i in range(0, len(text), 255)] or [""]
    return " ".join(f'"{p}"' for p in parts)
