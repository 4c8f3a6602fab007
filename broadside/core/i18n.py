"""Languages: the ones Broadside speaks, the locale a piece of text is being written in, and
the one way to translate a message.

One set of catalogs serves everything (`webapp/translations/<locale>/LC_MESSAGES/messages.mo`,
compiled from the `.po` beside it): the web app's templates read them through Flask-Babel,
and the domain and the worker through `gettext` here, in the locale `speaking()` set (the
web app sets the request's; the worker the reader's, per message). Outside both: English.

A locale is stored as a language tag (`de`, `pt-BR`): a reader's may be any language (their
broadcast version may be written in it); what Broadside itself writes falls back to the
nearest language it ships (`shipped`), then English.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from functools import lru_cache
from pathlib import Path
from typing import Any

from babel import Locale, UnknownLocaleError
from babel.numbers import format_decimal
from babel.support import LazyProxy, NullTranslations, Translations

DEFAULT_LOCALE = "en"
# The languages Broadside's own words are written in, each named in itself.
LOCALES: tuple[str, ...] = ("en", "de", "fr", "es")
LOCALE_NAMES: dict[str, str] = {"en": "English", "de": "Deutsch", "fr": "Français", "es": "Español"}
# Written right to left (ISO 639-1): Arabic, Hebrew, Persian, Urdu, Yiddish, Pashto, Dhivehi,
# Sorani Kurdish written as `ckb` (three letters), Sindhi and Uyghur in Arabic script.
RTL_LANGUAGES = frozenset({"ar", "he", "fa", "ur", "yi", "ps", "dv", "ckb", "sd", "ug"})
CATALOG_DIR = Path(__file__).resolve().parents[2] / "webapp" / "translations"
MAX_TAG_CHARS = 35  # RFC 5646's practical bound (a language, script, region and a variant)

_TAG = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*")
_current: ContextVar[str] = ContextVar("broadside_locale", default=DEFAULT_LOCALE)


def clean_locale(value: Any) -> str | None:
    """A language tag as stored (`de`, `pt-BR`, `zh-Hant`), or None when `value` is not one
    Babel knows. Case and separators are forgiven: `DE`, `pt_br`."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or len(text) > MAX_TAG_CHARS or not _TAG.fullmatch(text):
        return None
    try:
        locale = Locale.parse(text.replace("-", "_"))
    except (ValueError, TypeError, UnknownLocaleError):
        return None
    return "-".join(part for part in (locale.language, locale.script, locale.territory) if part)


def language_of(locale: str | None) -> str:
    """The language part of a tag: `pt-BR` -> `pt`."""
    return (locale or DEFAULT_LOCALE).replace("_", "-").split("-")[0].lower()


def shipped(locale: str | None) -> str | None:
    """The shipped language nearest to `locale` (`de-AT` -> `de`), or None."""
    if not locale:
        return None
    language = language_of(locale)
    return language if language in LOCALES else None


def reader_locale(*candidates: str | None) -> str:
    """The first of `candidates` (the reader's own, the list's, the installation's) that
    Broadside speaks; English when none is."""
    for candidate in candidates:
        found = shipped(candidate)
        if found:
            return found
    return DEFAULT_LOCALE


def direction(locale: str | None) -> str:
    """`rtl` for a language written right to left, else `ltr`."""
    return "rtl" if language_of(locale) in RTL_LANGUAGES else "ltr"


def browser_preference(accept_language: str | None) -> str | None:
    """The shipped language a browser's Accept-Language prefers most (by its q, then its
    order), or None when it names none."""
    best: tuple[float, int, str] | None = None
    for index, part in enumerate((accept_language or "").split(",")[:20]):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                continue
        found = shipped(tag.strip()) if tag.strip() != "*" else None
        if found and quality > 0 and (best is None or (quality, -index) > best[:2]):
            best = (quality, -index, found)
    return best[2] if best else None


def negotiate(accept_language: str | None) -> str:
    """`browser_preference`, English when the browser names none Broadside speaks."""
    return browser_preference(accept_language) or DEFAULT_LOCALE


@lru_cache(maxsize=16)
def translations(locale: str) -> NullTranslations:
    """The compiled catalog for a shipped language (English: the messages themselves)."""
    if locale == DEFAULT_LOCALE or locale not in LOCALES:
        return NullTranslations()
    return Translations.load(str(CATALOG_DIR), [locale])


def current_locale() -> str:
    return _current.get()


def set_locale(locale: str) -> Token[str]:
    """Speak `locale` until `reset_locale(token)` (the web app: one request)."""
    return _current.set(shipped(locale) or DEFAULT_LOCALE)


def reset_locale(token: Token[str]) -> None:
    _current.reset(token)


@contextmanager
def speaking(locale: str | None) -> Iterator[str]:
    """Write in `locale` (or its nearest shipped language) inside the block."""
    token = set_locale(locale or DEFAULT_LOCALE)
    try:
        yield _current.get()
    finally:
        _current.reset(token)


def gettext(message: str, **variables: Any) -> str:
    """`message` in the current locale, `%(name)s` filled from `variables`."""
    text = translations(_current.get()).gettext(message)
    return text % variables if variables else text


def ngettext(singular: str, plural: str, num: int, **variables: Any) -> str:
    """The form for `num` in the current locale; `%(num)s` is `num`, grouped as the locale
    writes numbers."""
    variables.setdefault("num", format_decimal(num, locale=_current.get()))
    return translations(_current.get()).ngettext(singular, plural, num) % variables


def lazy_gettext(message: str, **variables: Any) -> LazyProxy:
    """A message translated when it is shown, not when it is made (module-level labels)."""
    return LazyProxy(gettext, message, enable_cache=False, **variables)


_ = gettext
_l = lazy_gettext
