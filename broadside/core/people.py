"""The people who sign in, as the owner manages them: who they are, their role, and removing
them. The one writer of `Owner.role` after a person is created, and of removing a person.

There is always at least one owner. Demoting or removing an owner is ONE guarded statement,
`... WHERE id = :id AND (role <> 'owner' OR EXISTS (another owner))`, so the check and the
change cannot be told apart by anybody else:

- SQLite runs one writing statement at a time, and a write transaction sees the latest
  commit, so two owners demoting (or removing) each other at the same moment leave one.
- PostgreSQL (READ COMMITTED) could run both statements at once, each seeing the other still
  an owner in its snapshot; so a transaction-scoped advisory lock (`_OWNERS_LOCK`) is taken
  first: the second waits for the first to commit, and its statement's fresh snapshot then
  sees one owner fewer, and changes nothing.

Removing a person deletes their row: their sessions (`owner_sessions`), API tokens and
recovery codes go with it by the FOREIGN KEYs' ON DELETE CASCADE (SQLite enforces them:
broadside.core.db turns `foreign_keys` on for every connection), so a removed person's
browser and tokens stop working on the very next request. A role is read afresh on every
request and every API call, so a new role applies at once too.

Functions commit unless told `commit=False` (the command line adds its audit row to the
same transaction, then commits).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, exists, func, select, text, update
from sqlalchemy.orm import Session, aliased

from broadside.core import roles, two_factor
from broadside.core.errors import Conflict, Forbidden, NotFound, ValidationError
from broadside.core.i18n import _
from broadside.core.models import Owner, OwnerSession

# PostgreSQL advisory lock held while an owner may be demoted or removed ("bsown" in ASCII).
_OWNERS_LOCK = 0x62_73_6F_77_6E

LAST_OWNER = ("{email} is the last owner: there must always be one. Make someone else an "
              "owner first.")


class LastOwner(Conflict):
    """The change would leave nobody an owner; nothing was changed."""


@dataclass(frozen=True)
class Person:
    """One person as the People page and the API show them."""

    id: int
    email: str
    name: str
    role: str
    two_factor: bool
    created_at: datetime
    # The newest use of any of their open sessions (None: signed in nowhere now).
    last_seen_at: datetime | None

    @property
    def role_label(self) -> str:
        return roles.LABELS.get(self.role, self.role)


def _people_query():
    seen = (select(OwnerSession.owner_id, func.max(OwnerSession.last_seen_at).label("seen"))
            .group_by(OwnerSession.owner_id).subquery())
    return (select(Owner, seen.c.seen).outerjoin(seen, seen.c.owner_id == Owner.id))


def _person(owner: Owner, seen: datetime | None) -> Person:
    return Person(id=owner.id, email=owner.email, name=owner.name or "", role=owner.role,
                  two_factor=owner.totp_enabled_at is not None, created_at=owner.created_at,
                  last_seen_at=seen)


def everyone(session: Session) -> list[Person]:
    """Every person, owners first, then by role, then oldest first."""
    order = {role: i for i, role in enumerate(roles.ROLES)}
    found = [_person(owner, seen) for owner, seen in session.execute(_people_query())]
    return sorted(found, key=lambda p: (order.get(p.role, 99), p.created_at, p.id))


def get(session: Session, person_id: int) -> Person:
    """One person, or NotFound."""
    row = session.execute(_people_query().where(Owner.id == person_id)).first()
    if row is None:
        raise NotFound(_("There is no such person."))
    return _person(*row)


def by_email(session: Session, email: str | None) -> Owner | None:
    address = (email or "").strip().lower()
    if not address:
        return None
    return session.scalar(select(Owner).where(Owner.email == address))


def check_role(role: object, *, field: str = "role") -> str:
    if not roles.is_role(role):
        raise ValidationError(_("The role must be one of: %(value)s.",
                                value=', '.join(roles.ROLES)), field=field)
    return str(role)


def check_may_give(role: str, giver_role: str | None) -> None:
    """A person gives at most their own role (the command line, `giver_role` None, any)."""
    if giver_role is not None and not roles.at_most(role, giver_role):
        raise Forbidden(_("You may give at most your own role (%(role)s).",
                          role=roles.role_word(giver_role)),
                        field="role")


def _lock_owners(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _OWNERS_LOCK})


def _another_owner(person_id: int):
    other = aliased(Owner)
    return exists(select(other.id).where(other.role == roles.OWNER, other.id != person_id)
                  .correlate_except(other))


def change_role(session: Session, person_id: int, role: object, *,
                giver_role: str | None = None, commit: bool = True) -> tuple[str, str]:
    """Give the person `role`; returns (the role before, the role now). LastOwner when it
    would demote the last owner, NotFound for nobody, ValidationError for no role, Forbidden
    when the giver may not give it."""
    role = check_role(role)
    check_may_give(role, giver_role)
    before = session.scalar(select(Owner.role).where(Owner.id == person_id))
    if before is None:
        raise NotFound(_("There is no such person."))
    if before == role:
        return before, role
    _lock_owners(session)
    table = Owner.__table__
    guarded = (update(table).where(table.c.id == person_id)
               .where((table.c.role != roles.OWNER) | _another_owner(person_id))
               .values(role=role).returning(table.c.role))
    # (RETURNING: the row count of a statement with a correlated EXISTS is the rows matched)
    moved = session.execute(guarded).first()
    if moved is None:
        session.rollback()
        email = session.scalar(select(Owner.email).where(Owner.id == person_id))
        if email is None:
            raise NotFound(_("There is no such person."))
        raise LastOwner(LAST_OWNER.format(email=email))
    if commit:
        session.commit()
    session.expire_all()
    return before, role


def remove(session: Session, person_id: int, *, commit: bool = True) -> str:
    """Remove the person (their sessions, tokens and recovery codes go with them); returns
    their address. LastOwner for the last owner, NotFound for nobody."""
    email = session.scalar(select(Owner.email).where(Owner.id == person_id))
    if email is None:
        raise NotFound(_("There is no such person."))
    _lock_owners(session)
    table = Owner.__table__
    gone = session.execute(
        delete(table).where(table.c.id == person_id)
        .where((table.c.role != roles.OWNER) | _another_owner(person_id))
        .returning(table.c.id)).first()
    if gone is None:
        session.rollback()
        if session.scalar(select(Owner.id).where(Owner.id == person_id)) is None:
            raise NotFound(_("There is no such person."))
        raise LastOwner(LAST_OWNER.format(email=email))
    if commit:
        session.commit()
    session.expire_all()
    return email


def owners_count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Owner)
                          .where(Owner.role == roles.OWNER)) or 0


def reset_two_factor(session: Session, person_id: int, *, commit: bool = True) -> str:
    """Turn the person's two-factor sign-in off (an owner helping someone who lost their
    device); returns their address. NotFound for nobody."""
    email = session.scalar(select(Owner.email).where(Owner.id == person_id))
    if email is None:
        raise NotFound(_("There is no such person."))
    two_factor.reset(session, person_id)
    if commit:
        session.commit()
    return email
