"""Language names for the versions of a message (a broadcast's, an automation step's): each
tag named in the page's language by Babel ("Deutsch", "allemand"), the languages offered when
one is added, and the versions as the editor posts them.

The editor posts the versions as `version-<n>-locale`, `-subject`, `-preheader`, `-body` and
`-remove` (a checkbox: left out when saved), and a new one as `version-new-locale` (the select)
or `version-new-tag` (typed), with its `-subject`, `-preheader` and `-body`; `versions-shown`
says the section was on the page (else the versions are left as they are).
"""

from __future__ import annotations

import re
from typing import Any

from babel import Locale, UnknownLocaleError
from babel.numbers import format_decimal
from flask import Blueprint

from broadside.core.i18n import LOCALES, current_locale

# Offered when a version is added (any other tag can be typed).
COMMON = ("ar", "cs", "da", "de", "en", "es", "fi", "fr", "he", "it", "ja", "ko", "nb", "nl",
          "pl", "pt", "pt-BR", "ru", "sv", "tr", "uk", "zh-Hans", "zh-Hant", *LOCALES)
MAX_TEXT = 1_100_000  # longer than any valid value: clean_versions says what is too long


def language_name(tag: str | None) -> str:
    """A language tag's name in the page's language (the tag itself when Babel knows none)."""
    if not tag:
        return ""
    try:
        name = Locale.parse(tag.replace("-", "_")).get_display_name(current_locale())
    except (ValueError, TypeError, UnknownLocaleError):
        return tag
    return (name[:1].upper() + name[1:]) if name else tag


def decimal1(value: float) -> str:
    """A number with one decimal, as the page's language writes it (12.5, 12,5)."""
    return format_decimal(value, "#,##0.0", locale=current_locale())


def language_choices() -> list[tuple[str, str]]:
    """(tag, "Name (tag)") of the languages offered, by name."""
    return sorted(((tag, f"{language_name(tag)} ({tag})") for tag in dict.fromkeys(COMMON)),
                  key=lambda pair: pair[1].casefold())


def _text(form: Any, key: str) -> str:
    value = form.get(key, "")
    return value[:MAX_TEXT].replace("\r\n", "\n") if isinstance(value, str) else ""


def posted_versions(form: Any, prefix: str = "version") -> list[dict[str, str]] | None:
    """The versions the editor posted under `prefix` (`clean_versions` judges them), or None
    when the versions section was not on the page."""
    if f"{prefix}s-shown" not in form:
        return None
    numbers = sorted({int(m.group(1)) for key in form
                      if (m := re.match(rf"^{re.escape(prefix)}-([0-9]{{1,2}})-locale$", key))})
    versions = [{"locale": _text(form, f"{prefix}-{n}-locale"),
                 "subject": _text(form, f"{prefix}-{n}-subject"),
                 "preheader": _text(form, f"{prefix}-{n}-preheader"),
                 "body": _text(form, f"{prefix}-{n}-body")}
                for n in numbers if f"{prefix}-{n}-remove" not in form]
    new = (_text(form, f"{prefix}-new-tag").strip()
           or _text(form, f"{prefix}-new-locale").strip())
    if new:
        versions.append({"locale": new, "subject": _text(form, f"{prefix}-new-subject"),
                         "preheader": _text(form, f"{prefix}-new-preheader"),
                         "body": _text(form, f"{prefix}-new-body")})
    return versions


def install(bp: Blueprint) -> None:
    @bp.app_context_processor
    def languages() -> dict[str, Any]:
        return {"language_name": language_name, "language_choices": language_choices,
                "decimal1": decimal1}
