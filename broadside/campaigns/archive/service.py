"""The public archive and the view-in-browser link: what the owner switches, what the
public pages read.

A list's archive is off until the owner turns it on. A broadcast appears in it only once the
owner publishes it (after Send was pressed: its revision is frozen), as the public copy made
then (copies.public_copy: no reader's data, no unsubscribe link). Everything public answers
NotFound alike for a list with the archive off, an unpublished broadcast, another list's
broadcast, or nothing at all, so ids reveal nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from broadside.campaigns.archive.copies import (
    PublicCopy,
    Reader,
    public_copy,
    reader_copy,
    version_copy,
)
from broadside.campaigns.archive.links import ViewTokens, link_wanted
from broadside.campaigns.content.versions import default_locale, written_versions
from broadside.core.errors import Conflict, DomainError, NotFound
from broadside.core.i18n import _
from broadside.core.models import ArchivedIssue, Broadcast, Delivery, MailingList, Revision, Subscriber
from broadside.core.models.sending import BroadcastStatus
from broadside.core.site_settings import get_settings
from broadside.core.timeutil import utcnow
from broadside.mail.merge_fields import MergeError
from broadside.mail.rendering import RenderedEmail
from broadside.mail.signup_texts import default_language

# Publishing needs the frozen revision of a broadcast that went (or is going) out.
PUBLISHABLE = (BroadcastStatus.SENDING.value, BroadcastStatus.PAUSED.value,
               BroadcastStatus.SENT.value)
FEED_ENTRIES = 20


def N_(message: str) -> str:
    return message


NOT_HERE = N_("There is nothing here.")  # shown through _()


class BadLink(DomainError):
    """A view-in-browser link that was changed, cut short or never made by us."""

    status_code = 400


# ------------------------------------------------------------------ the owner's switches

def set_archive(session: Session, list_id: int, enabled: bool) -> MailingList:
    mailing_list = session.get(MailingList, list_id)
    if mailing_list is None:
        raise NotFound(_("That list does not exist."))
    if mailing_list.archive_enabled != enabled:
        mailing_list.archive_enabled = enabled
        mailing_list.archive_changed_at = utcnow()
    session.commit()
    return mailing_list


@dataclass(frozen=True)
class BroadcastArchive:
    """What the broadcast page shows about the archive and the view-in-browser link."""

    broadcast_id: int
    list_id: int | None
    list_name: str
    archive_on: bool
    published: bool
    slug: str
    why_not: str  # why it cannot be published now; "" when it can
    view_choice: bool | None  # the owner's choice; None: as the list's archive
    view_link: bool  # whether copies built now carry the link


def broadcast_archive(session: Session, broadcast_id: int) -> BroadcastArchive:
    row = session.execute(
        select(Broadcast.status, Broadcast.list_id, Broadcast.view_in_browser, MailingList.name,
               MailingList.archive_enabled, ArchivedIssue.slug)
        .outerjoin(MailingList, MailingList.id == Broadcast.list_id)
        .outerjoin(ArchivedIssue, ArchivedIssue.broadcast_id == Broadcast.id)
        .where(Broadcast.id == broadcast_id)).first()
    if row is None:
        raise NotFound(_("That broadcast does not exist."))
    status, list_id, view_choice, list_name, archive_on, slug = row
    why_not = ""
    if list_id is None:
        why_not = _("Only a broadcast sent to a list can be published in that list's archive.")
    elif status not in PUBLISHABLE:
        why_not = _("It can be published once it has been sent.")
    return BroadcastArchive(
        broadcast_id=broadcast_id, list_id=list_id, list_name=list_name or "",
        archive_on=bool(archive_on), published=slug is not None, slug=slug or "",
        why_not=why_not, view_choice=view_choice,
        view_link=bool(archive_on) if view_choice is None else view_choice)


def publish(session: Session, broadcast_id: int, published: bool) -> BroadcastArchive:
    """Publish the broadcast to its list's archive (its public copy made now), or take it
    out. Raises Conflict when it cannot be published, MergeError when a merge field needs a
    reader."""
    state = broadcast_archive(session, broadcast_id)
    if published and not state.published:
        if state.why_not:
            raise Conflict(state.why_not)
        revision = session.scalar(select(Revision).where(Revision.broadcast_id == broadcast_id))
        broadcast = session.get(Broadcast, broadcast_id)
        assert revision is not None and broadcast is not None and state.list_id is not None
        copy = public_copy(revision)
        session.add(ArchivedIssue(
            broadcast_id=broadcast_id, list_id=state.list_id, slug=copy.slug,
            subject=copy.subject, summary=copy.summary, html=copy.html,
            sent_at=broadcast.queued_at or revision.created_at, published_at=utcnow()))
    elif not published and state.published:
        session.execute(delete(ArchivedIssue).where(ArchivedIssue.broadcast_id == broadcast_id))
    else:
        return state
    if state.list_id is not None:
        mailing_list = session.get(MailingList, state.list_id)
        if mailing_list is not None:
            mailing_list.archive_changed_at = utcnow()
    session.commit()
    return broadcast_archive(session, broadcast_id)


def set_view_link(session: Session, broadcast_id: int, wanted: bool | None) -> bool:
    """The owner's choice for the view-in-browser link (None: as the list's archive); it
    applies to the copies built from the next slice on. Returns whether the link is on."""
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is None:
        raise NotFound(_("That broadcast does not exist."))
    broadcast.view_in_browser = wanted
    session.commit()
    return link_wanted(session, broadcast_id)


# ------------------------------------------------------------------ the public pages

@dataclass(frozen=True)
class IssueLine:
    broadcast_id: int
    slug: str
    subject: str
    summary: str
    sent_at: datetime
    published_at: datetime


def open_archive(session: Session, list_id: int) -> MailingList:
    """The list, when its archive is on."""
    mailing_list = session.get(MailingList, list_id)
    if mailing_list is None or not mailing_list.archive_enabled:
        raise NotFound(_(NOT_HERE))
    return mailing_list


def issues(session: Session, list_id: int, limit: int | None = None) -> list[IssueLine]:
    """The list's published issues, newest first (one indexed query)."""
    query = (select(ArchivedIssue.broadcast_id, ArchivedIssue.slug, ArchivedIssue.subject,
                    ArchivedIssue.summary, ArchivedIssue.sent_at, ArchivedIssue.published_at)
             .where(ArchivedIssue.list_id == list_id)
             .order_by(ArchivedIssue.sent_at.desc(), ArchivedIssue.broadcast_id.desc()))
    if limit is not None:
        query = query.limit(limit)
    return [IssueLine(*row) for row in session.execute(query)]


