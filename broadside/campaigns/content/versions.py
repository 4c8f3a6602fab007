"""A message in several languages: a broadcast's or an automation step's versions, and which
one each reader gets.

As written (`Broadcast.versions`, `AutomationStep.versions`): a list of
`{"locale", "subject", "preheader", "body"}`, each body in the message's own format; the
message's own fields are the default version, read by everyone whose language has none.

As frozen (`Revision.versions`, `AutomationRevision.versions`): `{"default_locale": tag,
"messages": {tag: {"subject", "preheader", "html_template", "text_template", "written"}}}`
(a written version also keeps its `body` as written, expanded),
one message per language a reader may be given something else in: each version the owner
wrote (`written`), and each language Broadside speaks whose footer differs from the
default's (the owner's words, Broadside's footer in the reader's language). A reader gets the
message `version_for` picks, else the revision's columns (the default version, in
`default_locale`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from broadside.core.errors import ValidationError
from broadside.core.i18n import _, clean_locale, language_of, shipped

MAX_VERSIONS = 20
MAX_LINE_CHARS = 300  # the subject's and preheader's column width
MAX_BODY_CHARS = 1_000_000


def clean_versions(raw: Any, *, default_locale: str | None = None) -> list[dict[str, str]] | None:
    """The versions as stored, or None for none. Raises ValidationError (field `versions`)
    naming the version and what is wrong: not a list of objects, a locale that is not a
    language tag, the same language twice (or the default version's), a missing subject, a
    field too long."""
    if raw is None or raw == []:
        return None
    if not isinstance(raw, list) or len(raw) > MAX_VERSIONS:
        raise ValidationError(_("Versions must be a list of at most %(n)s languages.",
                                n=MAX_VERSIONS), field="versions")
    cleaned: list[dict[str, str]] = []
    seen = {clean_locale(default_locale)} if default_locale else set()
    for index, item in enumerate(raw, start=1):
        if not isinstance(item, dict):
            raise ValidationError(_("Version %(n)s must be an object with a locale, a subject "
                                    "and a body.", n=index), field="versions")
        locale = clean_locale(item.get("locale"))
        if locale is None:
            raise ValidationError(_("Version %(n)s: “%(locale)s” is not a language tag (such "
                                    "as de, fr or pt-BR).", n=index,
                                    locale=str(item.get("locale") or "")[:40]), field="versions")
        if locale in seen:
            raise ValidationError(_("Version %(n)s: there is already a version in %(locale)s.",
                                    n=index, locale=locale), field="versions")
        seen.add(locale)
        fields = {}
        for name, limit in (("subject", MAX_LINE_CHARS), ("preheader", MAX_LINE_CHARS),
                            ("body", MAX_BODY_CHARS)):
            value = item.get(name, "")
            if value is None:
                value = ""
            if not isinstance(value, str):
                raise ValidationError(_("Version %(n)s: %(field)s must be text.", n=index,
                                        field=name), field="versions")
            if len(value) > limit:
                raise ValidationError(_("Version %(n)s: %(field)s is longer than %(limit)s "
                                        "characters.", n=index, field=name, limit=limit),
                                      field="versions")
            fields[name] = value.strip() if name != "body" else value
        if not fields["subject"]:
            raise ValidationError(_("Version %(n)s (%(locale)s) needs a subject.", n=index,
                                    locale=locale), field="versions")
        cleaned.append({"locale": locale, **fields})
    return cleaned


def version_for(reader: str | None, locales: Iterable[str]) -> str | None:
    """Which of `locales` a reader of language `reader` gets: the same tag (`pt-BR`), else the
    same language (`de` for `de-AT`, `de-AT` for `de` when it is the only German one), else
    None (the default version)."""
    if not reader:
        return None
    tags = list(locales)
    wanted = reader.lower()
    for tag in tags:
        if tag.lower() == wanted:
            return tag
    language = language_of(reader)
    same = [tag for tag in tags if language_of(tag) == language]
    bare = [tag for tag in same if "-" not in tag]
    chosen = bare or same
    return chosen[0] if chosen else None


@dataclass(frozen=True)
class FrozenMessage:
    """One language's frozen message, as the worker and the archive read it."""

    locale: str  # its language tag (the default version's: the installation's at Send)
    subject: str
    preheader: str
    html_template: str
    text_template: str
    written: bool  # a version the owner wrote (the archive publishes these), or a footer's


def default_locale(revision: Any) -> str:
    """The language the default version was frozen as (English before languages existed)."""
    return (revision.versions or {}).get("default_locale") or "en"


def frozen_versions(revision: Any) -> dict[str, FrozenMessage]:
    """A revision's other-language messages by tag (none for revisions before languages)."""
    messages = (revision.versions or {}).get("messages") or {}
    return {tag: FrozenMessage(tag, entry["subject"], entry.get("preheader", ""),
                               entry["html_template"], entry["text_template"],
                               bool(entry.get("written")))
            for tag, entry in messages.items()}


def default_message(revision: Any) -> FrozenMessage:
    return FrozenMessage(default_locale(revision), revision.subject, revision.preheader,
                         revision.html_template, revision.text_template, True)


def tag_for(wanted: Iterable[str | None], tags: Iterable[str]) -> str | None:
    """Which message a reader gets, whose languages are `wanted` (their own, their list's,
    Settings'): the first language that has one; a language Broadside speaks with none gets
    the default (its footer is that language's when the default's is); one it does not speak
    gives way to the next. None: the default version."""
    tags = list(tags)
    for language in wanted:
        if not language:
            continue
        tag = version_for(language, tags)
        if tag is not None or shipped(language):
            return tag
    return None


def frozen_message(revision: Any, *wanted: str | None) -> FrozenMessage:
    """What a reader whose languages are `wanted` is sent of `revision` (`tag_for`)."""
    versions = frozen_versions(revision)
    tag = tag_for(wanted, versions)
    return versions[tag] if tag is not None else default_message(revision)


def written_versions(revision: Any) -> list[FrozenMessage]:
    """The versions the owner wrote, the default first: what the archive publishes."""
    return [default_message(revision)] + [
        message for message in frozen_versions(revision).values() if message.written]
