"""Email addresses as the owner types them: validated and normalised the one way every
writer uses (`normalise_email`), told apart from a search term (`is_whole_address`), and
written for the wire (`wire_address`, `needs_smtputf8`).

International addresses (RFC 6531/6532) are accepted. What is stored is the address as a
person reads it: the local part and the domain's U-label, both in Unicode NFC and
lower-cased (`str.lower`, which folds non-ASCII letters too: `JÜRGEN@EXÄMPLE.DE` and
`jürgen@exämple.de` are one person, as `Ann@X.com` and `ann@x.com` always were). A domain
typed as its A-label (`xn--exmple-cua.de`) is stored as its U-label, so both spellings meet
the one unique index, and the import's set-based dedup sees one key. On the wire the domain
goes as its A-label (IDNA 2008, which every server accepts); a local part outside
ASCII needs SMTPUTF8 from whoever takes the message, and then travels whole, as typed.
"""

from __future__ import annotations

import unicodedata

from broadside.core.errors import ValidationError
from broadside.core.i18n import _


def normalise_email(raw: str) -> str:
    """A syntactically valid address, NFC and lower-cased, the domain as its U-label;
    raises ValidationError otherwise."""
    raw = (raw or "").strip()
    if not raw:
        raise ValidationError(_("An email address is required."))
    if len(raw) > 320:
        raise ValidationError(_("That email address is too long."))
    # Imported here: the sending worker imports this module but never validates an address
    # (email_validator and idna are half a megabyte of its memory).
    from email_validator import EmailNotValidError, validate_email

    try:
        result = validate_email(raw, check_deliverability=False)
    except EmailNotValidError as exc:
        raise ValidationError(_("%(raw)s is not a valid email address: %(exc)s",
                                raw=repr(raw), exc=exc)) from None
    return unicodedata.normalize("NFC", result.normalized.lower())


def needs_smtputf8(address: str) -> bool:
    """Whether the local part is outside ASCII: only a server or provider offering SMTPUTF8
    can take it (the domain never needs it: `wire_address` writes its A-label)."""
    return not address.rpartition("@")[0].isascii()


def wire_address(address: str) -> str:
    """The address as it goes in MAIL FROM, RCPT TO and the From/To headers. An ASCII local
    part: the domain as its A-label (IDNA 2008), so any server takes it. A local part outside
    ASCII: the whole address as it is, UTF-8, U-label and all (RFC 6531 lets an SMTPUTF8
    transaction carry both; no other can carry it at all). Raises ValueError for a domain
    IDNA refuses (an address stored before it was validated this way)."""
    local, at, domain = address.rpartition("@")
    if not at or domain.isascii() or not local.isascii():
        return address
    # Imported here, only for a domain outside ASCII (see normalise_email: the worker's memory).
    import idna

    try:
        return f"{local}@{idna.encode(domain, uts46=True).decode('ascii')}"
    except idna.IDNAError as exc:
        raise ValueError(f"the domain of {address!r} is not a valid IDNA name") from exc


def is_whole_address(needle: str) -> bool:
    """Whether a search term is a whole address (local part, @, a dotted domain, no space):
    what an owner pastes to find one person, looked up exactly through the unique index."""
    local, at, domain = needle.partition("@")
    return bool(at and local and "." in domain) and not any(c.isspace() for c in needle)
