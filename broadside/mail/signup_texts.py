"""The owner's words for the double opt-in email and the public sign-up pages.

Each text has a default (the words Broadside used before they were editable), so an owner who
never opens Settings -> Design sees no change, and "reset" is simply forgetting the owner's
version (only texts that differ from their default are stored).

The texts take merge fields, checked by broadside.mail.merge_fields when they are saved (a mistake
is refused with the line, or, for a field that does not exist there, the closest one that does):
- the email has `email` and `list_name`, and not the broadcasts' `name` and `attributes`:
  on a public form anyone can type anything there, and this email goes from the owner's
  address to whatever address was typed (a spammer's pitch must not ride on it);
- the pages have `list_name` and `list_description` (nobody is known yet on a public page).
Page texts are plain text (a blank line starts a paragraph; the page escapes them); the
email's body is Markdown, like a broadcast's, with the confirm button after it.

Languages: the owner's texts (`SiteSettings.signup_texts`, `footer_text`) are the default
language's (`SiteSettings.default_language`); `SiteSettings.localized_texts` holds a version
per other language, {tag: {key: text}} with the keys of TEXTS and "footer_text". A reader gets
`texts_for(settings, their locale)`: key by key their language's text, else the default
language's, else Broadside's own default words translated into their language. The footer of
every email: `footer_text_for(settings, locale)` (the same fallback).
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass, replace

from jinja2 import TemplateSyntaxError, meta
from sqlalchemy.orm import Session

from broadside.core.i18n import (
    LOCALE_NAMES,
    LOCALES,
    _,
    direction,
    reader_locale,
    shipped,
    speaking,
)
from broadside.core.models import MailingList, SiteSettings, Subscriber
from broadside.core.site_settings import SettingsError, get_settings
from broadside.mail.confirmation import render_confirmation
from broadside.mail.design import clean_footer_text, current_design, email_design
from broadside.mail.merge_fields import MergeError, check_merge_fields, compile_template
from broadside.mail.merge_sandbox import TEXT_ENV, render_bounded
from broadside.mail.rendering import RENDER_ERRORS, RenderedEmail

log = logging.getLogger(__name__)


def N_(message: str) -> str:
    """Marks a message for the catalogs, translated where it is shown (`_(text.default)`)."""
    return message


EMAIL_FIELDS = ("email", "list_name")
# Fields of a broadcast that the confirmation email refuses, and why.
STRANGERS_TEXT = ("name", "attributes")
PAGE_FIELDS = ("list_name", "list_description")


@dataclass(frozen=True)
class Text:
    key: str
    label: str
    default: str
    fields: tuple[str, ...]
    max_length: int
    where: str  # how an error message names it
    one_line: bool = False
    required: bool = False


# Labels, defaults and names are English here, translated where they are shown.
TEXTS: tuple[Text, ...] = (
    Text("optin_subject", N_("Confirmation email: subject"),
         N_("Confirm your subscription to {{ list_name }}"), EMAIL_FIELDS, 200,
         N_("email's subject"), one_line=True, required=True),
    Text("optin_body", N_("Confirmation email: message (Markdown; the confirm button follows it)"),
         N_("Hello,\n\nSomeone (we hope you) asked to subscribe this address to "
            "**{{ list_name }}**. To confirm, press the button below, then the button on the "
            "page it opens.\n\nIf it was not you, ignore this email: you will not be subscribed "
            "and will hear nothing more."), EMAIL_FIELDS, 5000, N_("email's message")),
    Text("join_heading", N_("Sign-up page: heading"), N_("Subscribe to {{ list_name }}"),
         PAGE_FIELDS, 200, N_("page's heading"), one_line=True, required=True),
    Text("join_intro", N_("Sign-up page: introduction"), "{{ list_description }}", PAGE_FIELDS,
         2000, N_("page's introduction")),
    Text("check_inbox", N_("After signing up: “check your inbox” text"),
         N_("If that address can join {{ list_name }}, a confirmation email is on its way. "
            "Follow the link in it to finish subscribing."), PAGE_FIELDS, 2000,
         N_("“check your inbox” text"), required=True),
    Text("confirmed", N_("After confirming: “you are subscribed” text"),
         N_("Thank you: you will receive {{ list_name }}. Every email has a link to unsubscribe "
            "with one click."), PAGE_FIELDS, 2000, N_("“you are subscribed” text"),
         required=True),
)
FOOTER_KEY = "footer_text"
LOCALIZED_KEYS = (*(text.key for text in TEXTS), FOOTER_KEY)
BY_KEY = {text.key: text for text in TEXTS}
_SAMPLE = {"name": "Alex", "email": "alex@example.com", "attributes": {},
           "list_name": "Our newsletter", "list_description": "News every week.",
           "confirm_url": "https://example.invalid/join/confirm/x"}


def default_words(key: str, locale: str | None = None) -> str:
    """Broadside's own words for a text, in `locale` (the language being spoken when None)."""
    if locale is None:
        return _(BY_KEY[key].default)
    with speaking(locale):
        return _(BY_KEY[key].default)


