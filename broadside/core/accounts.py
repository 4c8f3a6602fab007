"""Owners and API tokens: plain functions over a SQLAlchemy session.

A password changes only through `set_password`, which moves the owner's `session_epoch` on in
the same guarded UPDATE (and deletes their `owner_sessions` rows in its transaction): every
session opened before it stops counting (webapp.security), and a reset link signed over the
old epoch and hash can be used once (broadside.mail.password_reset).
"""

from __future__ import annotations

import functools
import hashlib
import secrets
from dataclasses import dataclass

from sqlalchemy import func, insert, literal, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.core import owner_sessions, roles
from broadside.core.addresses import normalise_email
from broadside.core.db import rowcount
from broadside.core.errors import Conflict, DomainError, Forbidden, NotFound, ValidationError
from broadside.core.i18n import LOCALES, _
from broadside.core.models import ApiToken, Owner
from broadside.core.timeutil import utcnow

MIN_PASSWORD_LENGTH = 10
# The sign-in form takes no more than this, so no longer password could ever be used.
MAX_PASSWORD_LENGTH = 200
TOKEN_PREFIX = "bs_"
# Every owner's password is hashed this way (werkzeug's scrypt, its default cost).
PASSWORD_METHOD = "scrypt"


def generate_password_hash(password: str, method: str) -> str:
    # werkzeug is imported when a password is hashed or checked: the sending worker imports
    # this module but never does either, and werkzeug is ~2.6 MB of its memory.
    from werkzeug.security import generate_password_hash as hash_password

    return hash_password(password, method=method)


def check_password_hash(password_hash: str, password: str) -> bool:
    from werkzeug.security import check_password_hash as check

    return check(password_hash, password)


# PostgreSQL advisory lock taken while the first owner is created ("bs1st" in ASCII).
_FIRST_OWNER_LOCK = 0x62_73_31_73_74


class AlreadySetUp(Conflict):
    """The first-run setup was already done (perhaps by a request a moment earlier)."""


class PasswordChangedSince(Conflict):
    """The owner's password changed after what the caller read (another reset, the command
    line): their change is not made."""


def owner_exists(session: Session) -> bool:
    return (session.scalar(select(func.count()).select_from(Owner)) or 0) > 0


def check_password(password: str) -> None:
    """ValidationError for a password out of bounds (MIN_PASSWORD_LENGTH to MAX_...)."""
    _check_password_length(password)


def _check_password_length(password: str) -> None:
    if len(password or "") < MIN_PASSWORD_LENGTH:
        raise ValidationError(_("The password must be at least %(min_password_length)s characters.",
                                min_password_length=MIN_PASSWORD_LENGTH))
    if len(password) > MAX_PASSWORD_LENGTH:
        raise ValidationError(_("The password must be at most %(max_password_length)s characters.",
                                max_password_length=MAX_PASSWORD_LENGTH))


def owner_by_email(session: Session, email: str | None) -> Owner | None:
    """The owner with exactly this address (any case, spaces around ignored), or None; never
    "the first owner" for an empty one."""
    address = (email or "").strip().lower()
    if not address:
        return None
    return session.scalar(select(Owner).where(Owner.email == address))


def set_password(session: Session, owner_id: int, password: str, *,
                 if_epoch: int | None = None, if_hash: str | None = None) -> Owner:
    """Give the owner a new password and sign out every session opened before it (the epoch
    moves on in the same UPDATE). Committed; returns the owner as it now is.

    `if_epoch` and `if_hash` guard the UPDATE: a reset link passes what it was signed over,
    so of two uses of one link (or a link and a newer change) only the first changes anything;
    the others get PasswordChangedSince. ValidationError for a password out of bounds,
    NotFound for an owner who does not exist."""
    _check_password_length(password)
    new_hash = generate_password_hash(password, method=PASSWORD_METHOD)  # slow: before the UPDATE
    guarded = (update(Owner).where(Owner.id == owner_id)
               .values(password_hash=new_hash, session_epoch=Owner.session_epoch + 1)
               .execution_options(synchronize_session=False))
    if if_epoch is not None:
        guarded = guarded.where(Owner.session_epoch == if_epoch)
    if if_hash is not None:
        guarded = guarded.where(Owner.password_hash == if_hash)
    changed = rowcount(session.execute(guarded))
    if changed:
        owner_sessions.close_all(session, owner_id)  # the epoch ends them; the rows go too
    session.commit()
    if not changed:
        if session.get(Owner, owner_id) is None:
            raise NotFound(_("There is no such owner."))
        raise PasswordChangedSince("The password was changed since this was asked.")
    owner = session.get_one(Owner, owner_id)
    session.refresh(owner)
    return owner


