"""Owners' sessions on the server: one `OwnerSession` row per signed-in browser.

Signing in makes a random token for the browser's cookie and keeps its SHA-256 here; each
request's session counts only while that row exists (and the owner's session epoch is still
the one it was opened in: a new password ends every session, and `set_password` also deletes
the rows in its transaction). Signing out deletes the row: the session ends on the server,
so a copy of the cookie made before (another machine, a stolen backup of the browser's
profile) no longer signs anybody in, while the owner's other browsers stay signed in.

The idle limit is the owner's (Settings -> Security: `SiteSettings.session_idle_hours`),
read in the same query as the session. Settings -> Security lists a person's sessions (the
browser's User-Agent and the network it signed in from: an IPv4 /24 or an IPv6 /48, never
the whole address) and ends one of them by a key that is not the token's hash (its first 16
hex digits, matched among that person's rows only), or all but this browser's.

Why the database and not Redis: the database is the source of truth and Redis may be lost or
flushed; and whoever can write to Redis (which we ask self-hosters to keep private, but which
two installations may share) could then mint a session. A row read by its primary key, joined
to the owner the session names, costs one indexed query per request, as the owner's own load
did before.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.models import Owner, OwnerSession, SiteSettings
from broadside.core.timeutil import utcnow

# last_seen_at moves on at most this often: a write on every page would cost SQLite a
# database lock each time, and the idle limit is counted in days.
TOUCH_EVERY = timedelta(minutes=5)
MAX_TOKEN = 100  # token_urlsafe(32) is 43 characters; anything far longer is not ours
DEFAULT_IDLE_HOURS = 24 * 31  # SiteSettings.session_idle_hours' default, before the row exists
KEY_LENGTH = 16  # a session's key on the Security page: the first hex digits of its hash
_KEY = re.compile(f"[0-9a-f]{{{KEY_LENGTH}}}")


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _idle_hours():
    """Settings' idle limit in hours, as a scalar subquery (the default before the row)."""
    return func.coalesce(select(SiteSettings.session_idle_hours)
                         .where(SiteSettings.id == 1).scalar_subquery(), DEFAULT_IDLE_HOURS)


def idle_limit_of(session: Session) -> timedelta:
    """How long a session may sit unused before it ends (Settings -> Security)."""
    return timedelta(hours=int(session.scalar(select(_idle_hours())) or DEFAULT_IDLE_HOURS))


def network_of(address: str | None) -> str:
    """The network an address belongs to, as Settings -> Security shows where a session
    signed in from: an IPv4 /24 or an IPv6 /48 (an IPv4-mapped IPv6 address as its IPv4);
    "" for no address or one that is not an IP address."""
    text = (address or "").strip().split("%", 1)[0]
    try:
        parsed = ipaddress.ip_address(text)
    except ValueError:
        return ""
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    prefix = 24 if parsed.version == 4 else 48
    return str(ipaddress.ip_network((parsed, prefix), strict=False))


def open_session(session: Session, owner_id: int, *, idle_limit: timedelta | None = None,
                 user_agent: str = "", network: str = "", now: datetime | None = None) -> str:
    """A new session for one browser; returns the token its cookie keeps. Sessions of this
    owner idle beyond the idle limit (Settings' unless given; closed browsers never signed
    out) are cleared on the way. Committed."""
    now = now or utcnow()
    limit = idle_limit if idle_limit is not None else idle_limit_of(session)
    token = secrets.token_urlsafe(32)
    session.execute(delete(OwnerSession).where(OwnerSession.owner_id == owner_id,
                                               OwnerSession.last_seen_at < now - limit))
    session.add(OwnerSession(token_hash=_hash(token), owner_id=owner_id, created_at=now,
                             last_seen_at=now, user_agent=(user_agent or "")[:300],
                             network=(network or "")[:64]))
    session.commit()
    return token


def owner_of(session: Session, owner_id: int, epoch: int, token: str | None, *,
             idle_limit: timedelta | None = None,
             now: datetime | None = None) -> tuple[Owner, datetime] | None:
    """(the owner a browser's session names, when it was last seen), while it is open on the
    server, of the owner's current epoch, and used within the idle limit (Settings', read in
    the same query, unless given); None otherwise (the browser is signed out). Reads only:
    the caller notes it `seen` where a commit is safe."""
    if not token or len(token) > MAX_TOKEN:
        return None
    now = now or utcnow()
    row = session.execute(
        select(Owner, OwnerSession.last_seen_at, _idle_hours())
        .join(OwnerSession, OwnerSession.owner_id == Owner.id)
        .where(OwnerSession.token_hash == _hash(token), Owner.id == owner_id)).first()
    if row is None:
        return None
    owner, last_seen, hours = row
    limit = idle_limit if idle_limit is not None else timedelta(hours=int(hours))
    if owner.session_epoch != epoch or last_seen < now - limit:
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


def close_others(session: Session, owner_id: int, keep_token: str | None) -> None:
    """End every session of the owner but the one `keep_token` holds (none: all), in the
    caller's transaction (a change of their second factor, "End all other sessions")."""
    statement = delete(OwnerSession).where(OwnerSession.owner_id == owner_id)
    if keep_token and len(keep_token) <= MAX_TOKEN:
        statement = statement.where(OwnerSession.token_hash != _hash(keep_token))
    session.execute(statement)


def close_without_two_factor(session: Session) -> None:
    """End the sessions of everyone without two-factor sign-in, in the caller's transaction
    (the owner began to require it: they sign in again, and are sent to enrol)."""
    session.execute(delete(OwnerSession).where(OwnerSession.owner_id.in_(
        select(Owner.id).where(Owner.totp_enabled_at.is_(None)))))


@dataclass(frozen=True)
class SessionLine:
    """One of a person's sessions as Settings -> Security shows it."""

    key: str
    user_agent: str
    network: str
    created_at: datetime
    last_seen_at: datetime
    current: bool


def sessions_of(session: Session, owner_id: int, current_token: str | None) -> list[SessionLine]:
    """The person's open sessions within the idle limit, this browser's first, then the
    most recently seen."""
    current = _hash(current_token) if current_token and len(current_token) <= MAX_TOKEN else ""
    since = utcnow() - idle_limit_of(session)
    rows = session.scalars(select(OwnerSession).where(
        OwnerSession.owner_id == owner_id, OwnerSession.last_seen_at >= since))
    lines = [SessionLine(key=row.token_hash[:KEY_LENGTH], user_agent=row.user_agent,
                         network=row.network, created_at=row.created_at,
                         last_seen_at=row.last_seen_at, current=row.token_hash == current)
             for row in rows]
    return sorted(lines, key=lambda line: (not line.current, -line.last_seen_at.timestamp()))


def close_by_key(session: Session, owner_id: int, key: str | None) -> bool:
    """End the session of this owner whose key (`SessionLine.key`) this is; False when none
    of theirs has it (ended already, or another person's). Committed."""
    if not key or not _KEY.fullmatch(key):
        return False
    ended = session.execute(delete(OwnerSession).where(
        OwnerSession.owner_id == owner_id,
        func.substr(OwnerSession.token_hash, 1, KEY_LENGTH) == key))
    session.commit()
    return rowcount(ended) > 0
