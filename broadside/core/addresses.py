"""Email addresses as the owner types them: validated and normalised the one way every
writer uses (`normalise_email`), and told apart from a search term (`is_whole_address`)."""

from __future__ import annotations

from broadside.core.errors import ValidationError


def normalise_email(raw: str) -> str:
    """A syntactically valid address, lower-cased; raises ValidationError otherwise."""
    raw = (raw or "").strip()
    if not raw:
        raise ValidationError("An email address is required.")
    if len(raw) > 320:
        raise ValidationError("That email address is too long.")
    # Imported here: the sending worker imports this module but never validates an address
    # (email_validator and idna are half a megabyte of its memory).
    from email_validator import EmailNotValidError, validate_email

    try:
        result = validate_email(raw, check_deliverability=False)
    except EmailNotValidError as exc:
        raise ValidationError(f"{raw!r} is not a valid email address: {exc}") from None
    return result.normalized.lower()


def is_whole_address(needle: str) -> bool:
    """Whether a search term is a whole address (local part, @, a dotted domain, no space):
    what an owner pastes to find one person, looked up exactly through the unique index."""
    local, at, domain = needle.partition("@")
    return bool(at and local and "." in domain) and not any(c.isspace() for c in needle)