def set_own_locale(session: Session, owner_id: int, value: str | None) -> Owner:
    """A person's own language for the dashboard (Settings -> Security -> Language): one of
    the shipped languages (`LOCALES`), or "" / None for their browser's. Anything else is a
    ValidationError and nothing is saved. Committed; returns the person as they now are."""
    chosen = (value or "").strip()
    if chosen and chosen not in LOCALES:
        raise ValidationError(_("Choose a language from the list."), field="locale")
    owner = session.get(Owner, owner_id)
    if owner is None:
        raise NotFound(_("There is no such person."))
    owner.locale = chosen or None
    session.commit()
    return owner


class WrongPassword(DomainError):
    """The current password given is not the person's; nothing was changed."""

    status_code = 401


def change_password(session: Session, owner_id: int, current: str, new: str) -> Owner:
    """A person's own change of password (Settings -> Security): proven by the current one,
    then `set_password`, guarded on the hash that was checked (ends every session, this
    browser's too: the caller opens it a new one). Committed."""
    owner = session.get(Owner, owner_id)
    if owner is None:
        raise NotFound(_("There is no such owner."))
    if not check_password_hash(owner.password_hash, current or ""):
        raise WrongPassword("That is not your current password.", field="current_password")
    if current == new:
        raise ValidationError(_("The new password is the one you have now."), field="password")
    try:
        _check_password_length(new)
    except ValidationError as exc:
        raise ValidationError(exc.message, field="password") from None
    return set_password(session, owner_id, new, if_hash=owner.password_hash)


def create_person(session: Session, email: str, password: str, *, role: str = "owner",
                  name: str = "", commit: bool = True) -> Owner:
    """One more person of `role` (`users create` on the command line; `owner create` is the
    shortcut for an owner). Conflict when the address already signs in."""
    email = normalise_email(email)
    if not roles.is_role(role):
        raise ValidationError(_("The role must be one of: %(value)s.",
                                value=', '.join(roles.ROLES)), field="role")
    _check_password_length(password)
    if session.scalar(select(Owner).where(Owner.email == email)):
        raise Conflict(_("%(email)s already signs in to Broadside.", email=email), field="email")
    person = Owner(email=email, role=role, name=(name or "").strip()[:200],
                   password_hash=generate_password_hash(password, method=PASSWORD_METHOD))
    session.add(person)
    try:
        session.flush()
    except IntegrityError:  # the same address, created a moment earlier by another
        session.rollback()
        raise Conflict(_("%(email)s already signs in to Broadside.", email=email), field="email") from None
    if commit:
        session.commit()
    return person


def create_owner(session: Session, email: str, password: str) -> Owner:
    """One more owner (the `owner create` command): any number may exist."""
    return create_person(session, email, password, role=roles.OWNER)


def create_first_owner(session: Session, email: str, password: str) -> Owner:
    """The first owner (the web's first-run setup), or AlreadySetUp if any owner exists.

    Check and insert are one guarded statement, `INSERT ... SELECT ... WHERE NOT EXISTS (SELECT
    FROM owners)`, so two setups submitted at once cannot both pass the check. SQLite runs one
    writing statement at a time, and a write transaction always sees the latest commit. On
    PostgreSQL two READ COMMITTED transactions could each insert before seeing the other's
    row, so a transaction-scoped advisory lock serialises them first: the second waits for the
    first to commit, and its INSERT's fresh snapshot then sees that owner.
    """
    email = normalise_email(email)
    _check_password_length(password)
    password_hash = generate_password_hash(password, method=PASSWORD_METHOD)  # slow: not locked
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _FIRST_OWNER_LOCK})
    table = Owner.__table__
    guarded = (
        insert(table)
        .from_select(
            ["email", "password_hash", "created_at"],
            select(
                literal(email, table.c.email.type),
                literal(password_hash, table.c.password_hash.type),
                literal(utcnow(), table.c.created_at.type),
            ).where(~select(table.c.id).exists()),
        )
        .returning(table.c.id)  # (the row count of an INSERT ... SELECT is -1 on psycopg)
    )
    try:
        owner_id = session.execute(guarded).scalar_one_or_none()
    except IntegrityError:
        owner_id = None
    if owner_id is None:
        session.rollback()
        raise AlreadySetUp("Broadside is already set up.")
    session.commit()
    return session.get_one(Owner, owner_id)


