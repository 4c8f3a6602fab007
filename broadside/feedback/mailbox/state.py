"""Where each bounce mailbox's reading stands (`bounce_mailboxes`): the one writer.

- `position`: its UIDVALIDITY and the highest UID read (None: never read).
- `advance`: after a batch's messages were applied AND moved, the highest UID done, guarded
  on the UIDVALIDITY it was read under and on never going back; a new UIDVALIDITY (the
  server renumbered its messages) starts again from UID 0, the processed rows keeping each
  message once by its Message-ID.
- `count`: one message processed (and unrecognised), in the transaction of its effect.
- `read_ok`, `failed`: the last read's time, and its error in the owner's words.
- `figures`, `lines`: what the System page shows.
Every write is one guarded UPDATE; the row is created once by an INSERT that may meet its
primary key (another worker made it first), which is then ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.core import mailbox_urls
from broadside.core.models import BounceMailbox

MAX_ERROR = 500


def ensure(session: Session, key: str, label: str) -> None:
    """The mailbox's row, made if missing; commits."""
    if session.get(BounceMailbox, key) is not None:
        return
    session.add(BounceMailbox(key=key, label=label[:300], last_uid=0, processed_count=0,
                              unrecognised_count=0))
    try:
        session.commit()
    except IntegrityError:
        session.rollback()


def position(session: Session, key: str) -> tuple[int | None, int]:
    row = session.execute(select(BounceMailbox.uid_validity, BounceMailbox.last_uid)
                          .where(BounceMailbox.key == key)).first()
    return (None, 0) if row is None else (row.uid_validity, int(row.last_uid))


def renumbered(session: Session, key: str, was: int | None, now_validity: int) -> None:
    """The server's UIDVALIDITY is not the one read before: start again from UID 0; commits."""
    session.execute(update(BounceMailbox).where(
        BounceMailbox.key == key,
        BounceMailbox.uid_validity.is_(None) if was is None else BounceMailbox.uid_validity == was)
        .values(uid_validity=now_validity, last_uid=0))
    session.commit()


def advance(session: Session, key: str, uid_validity: int, last_uid: int) -> None:
    """The highest UID applied and moved; never backwards; commits."""
    session.execute(update(BounceMailbox).where(
        BounceMailbox.key == key, BounceMailbox.uid_validity == uid_validity,
        BounceMailbox.last_uid < last_uid).values(last_uid=last_uid))
    session.commit()


def count(session: Session, key: str, *, unrecognised: bool, now: datetime) -> None:
    """One message processed; the caller commits (with the message's effect)."""
    values = {"processed_count": BounceMailbox.processed_count + 1}
    if unrecognised:
        values["unrecognised_count"] = BounceMailbox.unrecognised_count + 1
    session.execute(update(BounceMailbox).where(BounceMailbox.key == key).values(**values))


def read_ok(session: Session, key: str, now: datetime) -> None:
    session.execute(update(BounceMailbox).where(BounceMailbox.key == key)
                    .values(last_read_at=now, last_error=None, last_error_at=None))
    session.commit()


def failed(session: Session, key: str, words: str, now: datetime) -> None:
    session.execute(update(BounceMailbox).where(BounceMailbox.key == key)
                    .values(last_error=words[:MAX_ERROR], last_error_at=now))
    session.commit()


@dataclass(frozen=True)
class Standing:
    key: str
    label: str
    last_read_at: datetime | None
    processed: int
    unrecognised: int
    last_error: str | None
    last_error_at: datetime | None


def figures(session: Session, keys: list[str] | None = None) -> list[Standing]:
    """Each mailbox's standing (those of `keys` when given), by label."""
    query = select(BounceMailbox).order_by(BounceMailbox.label)
    if keys is not None:
        query = query.where(BounceMailbox.key.in_(keys))
    return [Standing(r.key, r.label, r.last_read_at, int(r.processed_count),
                     int(r.unrecognised_count), r.last_error, r.last_error_at)
            for r in session.scalars(query)]


@dataclass(frozen=True)
class MailboxLine:
    """One mailbox as the System page shows it: who reads into it and how it stands."""

    label: str  # its URL, masked
    identities: list[str]
    standing: Standing | None  # None: not read yet


def lines(session: Session, named: list[tuple[str, str]]) -> list[MailboxLine]:
    """Each mailbox named by an identity (`named`: (identity label, mailbox URL)), once, with
    its standing; a URL that no longer parses is left out (the identity's page says why)."""
    by_key: dict[str, tuple[str, list[str]]] = {}
    for label, url in named:
        try:
            key = mailbox_urls.parse(url).key
        except mailbox_urls.MailboxUrlError:
            continue
        by_key.setdefault(key, (mailbox_urls.describe(url), []))[1].append(label)
    known = {s.key: s for s in figures(session, list(by_key))} if by_key else {}
    return [MailboxLine(shown, names, known.get(key)) for key, (shown, names) in by_key.items()]
