"""A template's design changes over Settings -> Design (colour, width, font, footer text), and
the design a broadcast is frozen, previewed and test-sent with: Settings' design with the
broadcast's changes over it (`broadcast_design`, the one function every broadcast freeze
calls).

The changes are validated exactly as Settings validates its design (the cleaners of
broadside/mail/design.py); the logo is always Settings'. Stored as JSON: only the keys that
change something, plus `template_id` and `template` (its name) on a broadcast, saying where
they came from. A stored value that no longer validates (a font taken out of the list) is
ignored rather than breaking a send.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from broadside.core.errors import ValidationError
from broadside.core.models import Broadcast
from broadside.core.site_settings import SettingsError
from broadside.mail.design import (
    Design,
    clean_colour,
    clean_font,
    clean_footer_text,
    clean_width,
    current_design,
    email_design,
)
from broadside.mail.rendering import EmailDesign

# key (a Design field) -> the cleaner Settings -> Design uses for it
_CLEANERS: dict[str, Callable[[str], object]] = {
    "colour": clean_colour, "width": clean_width, "font": clean_font,
    "footer_text": clean_footer_text}
DESIGN_KEYS = tuple(_CLEANERS)
SOURCE_KEYS = ("template_id", "template")


def clean_overrides(values: dict[str, object]) -> dict[str, Any] | None:
    """The changes given (a key missing, None or "" leaves Settings' value), validated as
    Settings -> Design validates them; None when nothing changes. ValidationError names the
    field."""
    cleaned: dict[str, Any] = {}
    for key, clean in _CLEANERS.items():
        value = values.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        try:
            cleaned[key] = clean(str(value))
        except SettingsError as exc:
            raise ValidationError(exc.message, field=key) from None
    return cleaned or None


def design_changes(overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The valid design keys of stored overrides (anything else, or no longer valid, left out)."""
    changes: dict[str, Any] = {}
    for key, clean in _CLEANERS.items():
        if overrides and key in overrides:
            try:
                changes[key] = clean(str(overrides[key]))
            except (SettingsError, TypeError, ValueError):
                continue
    return changes


def with_overrides(design: Design, overrides: dict[str, Any] | None) -> Design:
    return dataclasses.replace(design, **design_changes(overrides))


def broadcast_design(session: Session, broadcast: Broadcast, from_name: str) -> EmailDesign:
    """The design `broadcast` is frozen with now: Settings' with its template's changes over
    it (invariant 8: read when a revision is frozen, and by previews and test sends)."""
    return email_design(with_overrides(current_design(session), broadcast.design_overrides),
                        from_name=from_name)


def source_of(overrides: dict[str, Any] | None) -> tuple[int | None, str | None]:
    """The template a broadcast's design changes came from: (its id, its name then)."""
    if not overrides:
        return None, None
    template_id = overrides.get("template_id")
    name = overrides.get("template")
    return (template_id if isinstance(template_id, int) else None,
            name if isinstance(name, str) else None)