@functools.cache
def _dummy_password_hash() -> str:
    """A hash of a random password, made the way owners' passwords are: checking a password
    against it costs what checking a real owner's does."""
    return generate_password_hash(secrets.token_urlsafe(16), method=PASSWORD_METHOD)


def authenticate(session: Session, email: str, password: str) -> Owner | None:
    """The owner whose address and password these are, or None.

    An unknown address is refused only after checking the password against a dummy hash of the
    same algorithm and cost, so the time taken does not tell whether an address has an account.
    """
    owner = session.scalar(select(Owner).where(Owner.email == (email or "").strip().lower()))
    if owner is None:
        check_password_hash(_dummy_password_hash(), password or "")
        return None
    if not check_password_hash(owner.password_hash, password or ""):
        return None
    return owner


def _hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(session: Session, owner_id: int, name: str, *, read_only: bool = False,
                 commit: bool = True) -> tuple[ApiToken, str]:
    """Make a token, full or read-only (GET only); the plain value is returned once and only
    its hash is stored."""
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise ValidationError(_("A token needs a name of 1 to 100 characters."), field="name")
    plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(owner_id=owner_id, name=name, token_hash=_hash_token(plain), prefix=plain[:10],
                     read_only=read_only)
    session.add(token)
    session.flush()
    if commit:
        session.commit()
    return token, plain


def find_active_token(session: Session, plain: str) -> ApiToken | None:
    if not plain or len(plain) > 200:
        return None
    return session.scalar(
        select(ApiToken).where(
            ApiToken.token_hash == _hash_token(plain), ApiToken.revoked_at.is_(None)
        )
    )


def person_of_token(session: Session, token: ApiToken) -> Owner | None:
    """Whose the token is (a token of a removed person is deleted with them)."""
    return session.get(Owner, token.owner_id)


def touch_token(session: Session, token_id: int) -> None:
    session.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=utcnow()))
    session.commit()


def revoke_token(session: Session, token_id: int, *, by: int | None = None,
                 any_token: bool = True, commit: bool = True) -> ApiToken:
    """Revoke a token. `by` (a person's id) with `any_token` False may revoke only their own:
    Forbidden for another's (the command line, and people who manage, revoke any). NotFound
    for no such token. Committed; revoking a revoked token changes nothing."""
    token = session.get(ApiToken, token_id)
    if token is None:
        raise NotFound(_("No such token."))
    if not any_token and token.owner_id != by:
        raise Forbidden(_("You may revoke only your own tokens; revoking another's needs the manage "
                          "permission (an owner or an admin)."))
    session.execute(
        update(ApiToken)
        .where(ApiToken.id == token_id, ApiToken.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    if commit:
        session.commit()
    session.refresh(token)
    return token


@dataclass(frozen=True)
class TokenShown:
    """A token as Settings lists it: whose, and what it may do now."""

    token: ApiToken
    email: str
    role: str

    @property
    def access(self) -> str:
        """Its effective access: "read-only", or "full (writer)": the person's role now."""
        return "read-only" if self.token.read_only else f"full ({self.role})"


def list_tokens(session: Session, *, of: int | None = None) -> list[TokenShown]:
    """Tokens, newest first, with whose each is: every one, or only person `of`'s."""
    query = (select(ApiToken, Owner.email, Owner.role).join(Owner, Owner.id == ApiToken.owner_id)
             .order_by(ApiToken.created_at.desc(), ApiToken.id.desc()))
    if of is not None:
        query = query.where(ApiToken.owner_id == of)
    return [TokenShown(token, email, role) for token, email, role in session.execute(query)]
