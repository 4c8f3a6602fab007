"""Invitations to join with a role: the one writer of `invitations`.

What an invitation guarantees:

- **A hash only.** The link's token is 32 random bytes (`secrets.token_urlsafe`), returned
  once to be mailed; only its SHA-256 is stored, so a copy of the database (a backup) holds
  no working link.
- **72 hours.** `expires_at` is set at the invitation; an expired link is refused (410).
- **Single use.** Accepting is ONE guarded UPDATE, `SET accepted_at = now WHERE token_hash = h
  AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now`, in the transaction
  that creates the person: of two uses of one link (two tabs, a double click) exactly one
  changes the row; on PostgreSQL the second waits for the first's commit, then finds it
  accepted. A person whose address already signs in (created meanwhile by the command line)
  makes the whole acceptance roll back: nothing is half written.
- **One pending invitation per address.** Inviting a pending address again revokes the
  earlier invitation (its link stops working) in the transaction of the new one. An address
  that already has a person is refused (409).
- **At most the inviter's role** (broadside.core.roles.at_most).

Nothing here sends mail: the caller builds the email (broadside.mail.invitation) and queues
it on the transactional stream, in the same commit as the invitation when it passes
`commit=False`.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.core import accounts, people
from broadside.core.addresses import normalise_email
from broadside.core.db import rowcount
from broadside.core.errors import Conflict, DomainError, NotFound, ValidationError
from broadside.core.i18n import _, _l
from broadside.core.models import Invitation, Owner
from broadside.core.timeutil import utcnow

VALID_FOR = timedelta(hours=72)
MAX_TOKEN = 100  # token_urlsafe(32) is 43 characters
MAX_NAME = 200

# Why a link cannot be used, as its page says it: (heading, what to do). All but "unknown"
# name an invitation that exists, so they are 410 Gone; "unknown" is 404.
REFUSALS = {
    "unknown": (_l("This invitation link is not valid"),
                _l("It may have been cut short or changed on its way from the email. Open it "
                   "again from the email, or ask the person who invited you for a new one.")),
    "expired": (_l("This invitation has expired"),
                _l("An invitation link works for 72 hours. Ask the person who invited you to "
                   "send a new one.")),
    "revoked": (_l("This invitation was withdrawn"),
                _l("It was withdrawn or replaced by a newer invitation. Use the link in the "
                   "newest email, or ask the person who invited you.")),
    "used": (_l("This invitation was already used"),
             _l("Its account has been created. Sign in with the address it was sent to.")),
}


class InvitationRefused(DomainError):
    """A link that cannot be used: `reason` is a key of REFUSALS."""

    status_code = 410

    def __init__(self, reason: str) -> None:
        heading, message = REFUSALS[reason]
        self.heading = str(heading)
        super().__init__(str(message))
        self.reason = reason
        if reason == "unknown":
            self.status_code = 404


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _pending(now: datetime):
    return (Invitation.accepted_at.is_(None), Invitation.revoked_at.is_(None),
            Invitation.expires_at > now)


@dataclass(frozen=True)
class Shown:
    """An invitation as the People page and the API show it (never its token)."""

    invitation: Invitation
    invited_by_email: str | None
    expired: bool


def invite(session: Session, email: object, role: object, *, inviter_id: int | None,
           inviter_role: str | None, now: datetime | None = None,
           commit: bool = True) -> tuple[Invitation, str]:
    """A new invitation for `email` with `role`; returns it and its token (shown once, to be
    mailed). ValidationError naming `email` or `role`; Forbidden for a role above the
    inviter's; Conflict when the address already signs in. An earlier pending invitation of
    the address is revoked in the same transaction."""
    if not isinstance(email, str):
        raise ValidationError(_("'email' must be a string: the address to invite."), field="email")
    try:
        address = normalise_email(email)
    except ValidationError as exc:
        raise ValidationError(exc.message, field="email") from None
    role = people.check_role(role)
    people.check_may_give(role, inviter_role)
    if people.by_email(session, address) is not None:
        raise Conflict(_("%(address)s already signs in to Broadside: change their role instead.",
                         address=address),
                       field="email")
    now = now or utcnow()
    session.execute(update(Invitation)
                    .where(Invitation.email == address, Invitation.accepted_at.is_(None),
                           Invitation.revoked_at.is_(None))
                    .values(revoked_at=now).execution_options(synchronize_session=False))
    token = secrets.token_urlsafe(32)
    invitation = Invitation(email=address, role=role, token_hash=_hash(token),
                            invited_by=inviter_id, created_at=now, expires_at=now + VALID_FOR)
    session.add(invitation)
    session.flush()
    if commit:
        session.commit()
    return invitation, token


def resend(session: Session, invitation_id: int, *, inviter_id: int | None,
           inviter_role: str | None, now: datetime | None = None,
           commit: bool = True) -> tuple[Invitation, str]:
    """A fresh link for a pending (or expired) invitation: a new invitation with its address
    and role, the old link revoked. NotFound, or Conflict once it was accepted."""
    old = session.get(Invitation, invitation_id)
    if old is None:
        raise NotFound(_("There is no such invitation."))
    if old.accepted_at is not None:
        raise Conflict(_("%(email)s already accepted this invitation.", email=old.email))
    return invite(session, old.email, old.role, inviter_id=inviter_id, inviter_role=inviter_role,
                  now=now, commit=commit)


def revoke(session: Session, invitation_id: int, *, now: datetime | None = None,
           commit: bool = True) -> Invitation:
    """Withdraw an invitation: its link stops working. Revoking a revoked one changes nothing;
    NotFound for none; Conflict once it was accepted."""
    invitation = session.get(Invitation, invitation_id)
    if invitation is None:
        raise NotFound(_("There is no such invitation."))
    moved = session.execute(update(Invitation)
                            .where(Invitation.id == invitation_id,
                                   Invitation.accepted_at.is_(None),
                                   Invitation.revoked_at.is_(None))
                            .values(revoked_at=now or utcnow())
                            .execution_options(synchronize_session=False))
    session.refresh(invitation)
    if not rowcount(moved) and invitation.accepted_at is not None:
        session.rollback()
        raise Conflict(_("%(email)s already accepted this invitation: remove the person instead.",
                         email=invitation.email))
    if commit:
        session.commit()
    return invitation


def open_ones(session: Session, *, now: datetime | None = None) -> list[Shown]:
    """Invitations neither accepted nor revoked (expired ones included, marked), newest first,
    with the inviter's address where they still sign in."""
    now = now or utcnow()
    rows = session.execute(
        select(Invitation, Owner.email).outerjoin(Owner, Owner.id == Invitation.invited_by)
        .where(Invitation.accepted_at.is_(None), Invitation.revoked_at.is_(None))
        .order_by(Invitation.created_at.desc(), Invitation.id.desc()))
    return [Shown(inv, by, inv.expires_at <= now) for inv, by in rows]


