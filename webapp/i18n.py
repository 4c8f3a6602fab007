"""The language of each request: Flask-Babel for templates, dates and numbers, and the domain's
`broadside.core.i18n` for the messages Python writes; both read the same catalogs and both
follow the one locale chosen here.

- A signed-in person's pages: their own choice (Settings -> Your account), else their
  browser's Accept-Language.
- Public pages: `?lang=` when Broadside speaks it, else the browser's. A page that knows its
  reader (an unsubscribe link, the preferences page) then calls `use_locale` with theirs.
- The API, the metrics and the health checks: English, always (their readers are programs and
  the people who write them; the OpenAPI document is in English).
"""

from __future__ import annotations

from typing import Any

from flask import Flask, g, request
from flask_babel import Babel, refresh
from flask_login import current_user

from broadside.core.i18n import (
    DEFAULT_LOCALE,
    LOCALE_NAMES,
    LOCALES,
    current_locale,
    direction,
    negotiate,
    reset_locale,
    set_locale,
    shipped,
)

ENGLISH_ONLY = ("/api/", "/metrics", "/healthz", "/readyz", "/static/")


def request_locale() -> str:
    """The locale this request starts in (see the module's docstring)."""
    if request.path.startswith(ENGLISH_ONLY):
        return DEFAULT_LOCALE
    asked = shipped(request.args.get("lang"))
    if asked:
        return asked
    if getattr(current_user, "is_authenticated", False):
        chosen = shipped(getattr(current_user, "locale", None))
        if chosen:
            return chosen
    return negotiate(request.headers.get("Accept-Language"))


def use_locale(locale: str | None) -> str:
    """Speak `locale` (its nearest shipped language, else English) for the rest of this
    request: the page of a reader who chose theirs."""
    set_locale(locale or DEFAULT_LOCALE)
    refresh()  # Flask-Babel caches the request's locale: read it again
    return current_locale()


def install_i18n(app: Flask) -> None:
    Babel(app, locale_selector=current_locale, default_translation_directories="translations")

    @app.before_request
    def choose_locale() -> None:
        g.locale_token = set_locale(request_locale())
        refresh()  # Flask-Babel keeps a catalog per app context: tests share one across requests

    @app.teardown_request
    def forget_locale(_exc: BaseException | None) -> None:
        token = g.pop("locale_token", None)
        if token is not None:
            reset_locale(token)

    @app.context_processor
    def language() -> dict[str, Any]:
        locale = current_locale()
        return {"html_lang": locale, "html_dir": direction(locale), "LOCALES": LOCALES,
                "LOCALE_NAMES": LOCALE_NAMES, "text_direction": direction}