def default_language(settings: SiteSettings | None) -> str:
    """The installation's language for readers (Settings -> Design), a shipped one."""
    return shipped(settings.default_language if settings is not None else None) or LOCALES[0]


def saved_texts(settings: SiteSettings | None) -> dict[str, str]:
    """Every text in the default language: the owner's where they wrote one, Broadside's own
    words (in that language) elsewhere."""
    own = (settings.signup_texts if settings is not None else None) or {}
    language = default_language(settings)
    return {t.key: own[t.key] if isinstance(own.get(t.key), str) else default_words(t.key, language)
            for t in TEXTS}


def current_texts(session: Session) -> dict[str, str]:
    """Reads only: a public page's GET creates no settings row."""
    return saved_texts(session.get(SiteSettings, 1))


def _localized(settings: SiteSettings | None, locale: str | None) -> dict[str, str]:
    """The owner's texts written for `locale`'s language (none for the default language's)."""
    tag = shipped(locale)
    found = ((settings.localized_texts if settings is not None else None) or {}).get(tag or "")
    return {key: value for key, value in (found or {}).items()
            if key in LOCALIZED_KEYS and isinstance(value, str) and value.strip()}


OWN = "own"  # `text_sources`: the owner's default-language text (the columns)


def text_sources(settings: SiteSettings | None, locale: str | None) -> dict[str, tuple[str, str]]:
    """Each text for a reader of `locale`, with the language it is written in: theirs, else
    the default language's (the owner's: `OWN`, for a list's own language may say better),
    else Broadside's own words in their language."""
    speaks = reader_locale(locale)
    localized = _localized(settings, speaks)
    own = (settings.signup_texts if settings is not None else None) or {}
    found = {}
    for text in TEXTS:
        if text.key in localized:
            found[text.key] = (localized[text.key], speaks)
        elif isinstance(own.get(text.key), str):
            found[text.key] = (own[text.key], OWN)
        else:
            found[text.key] = (default_words(text.key, speaks), speaks)
    return found


def own_language(settings: SiteSettings | None, mailing_list: MailingList) -> str:
    """The language of the owner's default texts as a list shows them: the list's, when it is
    one Broadside does not speak (no version can be written in it: an owner writing to a
    Hebrew list writes the default texts in Hebrew), else the default language."""
    if mailing_list.language and not shipped(mailing_list.language):
        return mailing_list.language
    return default_language(settings)


def texts_for(settings: SiteSettings | None, locale: str | None) -> dict[str, str]:
    """Every sign-up text for a reader of `locale`, falling back key by key (`text_sources`)."""
    return {key: text for key, (text, _language) in text_sources(settings, locale).items()}


def footer_text_for(settings: SiteSettings | None, locale: str | None,
                    fallback: str | None = None) -> str:
    """The owner's footer text for an email to a reader of `locale`: the version written for
    their language, else `fallback` (a template's own footer), else the default language's
    (`SiteSettings.footer_text`)."""
    localized = _localized(settings, reader_locale(locale))
    if FOOTER_KEY in localized:
        return localized[FOOTER_KEY]
    if fallback is not None:
        return fallback
    return (settings.footer_text if settings is not None else None) or ""