def _refusal(session: Session, token_hash: str, now: datetime) -> InvitationRefused:
    found = session.scalar(select(Invitation).where(Invitation.token_hash == token_hash))
    if found is None:
        return InvitationRefused("unknown")
    if found.accepted_at is not None:
        return InvitationRefused("used")
    if found.revoked_at is not None:
        return InvitationRefused("revoked")
    return InvitationRefused("expired")


def usable(session: Session, token: str, *, now: datetime | None = None) -> Invitation:
    """The invitation this link opens, or InvitationRefused saying why not. Reads only
    (opening a link changes nothing: mail scanners open links)."""
    now = now or utcnow()
    if not token or len(token) > MAX_TOKEN:
        raise InvitationRefused("unknown")
    token_hash = _hash(token)
    found = session.scalar(select(Invitation).where(Invitation.token_hash == token_hash,
                                                    *_pending(now)))
    if found is None:
        raise _refusal(session, token_hash, now)
    return found


def exists(session: Session, token: str) -> bool:
    """Whether the link names any invitation at all, in whatever state (a guess names none)."""
    if not token or len(token) > MAX_TOKEN:
        return False
    return session.scalar(select(Invitation.id).where(Invitation.token_hash == _hash(token))) \
        is not None


def accept(session: Session, token: str, *, name: str, password: str,
           now: datetime | None = None) -> Owner:
    """Use the link: the person is created with the invited role, name and password, and the
    invitation marked accepted, in one commit. InvitationRefused when the link cannot be used
    (another use won, it expired, was revoked); ValidationError for the name or password;
    Conflict when the address signs in already."""
    name = (name or "").strip()
    if not name:
        raise ValidationError(_("Please give your name."), field="name")
    if len(name) > MAX_NAME:
        raise ValidationError(_("The name must be at most %(max_name)s characters.",
                                max_name=MAX_NAME), field="name")
    invitation = usable(session, token, now=now)  # a clear refusal before the slow hash
    try:
        accounts.check_password(password)
    except ValidationError as exc:
        raise ValidationError(exc.message, field="password") from None
    password_hash = accounts.generate_password_hash(password, method=accounts.PASSWORD_METHOD)
    now = now or utcnow()
    table = Invitation.__table__
    won = session.execute(
        update(table).where(table.c.token_hash == _hash(token), table.c.accepted_at.is_(None),
                            table.c.revoked_at.is_(None), table.c.expires_at > now)
        .values(accepted_at=now).returning(table.c.email, table.c.role)).first()
    if won is None:
        session.rollback()
        raise _refusal(session, _hash(token), now)
    person = Owner(email=won.email, role=won.role, name=name, password_hash=password_hash,
                   created_at=now)
    session.add(person)
    try:
        session.flush()
    except IntegrityError:
        session.rollback()
        raise Conflict(_("%(email)s already signs in to Broadside: sign in instead.",
                         email=invitation.email)) \
            from None
    session.commit()
    return person
