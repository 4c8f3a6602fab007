"""Freezing a message in every language a reader may get it in (invariant 8: once, at Send or
at a step's save, so the worker only picks).

The default version (the message's own fields) is frozen in the installation's default
language for readers (Settings); each version the owner wrote in its own language; and, for
each language Broadside speaks that some reader or list has and no version covers, the
default version again with Broadside's footer words and the owner's footer text in that
language. `broadside.campaigns.content.versions` reads the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.campaigns.content.bodies import WrittenBody, body_of
from broadside.campaigns.content.versions import version_for
from broadside.core.errors import ValidationError
from broadside.core.i18n import LOCALES, direction, reader_locale, speaking
from broadside.core.models import MailingList, Subscriber
from broadside.core.site_settings import get_settings
from broadside.mail.rendering import EmailDesign, FrozenContent
from broadside.mail.signup_texts import default_language, footer_text_for


@dataclass
class _VersionSource:
    body: str
    body_format: str
    text_body: str | None
    attachment_ids: list[int] | None


# freeze(subject, preheader, body, design, language, direction) -> the frozen layout, as the
# caller freezes its kind of message (a broadcast's identity and design, a step's).
Freezer = Callable[[str, str, WrittenBody, EmailDesign, str, str], FrozenContent]


def readers_languages(session: Session) -> set[str]:
    """The shipped languages some reader or list has (their nearest): the footers worth
    freezing. One pass over the subscribers' partial index on `locale`."""
    tags = set(session.scalars(select(Subscriber.locale).where(
        Subscriber.locale.is_not(None)).distinct()))
    tags |= set(session.scalars(select(MailingList.language).where(
        MailingList.language.is_not(None)).distinct()))
    return {reader_locale(tag) for tag in tags if tag}


def freeze_in_languages(session: Session, *, subject: str, preheader: str, written: WrittenBody,
                        versions: list[dict[str, Any]] | None, design: EmailDesign,
                        freeze: Freezer, every_language: bool = False
                        ) -> tuple[FrozenContent, dict[str, Any]]:
    """The default version frozen, and the revision's `versions` (the shape in versions.py).
    Footers are frozen for the languages readers have now (`readers_languages`), or for
    every language Broadside speaks (`every_language`: a step, frozen at its save, sends to
    readers who arrive later). Raises ValidationError from the first version that does not
    freeze, naming its language."""
    settings = get_settings(session)
    default = default_language(settings)

    def one(subject: str, preheader: str, body: WrittenBody, language: str,
            footer_language: str) -> FrozenContent:
        footer = footer_text_for(settings, footer_language, design.footer_text)
        with speaking(footer_language):
            return freeze(subject, preheader, body, replace(design, footer_text=footer),
                          language, direction(language))

    frozen = one(subject, preheader, written, default, reader_locale(default))
    messages: dict[str, dict[str, Any]] = {}
    for version in versions or ():
        tag = version["locale"]
        try:
            body = version_body(session, version["body"], written)
            made = one(version["subject"], version["preheader"], body, tag,
                       reader_locale(tag, default))
        except ValidationError as exc:  # said with the version it is in
            raise ValidationError(f"{tag}: {exc.message}", field=exc.field) from None
        messages[tag] = {**_entry(version["subject"], version["preheader"], made, written=True),
                         "body": body.body}  # as written: the archive's page shows it
    written_tags = [version["locale"] for version in versions or ()]
    wanted = set(LOCALES) if every_language else readers_languages(session) & set(LOCALES)
    for language in sorted(wanted):
        if language == reader_locale(default) or version_for(language, written_tags):
            continue
        messages[language] = _entry(subject, preheader,
                                    one(subject, preheader, written, default, language),
                                    written=False)
    return frozen, {"default_locale": default, "messages": messages}


def version_body(session: Session, body: str, written: WrittenBody) -> WrittenBody:
    """Another body for the same message (a version's, an A/B variant's): in the message's
    format, with its blocks in and its attachments."""
    return body_of(session, _VersionSource(body, written.body_format, None,
                                           list(written.attachment_ids)))


def freeze_default(session: Session, *, subject: str, preheader: str, written: WrittenBody,
                   design: EmailDesign, freeze: Freezer) -> FrozenContent:
    """A message frozen as the default version is: in the default language for readers, with
    its footer (an A/B test's variants)."""
    settings = get_settings(session)
    default = default_language(settings)
    footer_language = reader_locale(default)
    footer = footer_text_for(settings, footer_language, design.footer_text)
    with speaking(footer_language):
        return freeze(subject, preheader, written, replace(design, footer_text=footer), default,
                      direction(default))


def _entry(subject: str, preheader: str, frozen: FrozenContent, *, written: bool) -> dict[str, Any]:
    return {"subject": subject, "preheader": preheader, "html_template": frozen.html_template,
            "text_template": frozen.text_template, "written": written}
