"""A reader's language as the owner sets it (the dashboard, the API, an import): a language
tag stored through `broadside.core.i18n.clean_locale`, or None (their list's default)."""

from __future__ import annotations

from typing import Any

from babel import Locale, localedata

from broadside.core.errors import ValidationError
from broadside.core.i18n import _, clean_locale, current_locale

MAX_SHOWN = 40  # of a refused value, in the message


def clean_reader_locale(value: Any) -> str | None:
    """The tag to store: None for nothing (None or blank), else a tag Babel knows; anything
    else is a ValidationError naming the field `locale`."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    found = clean_locale(value)
    if found is None:
        raise ValidationError(
            _("“%(value)s” is not a language tag (such as de, fr or pt-BR).",
              value=str(value)[:MAX_SHOWN]), field="locale")
    return found


def language_name(tag: str | None) -> str | None:
    """The language of `tag` named in the language being spoken (`Deutsch` → `German` for an
    English owner), or None for no tag."""
    if not tag:
        return None
    try:
        name = Locale.parse(tag.replace("-", "_")).get_display_name(current_locale())
    except (ValueError, TypeError):
        return tag
    return name[:1].upper() + name[1:] if name else tag


def language_choices(current: str | None) -> list[tuple[str, str]]:
    """The languages an owner can give a reader, named in the language being spoken and in
    its order: every language with a two-letter code Babel knows, and `current` (a regional tag such as
    pt-BR) when it is not one of them. The "list's default" choice is the caller's."""
    tags = {tag for tag in localedata.locale_identifiers() if len(tag) == 2}
    if current:
        tags.add(current)
    named = [(tag, language_name(tag) or tag) for tag in tags]
    return sorted(named, key=lambda choice: choice[1].casefold())
