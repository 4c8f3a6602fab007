"""Which message each reader is sent, in one slice: their language (their own, else their
list's, else Settings' default for readers), the revision's message for it
(`broadside.campaigns.content.versions.version_for`), compiled once per slice.

Nothing is written here: every language's message was frozen at Send (or at a step's save);
the worker only picks."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.campaigns.analytics.rewrite import Tracker
from broadside.campaigns.analytics.sending import tracked_variants, tracked_versions
from broadside.campaigns.content.versions import FrozenMessage, frozen_versions, tag_for
from broadside.campaigns.content.versions import default_locale as default_locale_of
from broadside.core.models import MailingList
from broadside.core.site_settings import get_settings
from broadside.mail.rendering import CompiledRevision, compiled_revision
from broadside.mail.signup_texts import default_language


@dataclass
class Chosen:
    compiled: CompiledRevision
    tracker: Tracker | None
    language: str  # its content's language: the email's Content-Language


class ReaderLanguages:
    """A reader's language, their list's and Settings' read once per slice."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.default = default_language(get_settings(session))
        self.lists: dict[int | None, str | None] = {}

    def of(self, locale: str | None, list_id: int | None) -> tuple[str, ...]:
        """The reader's languages, most wanted first: their own, their list's, Settings'."""
        if list_id not in self.lists:
            self.lists[list_id] = None if list_id is None else self.session.scalar(
                select(MailingList.language).where(MailingList.id == list_id))
        return tuple(tag for tag in (locale, self.lists[list_id], self.default) if tag)


class RevisionMessages:
    """One revision's messages by language, each compiled (and given its tracker) on first use."""

    def __init__(self, revision: object, compiled: CompiledRevision, tracker: Tracker | None) -> None:
        self.versions: dict[str, FrozenMessage] = frozen_versions(revision)
        self.language = default_locale_of(revision)
        self.default = Chosen(compiled, tracker, self.language)
        self.revision = revision
        self.chosen: dict[str, Chosen] = {}

    def for_variant(self, variant: int) -> Chosen:
        """An A/B test's variant (0: the revision's own message, A)."""
        frozen = getattr(self.revision, "variants", None) or {}
        key = str(variant)
        if key not in frozen:
            return self.default
        if key not in self.chosen:
            message = frozen[key]
            tracker = self.default.tracker
            if tracker is not None:
                first, html_template = tracked_variants(self.revision)[variant]  # type: ignore[arg-type]
                tracker = tracker.for_version(html_template, first)
            self.chosen[key] = Chosen(compiled_revision(message["subject"],
                                                        message["html_template"],
                                                        message["text_template"]),
                                      tracker, self.language)
        return self.chosen[key]

    def for_reader(self, wanted: tuple[str, ...]) -> Chosen:
        """The message for a reader whose languages are `wanted` (ReaderLanguages.of)."""
        tag = tag_for(wanted, self.versions) if self.versions else None
        if tag is None:
            return self.default
        if tag not in self.chosen:
            message = self.versions[tag]
            tracker = self.default.tracker
            if tracker is not None:
                first, html_template = tracked_versions(self.revision)[tag]  # type: ignore[arg-type]
                tracker = tracker.for_version(html_template, first)
            self.chosen[tag] = Chosen(
                compiled_revision(message.subject, message.html_template, message.text_template),
                tracker, tag if message.written else self.language)
        return self.chosen[tag]
