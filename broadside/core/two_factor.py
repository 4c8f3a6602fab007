"""Two-factor sign-in (TOTP, RFC 6238) and its recovery codes: the one writer of a person's
`totp_*` columns and `recovery_codes` rows.

What it guarantees, and how:
- **A secret made on the server**, kept in `totp_secret` while unconfirmed (a reload of the
  enrolment page shows the same QR code), enabled only by a first correct code
  (`totp_enabled_at`, a guarded UPDATE on the very secret that code was checked against).
- **A code signs in once.** `verify(code, valid_window=1)` accepts the codes of the step
  before, now and after; the step of the accepted code is written to `totp_last_step` by an
  UPDATE guarded on `totp_last_step IS NULL OR totp_last_step < :step`, so the same code
  (or an older one) submitted again, or twice at once, moves no row and is refused.
- **Recovery codes are stored hashed** (SHA-256 of ten random base32 characters, 50 bits),
  shown once, and each is used by an UPDATE guarded on `used_at IS NULL`: of two uses, one
  wins. A new set deletes the old one in the same transaction.
- Changing one's second factor (enrol, new recovery codes, turn off) ends the person's other
  sessions in the same transaction (broadside.core.owner_sessions).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import dataclass

import pyotp
import segno
from pyotp.utils import strings_equal
from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session

from broadside.core import accounts, owner_sessions
from broadside.core.db import rowcount
from broadside.core.errors import Conflict, DomainError, NotFound
from broadside.core.i18n import _
from broadside.core.models import Owner, RecoveryCode
from broadside.core.timeutil import utcnow

ISSUER = "Broadside"
RECOVERY_CODE_COUNT = 10
_BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_TOTP_CODE = re.compile(r"[0-9]{6}")
_RECOVERY_CODE = re.compile(f"[{_BASE32}]{{10}}")
MAX_CODE_INPUT = 40  # anything longer is no code of ours


class WrongCode(DomainError):
    """The code (or password) given is not right; nothing was changed."""

    status_code = 401


class CodeUsed(DomainError):
    """A right code that was already accepted: a replay, or the same code sent twice."""

    status_code = 401


class AlreadyEnrolled(Conflict):
    """Two-factor sign-in is already on for this person."""


@dataclass(frozen=True)
class Enrolment:
    """What the enrolment page shows: the secret (also in groups of four, for typing), the
    otpauth URI an app reads, and that URI as a QR code (inline SVG markup)."""

    secret: str
    grouped: str
    uri: str
    qr_svg: str


def is_enabled(person: Owner) -> bool:
    return person.totp_enabled_at is not None


def enrolment(secret: str, email: str) -> Enrolment:
    uri = pyotp.TOTP(secret).provisioning_uri(name=email, issuer_name=ISSUER)
    svg = segno.make(uri, error="m").svg_inline(scale=4, title="QR code for your "
                                                "authenticator app")
    grouped = " ".join(secret[i:i + 4] for i in range(0, len(secret), 4))
    return Enrolment(secret=secret, grouped=grouped, uri=uri, qr_svg=svg)


def start_enrolment(session: Session, person_id: int) -> str:
    """The person's unconfirmed secret: the one already kept, else a new one. Committed.
    AlreadyEnrolled once two-factor is on; NotFound for nobody."""
    session.execute(update(Owner)
                    .where(Owner.id == person_id, Owner.totp_enabled_at.is_(None),
                           Owner.totp_secret.is_(None))
                    .values(totp_secret=pyotp.random_base32())
                    .execution_options(synchronize_session=False))
    row = session.execute(select(Owner.totp_secret, Owner.totp_enabled_at)
                          .where(Owner.id == person_id)).one_or_none()
    session.commit()
    if row is None:
        raise NotFound(_("There is no such person."))
    if row.totp_enabled_at is not None:
        raise AlreadyEnrolled("Two-factor sign-in is already on.")
    return str(row.totp_secret)


def pending_secret(session: Session, person_id: int) -> str | None:
    """The secret of an enrolment begun and not yet confirmed, or None."""
    return session.scalar(select(Owner.totp_secret).where(
        Owner.id == person_id, Owner.totp_enabled_at.is_(None)))


def _clean(code: str | None) -> str:
    text = (code or "")[:MAX_CODE_INPUT]
    return re.sub(r"[\s-]", "", text).upper()


def _matching_step(secret: str, code: str, at: float) -> int | None:
    """The time step whose code `code` is (the one before, now or after), or None."""
    totp = pyotp.TOTP(secret)
    if not totp.verify(code, for_time=at, valid_window=1):
        return None
    now_step = int(at // totp.interval)
    for step in (now_step, now_step - 1, now_step + 1):
        if strings_equal(totp.generate_otp(step), code):
            return step
    return None  # pragma: no cover - verify said one of the three matches


_WRONG = "That code is not right. Check the time on your phone, and type the newest code."
_REPLAYED = ("That code was already used. Wait for your app to show the next one (every 30 "
             "seconds), then type it.")


def confirm_enrolment(session: Session, person_id: int, code: str | None, *,
                      keep_token: str | None, at: float | None = None) -> list[str]:
    """Turn two-factor on with a first code from the app; returns the ten recovery codes
    (shown once). Ends the person's other sessions (keeps `keep_token`'s). Committed."""
    secret = pending_secret(session, person_id)
    if secret is None:
        if session.get(Owner, person_id) is None:
            raise NotFound(_("There is no such person."))
        raise AlreadyEnrolled("Two-factor sign-in is already on.")
    cleaned = _clean(code)
    step = _matching_step(secret, cleaned, at or time.time()) if _TOTP_CODE.fullmatch(cleaned) \
        else None
    if step is None:
        raise WrongCode(_WRONG, field="code")
    moved = session.execute(update(Owner)
                            .where(Owner.id == person_id, Owner.totp_enabled_at.is_(None),
                                   Owner.totp_secret == secret)
                            .values(totp_enabled_at=utcnow(), totp_last_step=step)
                            .execution_options(synchronize_session=False))
    if not rowcount(moved):
        session.rollback()
        raise AlreadyEnrolled("Two-factor sign-in was turned on meanwhile (another browser?).")
    codes = _replace_recovery_codes(session, person_id)
    owner_sessions.close_others(session, person_id, keep_token)
    session.commit()
    return codes


def accept(session: Session, person_id: int, code: str | None, *,
           at: float | None = None) -> str:
    """Check a sign-in's second factor: a code from the app ("code") or a recovery code
    ("recovery"), each accepted once. Committed. WrongCode or CodeUsed otherwise."""
    cleaned = _clean(code)
    if _TOTP_CODE.fullmatch(cleaned):
        secret = session.scalar(select(Owner.totp_secret).where(
            Owner.id == person_id, Owner.totp_enabled_at.is_not(None)))
        step = _matching_step(secret, cleaned, at or time.time()) if secret else None
        if step is None:
            raise WrongCode(_WRONG, field="code")
        moved = session.execute(
            update(Owner)
            .where(Owner.id == person_id, Owner.totp_secret == secret,
                   or_(Owner.totp_last_step.is_(None), Owner.totp_last_step < step))
            .values(totp_last_step=step).execution_options(synchronize_session=False))
        session.commit()
        if not rowcount(moved):
            raise CodeUsed(_REPLAYED, field="code")
        return "code"
    if _RECOVERY_CODE.fullmatch(cleaned):
        used = session.execute(
            update(RecoveryCode)
            .where(RecoveryCode.owner_id == person_id, RecoveryCode.code_hash == _hash(cleaned),
                   RecoveryCode.used_at.is_(None))
            .values(used_at=utcnow()).execution_options(synchronize_session=False))
        session.commit()
        if rowcount(used):
            return "recovery"
        if session.scalar(select(RecoveryCode.id).where(
                RecoveryCode.owner_id == person_id, RecoveryCode.code_hash == _hash(cleaned))):
            raise CodeUsed("That recovery code was already used: each works once. Use "
                           "another one.", field="code")
        raise WrongCode("That recovery code is not right.", field="code")
    raise WrongCode("Type the 6-digit code from your app, or one of your recovery codes "
                    "(10 letters and digits).", field="code")


def new_recovery_codes(session: Session, person_id: int, *, keep_token: str | None) -> list[str]:
    """A new set of ten recovery codes, the old set void. Ends the person's other sessions.
    Committed; Conflict when two-factor is off."""
    if session.scalar(select(Owner.totp_enabled_at).where(Owner.id == person_id)) is None:
        raise Conflict(_("Turn two-factor sign-in on first."))
    codes = _replace_recovery_codes(session, person_id)
    owner_sessions.close_others(session, person_id, keep_token)
    session.commit()
    return codes


def turn_off(session: Session, person_id: int, *, code: str | None, password: str | None,
             keep_token: str | None) -> None:
    """Turn one's own two-factor off, proven by a current code (accepted once, as at sign-in)
    or the password. Ends the person's other sessions. Committed."""
    person = session.get(Owner, person_id)
    if person is None:
        raise NotFound(_("There is no such person."))
    if not is_enabled(person):
        raise Conflict(_("Two-factor sign-in is already off."))
    if (code or "").strip():
        accept(session, person_id, code)
    elif not password or not accounts.check_password_hash(person.password_hash, password):
        raise WrongCode("Type a current code from your app, or your password.", field="code")
    reset(session, person_id)
    owner_sessions.close_others(session, person_id, keep_token)
    session.commit()