def issue(session: Session, list_id: int, broadcast_id: int) -> ArchivedIssue:
    """One published issue of a list whose archive is on."""
    open_archive(session, list_id)
    found = session.get(ArchivedIssue, broadcast_id)
    if found is None or found.list_id != list_id:
        raise NotFound(_(NOT_HERE))
    return found


@dataclass(frozen=True)
class IssueVersion:
    """One language of a published issue: the default first (the stored public copy)."""

    locale: str
    copy: PublicCopy
    default: bool


def issue_versions(session: Session, found: ArchivedIssue) -> list[IssueVersion]:
    """The issue in each language its owner wrote it in, the default first; just the default
    for a broadcast frozen before versions. A version that cannot be filled without a
    reader is left out (the default was checked when published)."""
    stored = PublicCopy(subject=found.subject, summary=found.summary, html=found.html,
                        slug=found.slug)
    revision = session.scalar(select(Revision).where(Revision.broadcast_id == found.broadcast_id))
    if revision is None or not revision.versions:
        return [IssueVersion("en", stored, True)]
    shown = [IssueVersion(default_locale(revision), stored, True)]
    for message in written_versions(revision)[1:]:
        try:
            shown.append(IssueVersion(message.locale, version_copy(message), False))
        except MergeError:
            continue
    return shown


def feed_entries(session: Session, list_id: int) -> list[ArchivedIssue]:
    """The newest published issues, whole, for the feed."""
    return list(session.scalars(
        select(ArchivedIssue).where(ArchivedIssue.list_id == list_id)
        .order_by(ArchivedIssue.sent_at.desc(), ArchivedIssue.broadcast_id.desc())
        .limit(FEED_ENTRIES)))


@dataclass(frozen=True)
class ArchiveVersion:
    """What the archive's pages of a list depend on in the database, read in one aggregate
    query: equal versions render equal pages (the issues never change once published, and
    every publish and unpublish moves `archive_changed_at`; the count and the newest
    publication catch an issue gone with its broadcast)."""

    key: tuple
    last_modified: datetime


def archive_version(session: Session, mailing_list: MailingList) -> ArchiveVersion:
    count, latest = session.execute(
        select(func.count(), func.max(ArchivedIssue.published_at))
        .where(ArchivedIssue.list_id == mailing_list.id)).one()
    moments = [m for m in (mailing_list.archive_changed_at, latest, mailing_list.created_at) if m]
    key = (mailing_list.id, mailing_list.name, mailing_list.description,
           mailing_list.signup_enabled, mailing_list.archive_changed_at, count, latest)
    return ArchiveVersion(key=key, last_modified=max(moments))


# ------------------------------------------------------------------ view in browser

def reader_view(session: Session, token: str, *, secret_key: str, base_url: str) -> RenderedEmail:
    """The copy a view-in-browser link was made for, filled with that reader's values.

    Raises BadLink for a changed or cut token, NotFound when the copy (or its reader) no
    longer exists or the token was not made for the delivery now at its id."""
    tokens = ViewTokens(secret_key)
    claim = tokens.read(token)
    if claim is None:
        raise BadLink(_("This link is not complete or has been changed. Open it again from "
                        "your email."))
    row = session.execute(
        select(Delivery.broadcast_id, Delivery.list_id, Broadcast.list_id, Subscriber.id,
               Subscriber.email, Subscriber.name, Subscriber.attributes, Subscriber.created_at,
               Subscriber.locale)
        .join(Broadcast, Broadcast.id == Delivery.broadcast_id)
        .join(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.id == claim.delivery_id)).first()
    gone = NotFound(_("This email is no longer available to view online."))
    if row is None:
        raise gone
    (broadcast_id, delivery_list, broadcast_list, subscriber_id, email, name, attributes, joined,
     locale) = row
    if not tokens.matches(claim, broadcast_id, subscriber_id, joined):
        raise gone
    revision = session.scalar(select(Revision).where(Revision.broadcast_id == broadcast_id))
    if revision is None:
        raise gone
    list_id = delivery_list or broadcast_list or 0
    settings = get_settings(session)
    reader = Reader(subscriber_id=subscriber_id, email=email, name=name or "",
                    attributes=attributes or {}, joined=joined, list_id=list_id,
                    languages=(locale, session.scalar(select(MailingList.language).where(
                        MailingList.id == list_id)), default_language(settings)))
    return reader_copy(revision, broadcast_id, reader, secret_key=secret_key, base_url=base_url)
