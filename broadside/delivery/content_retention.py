"""Bodies that do not outlive their use: a transactional or test message's rendered subject and
body are kept for the owner's retention (Settings, `SiteSettings.content_retention_days`, 30
days by default), then replaced by their SHA-256; the revision the message came from
(`template_revision_id`), its address, status, reason and times stay. Every kind of
transactional message alike: test, confirmation, password_reset, template.

The one writer of `content_sha256`, `content_removed_at` and of the content columns after the
row's INSERT. Its one transition, kept -> removed, is `remove_batch`: ONE guarded UPDATE per
batch,

    WHERE id IN (batch) AND content_removed_at IS NULL AND status IN ('sent','failed','unknown')

committed per batch. So:

- never a message the worker still needs: `pending` and `sending` rows are not settled (the
  worker reads the body when it claims and builds; nothing moves a settled row back to
  `pending`: broadside.delivery.transactional_ledger.TRANSITIONS);
- idempotent, alone or run concurrently by two workers: the second UPDATE of a batch finds
  `content_removed_at` set and changes nothing; the hash written is the same either way, since
  a row's content is never written after its INSERT except here (so reading it, then writing
  its hash under that guard, is not a read-then-write race);
- bounded: `BATCH` rows a statement, at most `max_batches` or until `deadline` a pass, so a
  tick never holds the writer lock for long; what is left waits for the next pass.

Password resets: their body carries a sign-in link that sets the owner's password
(broadside.mail.password_reset: one hour, once). While that link lives, the stored copy is a
working credential to anyone who reads the database or a backup of it; after it, it is
useless to everybody. Keeping it for the link's hour and then removing it would protect
nothing during the one hour that matters, and nobody ever needs to read a reset email's body
again, so a reset's content is removed as soon as it is settled (the next pass, within
`EVERY_SECONDS` of the worker's tick), whatever the retention says. So is an invitation's
(broadside.core.invitations: its link joins with a role, 72 hours, once), for the same reason.

The canonical form hashed (so an owner can check a copy they hold against `content_sha256`):
the subject, the HTML part and the text part, in that order, each as a netstring of its UTF-8
bytes (`<length in bytes>:<bytes>,`), concatenated; SHA-256 of that, in lowercase hex.
In Python: `canonical_sha256(subject, html, text)`.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import case, select, update
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.models import SiteSettings, TransactionalMessage
from broadside.core.timeutil import utcnow

SETTLED = ("sent", "failed", "unknown")  # never pending or sending: the worker reads the body
PASSWORD_RESET = "password_reset"
INVITATION = "invitation"
# Kinds whose body is a live credential: removed as soon as settled, each from its own index.
AT_ONCE = (PASSWORD_RESET, INVITATION)
DEFAULT_DAYS = 30
BATCH = 500
EVERY_SECONDS = 60  # the worker's pass, at most once a minute per installation
# The canonical form, in words, for whoever checks a copy against the hash (the export says it).
HASH_FORM = ("SHA-256, in hex, of the subject, the HTML part and the text part, in that order, "
             "each written as a netstring of its UTF-8 bytes: <length in bytes>:<bytes>,")


def _netstring(value: str) -> bytes:
    data = value.encode("utf-8")
    return b"%d:%s," % (len(data), data)


def canonical_sha256(subject: str, html: str, text: str) -> str:
    """The SHA-256 of a message's content in its canonical form (see the module's docstring)."""
    return hashlib.sha256(_netstring(subject) + _netstring(html) + _netstring(text)).hexdigest()


def retention_days(session: Session) -> int:
    """The owner's retention in days (30 until the owner sets it)."""
    settings = session.get(SiteSettings, 1)
    return settings.content_retention_days if settings is not None else DEFAULT_DAYS


def _kept():
    return (TransactionalMessage.content_removed_at.is_(None),
            TransactionalMessage.status.in_(SETTLED))


def due_ids(session: Session, *, now: datetime, days: int, limit: int = BATCH) -> list[int]:
    """Up to `limit` settled messages whose content is still kept and due to go: password
    resets and invitations at once (each kind from its own small partial index), everything
    else once created more than `days` ago (the partial index of kept content, oldest first)."""
    resets: list[int] = []
    for kind in AT_ONCE:
        resets += session.scalars(
            select(TransactionalMessage.id)
            .where(*_kept(), TransactionalMessage.kind == kind)
            .order_by(TransactionalMessage.created_at).limit(limit - len(resets)))
        if len(resets) >= limit:
            return resets
    older = list(session.scalars(
        select(TransactionalMessage.id)
        .where(*_kept(), TransactionalMessage.created_at < now - timedelta(days=days))
        .order_by(TransactionalMessage.created_at).limit(limit - len(resets))))
    return sorted(set(resets) | set(older))


def remove_batch(session: Session, ids: list[int], *, now: datetime) -> int:
    """kept -> removed for these messages: their hash written, subject, HTML and text emptied,
    headers cleared, `content_removed_at` set, in one UPDATE guarded on content still kept and
    status settled. Returns how many rows it changed. Does not commit."""
    if not ids:
        return 0
    rows = session.execute(
        select(TransactionalMessage.id, TransactionalMessage.subject, TransactionalMessage.html,
               TransactionalMessage.text)
        .where(TransactionalMessage.id.in_(ids), *_kept())).all()
    if not rows:
        return 0
    hashes = {row.id: canonical_sha256(row.subject, row.html, row.text) for row in rows}
    result = session.execute(
        update(TransactionalMessage)
        .where(TransactionalMessage.id.in_(list(hashes)), *_kept())
        .values(content_sha256=case(hashes, value=TransactionalMessage.id),
                subject="", html="", text="", headers=None, content_removed_at=now)
        .execution_options(synchronize_session=False))
    return rowcount(result)


@dataclass(frozen=True)
class Pass:
    """What one pass did: rows whose content was removed, and whether any are left."""

    removed: int
    finished: bool


def remove_due(session: Session, *, now: datetime | None = None, batch: int = BATCH,
               max_batches: int = 20, deadline: float | None = None) -> Pass:
    """Batches of `batch` messages due, each committed, until none is left, `max_batches`
    were done or `deadline` (time.monotonic()) has passed."""
    now = now or utcnow()
    days = retention_days(session)
    removed = 0
    for _ in range(max_batches):
        if deadline is not None and time.monotonic() >= deadline:
            return Pass(removed, False)
        ids = due_ids(session, now=now, days=days, limit=batch)
        if not ids:
            session.commit()
            return Pass(removed, True)
        removed += remove_batch(session, ids, now=now)
        session.commit()
        if len(ids) < batch:
            return Pass(removed, True)
    return Pass(removed, False)


def removal_words(kind: str, created_at: datetime | None, removed_at: datetime | None) -> str | None:
    """How the export and the owner's pages say a message's content is gone, with the real
    age at which it went ("content removed after 30 days"); None while it is kept."""
    if removed_at is None:
        return None
    if kind == PASSWORD_RESET:
        return "content removed as soon as its sending was over: it held a sign-in link"
    if kind == INVITATION:
        return "content removed as soon as its sending was over: it held an invitation link"
    age = removed_at - created_at if created_at is not None else timedelta(0)
    if age < timedelta(days=1):
        hours = max(1, int(age.total_seconds() // 3600))
        return f"content removed after {hours} hour{'s' if hours != 1 else ''}"
    days = age.days
    return f"content removed after {days} day{'s' if days != 1 else ''}"
