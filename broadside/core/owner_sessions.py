"""Owners' sessions on the server: one `OwnerSession` row per signed-in browser.

Signing in makes a random token for the browser's cookie and keeps its SHA-256 here; each
request's session counts only while that row exists (and the owner's session epoch is still
the one it was opened in: a new password ends every session, and `set_password` also deletes
the rows in its transaction). Signing out deletes the row: the session ends on the server,
so a copy of the cookie made before (another machine, a stolen backup of the browser's
profile) no longer signs anybody in, while the owner's other browsers stay signed in.

Why the database and not Redis: the database is the source of truth and Redis may be lost or
flushed; and whoever can write to Redis (which we ask self-hosters to keep private, but which
two installations may share) could then mint a session. A row read by its primary key, joined
to the owner the session names, costs one indexed query per request, as the owner's own load
did before.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from broadside.core.models import Owner, OwnerSession
from broadside.core.timeutil import utcnow

# last_seen_at moves on at most this often: a write on every page would cost SQLite a
# database lock each time, and the idle limit is counted in days.
TOUCH_EVERY = timedelta(minutes=5)
MAX_TOKEN = 100  # token_urlsafe(32) is 43 characters; anything far longer is not ours


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def open_session(session: Session, owner_id: int, *, idle_limit: timedelta,
                 now: datetime | None = None) -> str:
    """A new session for one browser; returns the token its cookie keeps. Sessions of this
    owner idle beyond `idle_limit` (closed browsers never signed out) are cleared on the
    way. Committed."""
    now = now or utcnow()
    token = secrets.token_urlsafe(32)
    session.execute(delete(OwnerSession).where(OwnerSession.owner_id == owner_id,
                                               OwnerSession.last_seen_at < now - idle_limit))
    session.add(OwnerSession(token_hash=_hash(token), owner_id=owner_id, created_at=now,
                             last_seen_at=now))
    session.commit()
    return token


def owner_of(session: Session, owner_id: int, epoch: int, token: str | None, *,
             idle_limit: timedelta, now: datetime | None = None) -> tuple[Owner, datetime] | None:
    """(the owner a browser's session names, when it was last seen), while it is open on the
    server, of the owner's current epoch, and used within `idle_limit`; None otherwise (the
    browser is signed out). Reads only: the caller notes it `seen` where a commit is safe."""
    if not token or len(token) > MAX_TOKEN:
        return None
    now = now or utcnow()
    row = session.execute(
        select(Owner, OwnerSession.last_seen_at)
        .join(OwnerSession, OwnerSession.owner_id == Owner.id)
        .where(OwnerSession.token_hash == _hash(token), Owner.id == owner_id)).first()
    if row is None:
        return None
    owner, last_seen = row
    if owner.session_epoch != epoch or last_seen < now - idle_limit:
        return None
    return owner, last_seen


def seen(session: Session, token: str, last_seen: datetime, *,
         now: datetime | None = None) -> None:
    """Note the session used now, if it was last noted more than TOUCH_EVERY ago. Commits
    when it writes, so the caller calls it before any work of its own."""
    now = now or utcnow()
    if last_seen < now - TOUCH_EVERY:
        session.execute(update(OwnerSession).where(OwnerSession.token_hash == _hash(token))
                        .values(last_seen_at=now).execution_options(synchronize_session=False))
        session.commit()


def close_session(session: Session, token: str | None) -> None:
    """End one browser's session (signing out). Committed; nothing to do for no token."""
    if token and len(token) <= MAX_TOKEN:
        session.execute(delete(OwnerSession).where(OwnerSession.token_hash == _hash(token)))
        session.commit()


def close_all(session: Session, owner_id: int) -> None:
    """End every session of the owner, in the caller's transaction (a new password)."""
    session.execute(delete(OwnerSession).where(OwnerSession.owner_id == owner_id))
