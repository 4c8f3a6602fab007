"""The media library: images uploaded once, kept in the database, put in any email by URL.

- One row per uploaded file, found by the SHA-256 of its bytes: the same file uploaded twice
  is the same image (UNIQUE `media.sha256`; two uploads at the same moment meet the
  constraint, and the second reads the first's row).
- Its public URLs are `<base>/media/<sha256>.<ext>` and `<base>/media/<sha256>@2x.<ext>`, or,
  when the installation serves them from elsewhere (MEDIA_URL: a bucket or a CDN holding
  copies of the files), `MEDIA_URL + "<sha256>.<ext>"`. The bytes behind a URL never change.
- Where an image is used: the bodies (and plain-text parts) of broadcasts not yet sent,
  automation steps not removed, and transactional templates not deleted, searched for its
  SHA-256, which every URL of it holds whatever the base.
- It cannot be deleted while something would still send it: a draft, a broadcast scheduled
  or being sent, a live (enabled or paused) automation, a transactional template (its next
  message would show a broken image). A disabled automation is listed, not blocking: enabling
  it later shows the owner its body. Emails already sent lose the image if it is deleted;
  the page says so before the owner confirms.

Nothing here knows the web: the caller passes the base URLs, the design's width and who acts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

from sqlalchemy import ColumnElement, delete, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _
from broadside.core.models import (
    Automation,
    AutomationStep,
    Broadcast,
    Media,
    MediaFile,
    TransactionalTemplate,
)
from broadside.core.models.media import MAX_ALT, MAX_ORIGINAL_NAME
from broadside.mail.media_images import CONTENT_TYPES, prepare

SHA256 = re.compile(r"[0-9a-f]{64}")
# A public file name: /media/<sha256>.<ext> or /media/<sha256>@2x.<ext>
FILE_NAME = re.compile(r"(?P<sha>[0-9a-f]{64})(?P<two>@2x)?\.(?P<ext>png|jpg|gif|webp)")
UNSENT = ("draft", "scheduled", "queued", "sending", "paused")
LIVE_AUTOMATION = ("enabled", "paused")


# ---------------------------------------------------------------- URLs

def public_name(media: Media, variant: str = "1x") -> str:
    return f"{media.sha256}{'@2x' if variant == '2x' else ''}.{media.ext}"


def url_of(media: Media, *, base_url: str, media_url: str = "", variant: str = "1x") -> str:
    """The image's absolute URL: MEDIA_URL + its file name when set, else this app's."""
    name = public_name(media, variant)
    if media_url:
        return media_url + name
    return f"{base_url.rstrip('/')}/media/{name}"


# ---------------------------------------------------------------- upload

def clean_alt(value: str | None) -> str:
    alt = " ".join((value or "").split())
    if len(alt) > MAX_ALT:
        raise ValidationError(_("The alt text is too long (at most %(limit)s characters): say "
                                "what the image shows in a sentence or two.", limit=MAX_ALT),
                              field="alt")
    return alt


def _original_name(name: str | None) -> str:
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1].strip()
    return base[:MAX_ORIGINAL_NAME]


@dataclass(frozen=True)
class Uploaded:
    media: Media
    created: bool  # False: this file was in the library already


def upload(session: Session, data: bytes, *, filename: str | None, alt: str | None,
           design_width: int, uploaded_by: int | None) -> Uploaded:
    """Verify, clean, resize and keep an image (one commit), or raise a ValidationError that
    says what to change. A file already in the library is that image (its alt text given
    now when it had none)."""
    alt_text = clean_alt(alt)
    sha = hashlib.sha256(data).hexdigest()
    found = find_by_sha(session, sha)
    if found is not None:
        return _existing(session, found, alt_text)
    prepared = prepare(data, design_width=design_width)
    media = Media(sha256=sha, ext=prepared.ext, content_type=prepared.content_type,
                  width=prepared.width, height=prepared.height, alt=alt_text,
                  original_name=_original_name(filename), original_bytes=len(data),
                  bytes_1x=len(prepared.one_x),
                  bytes_2x=len(prepared.two_x) if prepared.two_x is not None else None,
                  has_2x=prepared.two_x is not None, animated=prepared.animated,
                  uploaded_by=uploaded_by)
    session.add(media)
    try:
        session.flush()
    except IntegrityError:  # the same file, uploaded at the same moment: theirs stands
        session.rollback()
        found = find_by_sha(session, sha)
        if found is None:
            raise
        return _existing(session, found, alt_text)
    session.add(MediaFile(media_id=media.id, variant="1x", data=prepared.one_x))
    if prepared.two_x is not None:
        session.add(MediaFile(media_id=media.id, variant="2x", data=prepared.two_x))
    session.commit()
    return Uploaded(media, created=True)


def _existing(session: Session, media: Media, alt: str) -> Uploaded:
    if alt and not media.alt:
        media.alt = alt
        session.commit()
    return Uploaded(media, created=False)


# ---------------------------------------------------------------- reading

def find_by_sha(session: Session, sha: str) -> Media | None:
    return session.scalars(select(Media).where(Media.sha256 == sha)).first()


def get_media(session: Session, media_id: int) -> Media:
    media = session.get(Media, media_id)
    if media is None:
        raise NotFound(_("There is no such image in the library."))
    return media


@dataclass(frozen=True)
class StoredFile:
    data: bytes
    content_type: str
    etag: str


def public_file(session: Session, name: str) -> StoredFile | None:
    """The bytes behind a public file name, or None (a name that is not one of ours too)."""
    match = FILE_NAME.fullmatch(name)
    if match is None:
        return None
    variant = "2x" if match["two"] else "1x"
    row = session.execute(
        select(MediaFile.data, Media.content_type)
        .join(Media, Media.id == MediaFile.media_id)
        .where(Media.sha256 == match["sha"], Media.ext == match["ext"],
               MediaFile.variant == variant)).first()
    if row is None:
        return None
    return StoredFile(bytes(row.data), row.content_type or CONTENT_TYPES[match["ext"]],
                      f"{match['sha']}-{variant}")


def _search(query: str) -> list[ColumnElement[bool]]:
    words = query.split()
    conditions: list[ColumnElement[bool]] = []
    for word in words[:8]:
        pattern = "%" + word.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        conditions.append(or_(func.lower(Media.original_name).like(pattern, escape="\\"),
                              func.lower(Media.alt).like(pattern, escape="\\")))
    return conditions


def page(session: Session, *, query: str = "", before: int | None = None,
         limit: int = 48) -> tuple[list[Media], int | None]:
    """Newest first, matching every word of `query` in the name or the alt text; the next
    page's cursor (`before`), None on the last. No image's bytes are read."""
    statement = select(Media).where(*_search(query)).order_by(Media.id.desc()).limit(limit + 1)
    if before is not None:
        statement = statement.where(Media.id < before)
    rows = list(session.scalars(statement))
    following = rows[limit - 1].id if len(rows) > limit else None
    return rows[:limit], following


def page_by_id(session: Session, *, after: int, limit: int) -> tuple[list[Media], int | None]:
    """The API's order: ascending id after the cursor, as every API list pages."""
    rows = list(session.scalars(select(Media).where(Media.id > after)
                                .order_by(Media.id).limit(limit + 1)))
    following = rows[limit - 1].id if len(rows) > limit else None
    return rows[:limit], following