def reset(session: Session, person_id: int) -> None:
    """Turn the person's two-factor sign-in off and forget their recovery codes (an owner's
    help, or the command line, for someone who lost their device): they sign in with their
    password alone, and enrol again (at once, where the owner requires it). In the caller's
    transaction; NotFound for nobody."""
    moved = session.execute(update(Owner).where(Owner.id == person_id)
                            .values(totp_secret=None, totp_enabled_at=None, totp_last_step=None)
                            .execution_options(synchronize_session=False))
    if not rowcount(moved):
        raise NotFound(_("There is no such person."))
    session.execute(delete(RecoveryCode).where(RecoveryCode.owner_id == person_id))


def recovery_codes_left(session: Session, person_id: int) -> int:
    return session.scalar(select(func.count()).select_from(RecoveryCode).where(
        RecoveryCode.owner_id == person_id, RecoveryCode.used_at.is_(None))) or 0


def pending_person(session: Session, person_id: object, epoch: object) -> Owner | None:
    """The person a browser's pending sign-in names, while their password is unchanged since
    (the same session epoch); None otherwise."""
    if not isinstance(person_id, int) or not isinstance(epoch, int) or not 0 < person_id < 2**31:
        return None
    person = session.get(Owner, person_id)
    return person if person is not None and person.session_epoch == epoch else None


def _hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def _replace_recovery_codes(session: Session, person_id: int) -> list[str]:
    session.execute(delete(RecoveryCode).where(RecoveryCode.owner_id == person_id))
    plain = ["".join(secrets.choice(_BASE32) for _ in range(10))
             for _ in range(RECOVERY_CODE_COUNT)]
    now = utcnow()
    session.add_all(RecoveryCode(owner_id=person_id, code_hash=_hash(code), created_at=now)
                    for code in plain)
    return [f"{code[:5]}-{code[5:]}" for code in plain]