def _unknown_field(text: Text, source: str) -> str | None:
    try:
        names = meta.find_undeclared_variables(TEXT_ENV.parse(source))
    except TemplateSyntaxError:
        return None  # check_merge_fields says what is wrong
    for name in sorted(names):
        if name in STRANGERS_TEXT and text.fields == EMAIL_FIELDS:
            return _("%(field)s cannot be used in the confirmation email: anyone can type "
                     "anything into the sign-up form, and this email goes from your address to "
                     "whatever address was typed. Fields here: %(fields)s.",
                     field=f"{{{{ {name} }}}}", fields="{{ email }}, {{ list_name }}")
        if name not in text.fields:
            close = difflib.get_close_matches(name, text.fields, n=1, cutoff=0.6)
            available = ", ".join(f"{{{{ {f} }}}}" for f in text.fields)
            if close:
                return _("%(field)s is not a field here. Did you mean %(close)s? Fields here: "
                         "%(fields)s.", field=f"{{{{ {name} }}}}",
                         close=f"{{{{ {close[0]} }}}}", fields=available)
            return _("%(field)s is not a field here. Fields here: %(fields)s.",
                     field=f"{{{{ {name} }}}}", fields=available)
    return None


def clean_text(text: Text, value: str | None, *, optional: bool = False) -> str:
    """`value` for `text`, or SettingsError (field: the text's key) saying what is wrong.
    `optional`: blank is allowed (a language's version: blank uses the default text)."""
    source = (value or "").replace("\r\n", "\n").strip()
    if text.one_line:
        source = " ".join(source.split())
    label = _(text.label).split(" (")[0]
    if not source and optional:
        return ""
    if text.required and not source:
        raise SettingsError(text.key, _("%(label)s cannot be empty: write one, or press "
                                        "“Reset to default”.", label=label))
    if len(source) > text.max_length:
        raise SettingsError(text.key, _("%(label)s is too long (at most %(limit)s characters).",
                                        label=label, limit=f"{text.max_length:,}"))
    where = _(text.where)
    try:
        check_merge_fields(source, where)
        unknown = _unknown_field(text, source)
        if unknown:
            raise MergeError(unknown)
        render_bounded(compile_template(TEXT_ENV, source, where), _SAMPLE,
                       limit=100_000, what=where)
    except MergeError as exc:
        raise SettingsError(text.key, exc.message) from None
    except RENDER_ERRORS as exc:  # a value that fails even for the sample (say, 1 / 0)
        raise SettingsError(text.key, _("The %(where)s has a merge field that fails even for a "
                                        "sample subscriber (%(error)s).", where=where,
                                        error=str(exc))) from None
    return source


def update_texts(session: Session, values: dict[str, str], *, reset: str | None = None
                 ) -> SiteSettings:
    """Save every text in `values` (all checked first, then one commit); `reset` names one
    to put back to its default (the others typed are saved with it, so none is lost)."""
    cleaned: dict[str, str] = {}
    for text in TEXTS:
        if text.key == reset:
            continue
        if text.key in values:
            cleaned[text.key] = clean_text(text, values[text.key])
    settings = get_settings(session)
    own = dict(settings.signup_texts or {})
    own.update(cleaned)
    if reset is not None:
        own.pop(reset, None)
    language = default_language(settings)
    # Broadside's own words (in English or in the default language) are not the owner's.
    settings.signup_texts = {
        key: value for key, value in own.items() if key in BY_KEY
        and value not in (BY_KEY[key].default, default_words(key, language))} or None
    session.commit()
    return settings


def check_language(settings: SiteSettings, locale: str | None) -> str:
    """A language the owner may write versions in: shipped, not the default one."""
    tag = locale if locale in LOCALES else None
    if tag is None:
        raise SettingsError("locale", _("“%(locale)s” is not a language Broadside speaks. "
                                        "Choose one of: %(names)s.", locale=str(locale or "")[:40],
                                        names=", ".join(LOCALE_NAMES.values())))
    if tag == default_language(settings):
        raise SettingsError("locale", _("%(language)s is the default language: its texts are "
                                        "the default ones.", language=LOCALE_NAMES[tag]))
    return tag