def set_alt(session: Session, media_id: int, alt: str | None) -> Media:
    media = get_media(session, media_id)
    media.alt = clean_alt(alt)
    session.commit()
    return media


# ---------------------------------------------------------------- where it is used

@dataclass(frozen=True)
class Usage:
    kind: str  # "broadcast", "automation", "template"
    id: int  # the broadcast's, the automation's, the template's
    title: str
    state: str  # "draft", "scheduled", "enabled", ...: what it is now
    blocks: bool  # deleting the image would break something still to be sent

    @property
    def words(self) -> str:
        what = {"broadcast": "broadcast", "automation": "automation",
                "template": "transactional template"}[self.kind]
        return f"{what} “{self.title}” ({self.state})"


def _sources(session: Session, sha: str | None) -> Iterable[tuple[str, int, str, str, str, str]]:
    """(kind, id, title, state, body, text_body) of everything that may still send; with
    `sha`, only those whose body or plain text holds it."""
    def holding(*columns: Any) -> list[ColumnElement[bool]]:
        if sha is None:
            return []
        return [or_(*(column.like(f"%{sha}%") for column in columns))]

    for b in session.execute(select(Broadcast.id, Broadcast.subject, Broadcast.status,
                                    Broadcast.body, Broadcast.text_body)
                             .where(Broadcast.status.in_(UNSENT),
                                    *holding(Broadcast.body, Broadcast.text_body))):
        yield "broadcast", b.id, b.subject or "(no subject)", str(b.status), b.body, b.text_body or ""
    for s in session.execute(select(Automation.id, Automation.name, Automation.status,
                                    AutomationStep.position, AutomationStep.body,
                                    AutomationStep.text_body)
                             .join(Automation, Automation.id == AutomationStep.automation_id)
                             .where(AutomationStep.removed_at.is_(None),
                                    Automation.status != "deleted",
                                    *holding(AutomationStep.body, AutomationStep.text_body))):
        yield ("automation", s.id, f"{s.name}, step {s.position}", str(s.status), s.body,
               s.text_body or "")
    for t in session.execute(select(TransactionalTemplate.id, TransactionalTemplate.name,
                                    TransactionalTemplate.body, TransactionalTemplate.text_body)
                             .where(TransactionalTemplate.deleted_at.is_(None),
                                    *holding(TransactionalTemplate.body,
                                             TransactionalTemplate.text_body))):
        yield "template", t.id, t.name, "live", t.body, t.text_body or ""


