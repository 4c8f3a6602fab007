"""The language of a public page (sign-up, unsubscribe, preferences, the archive), one rule for
all of them, first that Broadside speaks wins:

1. `?lang=` (a link that asks for a language, a language switcher);
2. the reader's own language (`Subscriber.locale`), on a page that knows its reader (a
   signed link);
3. the browser's Accept-Language, when it names a language Broadside speaks;
4. the list's language (`MailingList.language`);
5. Settings' default language for readers (`SiteSettings.default_language`);
6. English.

So a German reader's unsubscribe page is German even in an English browser, a page that knows
only its list follows the browser, and a browser asking for Italian gets the list's language.
A page whose content (the owner's words) is in a language written right to left says so with
`content_direction` (`html_lang`/`html_dir` passed to render_template).
"""

from __future__ import annotations

from typing import Any

from flask import g, request

from broadside.core.i18n import browser_preference, direction, reader_locale, shipped
from broadside.core.models import MailingList, SiteSettings
from webapp.extensions import db
from webapp.i18n import use_locale


def _default_language() -> str | None:
    if "reader_default_language" not in g:
        settings = db.session.get(SiteSettings, 1)
        g.reader_default_language = settings.default_language if settings is not None else None
    return g.reader_default_language


def browser_language() -> str | None:
    """The shipped language the browser's Accept-Language names first, or None."""
    return browser_preference(request.headers.get("Accept-Language"))


def asked_language() -> str | None:
    """`?lang=` when Broadside speaks it."""
    return shipped(request.args.get("lang"))


def page_language(mailing_list: MailingList | str | None = None, reader: str | None = None
                  ) -> str:
    """Choose the page's language (the module's rule; `mailing_list`: the list, or its
    language) and speak it for the rest of the request; returns it."""
    list_language = (mailing_list.language if isinstance(mailing_list, MailingList)
                     else mailing_list)
    chosen = reader_locale(asked_language(), reader, browser_language(), list_language,
                           _default_language())
    return use_locale(chosen)


def lang_arg() -> dict[str, str]:
    """`{"lang": ...}` to keep `?lang=` on the links and forms of a page that was asked for
    one (url_for(..., **lang_arg())), else nothing."""
    asked = asked_language()
    return {"lang": asked} if asked else {}


def content_markup(content_language: str | None) -> dict[str, Any]:
    """`html_lang`/`html_dir` for a page whose main content is in `content_language` when it
    is written right to left (an owner's Hebrew texts): the page's layout follows the content.
    Nothing otherwise (the context processor's, from the page's language)."""
    if content_language and direction(content_language) == "rtl":
        return {"html_lang": content_language, "html_dir": "rtl"}
    return {}
