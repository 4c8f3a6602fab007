"""Tracking at Send: the one call the Send transaction makes (broadcasts/service.py)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from broadside.campaigns.analytics.modes import OFF, freeze
from broadside.campaigns.analytics.rewrite import VERSION_STRIDE, store_links
from broadside.campaigns.content.versions import frozen_versions
from broadside.core.models import Broadcast, Revision


def freeze_tracking(session: Session, broadcast: Broadcast, revision: Revision) -> None:
    """The broadcast's mode frozen (Settings' default if never chosen) and, when it tracks,
    its links stored with their counters at zero (those it tracks: rewrite.store_links), in the
    transaction that freezes its content: the default version's, then each written version's
    from its own first position (`tracked_versions`)."""
    freeze(session, broadcast)
    if broadcast.tracking != OFF:
        for tag, (first, html_template) in tracked_versions(revision).items():
            if tag is None or first:  # a footer's message shares the default's links
                store_links(session, broadcast.id, html_template, broadcast.tracking, first)
        for first, html_template in tracked_variants(revision).values():
            store_links(session, broadcast.id, html_template, broadcast.tracking, first)


def tracked_versions(revision: Revision) -> dict[str | None, tuple[int, str]]:
    """Each message of the revision by its language (None: the default), with the first
    position of its links and its HTML. A footer's message has the default's links, so it
    shares its positions; a written version has its own, from n * VERSION_STRIDE."""
    versions: dict[str | None, tuple[int, str]] = {None: (0, revision.html_template)}
    written = 0
    for tag, message in frozen_versions(revision).items():
        if message.written:
            written += 1
            versions[tag] = (written * VERSION_STRIDE, message.html_template)
        else:
            versions[tag] = (0, message.html_template)
    return versions


def tracked_variants(revision: Revision) -> dict[int, tuple[int, str]]:
    """An A/B test's variants after A (`Revision.variants`), each with the first position of
    its links (after the written versions', from n * VERSION_STRIDE) and its HTML: each
    variant's clicks are counted apart."""
    written = sum(1 for first, _html in tracked_versions(revision).values() if first)
    return {int(key): ((written + int(key)) * VERSION_STRIDE, message["html_template"])
            for key, message in sorted((revision.variants or {}).items(), key=lambda kv: int(kv[0]))}