def _usage(kind: str, id_: int, title: str, state: str) -> Usage:
    blocks = kind != "automation" or state in LIVE_AUTOMATION
    return Usage(kind, id_, title, state, blocks)


def usages(session: Session, shas: Iterable[str]) -> dict[str, list[Usage]]:
    """For each SHA-256, what uses it (one pass over the sources, for a page of images)."""
    wanted = set(shas)
    found: dict[str, list[Usage]] = {sha: [] for sha in wanted}
    if not wanted:
        return found
    for kind, id_, title, state, body, text_body in _sources(session, None):
        for sha in wanted & set(SHA256.findall(f"{body}\n{text_body}")):
            found[sha].append(_usage(kind, id_, title, state))
    return found


def usages_of(session: Session, sha: str) -> list[Usage]:
    return [_usage(kind, id_, title, state)
            for kind, id_, title, state, _, _ in _sources(session, sha)]


class InUse(Conflict):
    """The image is in something that may still send it; `used_by` says what."""

    def __init__(self, used_by: list[Usage]) -> None:
        named = "; ".join(u.words for u in used_by[:5])
        more = f" and {len(used_by) - 5} more" if len(used_by) > 5 else ""
        super().__init__(f"This image is used by {named}{more}. Take it out of "
                         f"{'them' if len(used_by) > 1 else 'it'} first, then delete it.",
                         field="id")
        self.used_by = used_by


def delete_media(session: Session, media_id: int) -> None:
    """Delete an image and its files (one commit), or InUse naming what may still send it."""
    media = get_media(session, media_id)
    blocking = [u for u in usages_of(session, media.sha256) if u.blocks]
    if blocking:
        raise InUse(blocking)
    session.execute(delete(MediaFile).where(MediaFile.media_id == media.id))
    session.delete(media)
    session.commit()


# ---------------------------------------------------------------- alt text in an email

class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            values = dict(attrs)
            self.found.append((values.get("src") or "", values.get("alt")))


def images_without_alt(html: str) -> list[str]:
    """The `src` of each <img> in `html` whose alt text is missing or blank, in order, once
    (an <img> left without a `src` shows nothing, and is not counted)."""
    parser = _Images()
    parser.feed(html)
    parser.close()
    seen: dict[str, None] = {}
    for src, alt in parser.found:
        if src and not (alt or "").strip():  # no src: the sanitiser dropped it, nothing shows
            seen.setdefault(src, None)
    return list(seen)