def update_localized(session: Session, locale: str | None, values: dict[str, str]
                     ) -> SiteSettings:
    """Save one language's versions (blank: use the default text); all checked first, then
    one commit. SettingsError (nothing saved) for an unknown language or a wrong text."""
    settings = get_settings(session)
    tag = check_language(settings, locale)
    cleaned: dict[str, str] = {}
    for key in LOCALIZED_KEYS:
        if key not in values:
            continue
        if key == FOOTER_KEY:
            cleaned[key] = clean_footer_text(values[key])
        else:
            with speaking(tag):  # Broadside's own words in that language are not a version
                words = default_words(key)
            cleaned[key] = clean_text(BY_KEY[key], values[key], optional=True)
            if cleaned[key] == words:
                cleaned[key] = ""
    every = {lang: dict(texts) for lang, texts in (settings.localized_texts or {}).items()
             if isinstance(texts, dict)}
    mine = every.get(tag, {})
    mine.update(cleaned)
    mine = {key: value for key, value in mine.items() if value}
    if mine:
        every[tag] = mine
    else:
        every.pop(tag, None)
    settings.localized_texts = every or None
    session.commit()
    return settings


def set_default_language(session: Session, locale: str | None) -> SiteSettings:
    """The installation's language for readers who have none and whose list has none."""
    if locale not in LOCALES:
        raise SettingsError("default_language", _(
            "“%(locale)s” is not a language Broadside speaks. Choose one of: %(names)s.",
            locale=str(locale or "")[:40], names=", ".join(LOCALE_NAMES.values())))
    settings = get_settings(session)
    settings.default_language = locale
    session.commit()
    return settings


def page_text(texts: dict[str, str], key: str, mailing_list: MailingList) -> list[str]:
    """A page text filled in for a list, as paragraphs (plain text: the page escapes it).
    A text that fails to render (saved before a rule tightened) falls back to its default."""
    context = {"list_name": mailing_list.name, "list_description": mailing_list.description or ""}
    for source in (texts[key], default_words(key)):
        try:
            text = render_bounded(compile_template(TEXT_ENV, source, key), context,
                                  limit=100_000, what=key)
            break
        except RENDER_ERRORS:  # the default always renders
            log.warning("sign-up text %s could not be filled in; using the default", key)
    return [" ".join(p.split("\n")) for p in text.replace("\r", "").split("\n\n") if p.strip()]


def confirmation_email(session: Session, mailing_list: MailingList, subscriber: Subscriber,
                       link: str) -> RenderedEmail:
    """The double opt-in email for one person, in the owner's words and design, in the
    reader's language (theirs, else the list's, else Settings'). Should the owner's text fail
    for this person, Broadside's own words are used: the email must go."""
    settings = session.get(SiteSettings, 1)
    locale = reader_locale(subscriber.locale, mailing_list.language,
                           default_language(settings))
    sources = text_sources(settings, locale)
    from_name = settings.sender_name if settings is not None else ""
    postal = settings.postal_address if settings is not None else ""
    design = replace(email_design(current_design(session), from_name=from_name),
                     footer_text=footer_text_for(settings, locale))
    (owners_subject, written_in), (owners_body, _body_in) = (sources["optin_subject"],
                                                             sources["optin_body"])
    if written_in == OWN:
        written_in = own_language(settings, mailing_list)
    with speaking(locale):  # the layout's own words (the button, the footer's) in theirs
        for subject, body, language in (
                (owners_subject, owners_body, written_in),
                (default_words("optin_subject"), default_words("optin_body"), locale)):
            try:
                return render_confirmation(subject=subject, body_markdown=body,
                                           from_name=from_name, postal_address=postal,
                                           design=design, email=subscriber.email,
                                           name=subscriber.name or "",
                                           attributes=subscriber.attributes or {},
                                           list_name=mailing_list.name, confirm_url=link,
                                           language=language, direction=direction(language))
            except MergeError as exc:
                log.warning("the confirmation email's text failed for subscriber %s (%s); "
                            "sending the default text", subscriber.id, exc.message)
    raise AssertionError("the default confirmation email always renders")
