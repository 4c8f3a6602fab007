"""Owners and API tokens: plain functions over a SQLAlchemy session."""

from __future__ import annotations

import hashlib
import secrets

from email_validator import EmailNotValidError, validate_email
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from broadside.errors import Conflict, NotFound, ValidationError
from broadside.models import ApiToken, Owner
from broadside.timeutil import utcnow

MIN_PASSWORD_LENGTH = 10
TOKEN_PREFIX = "bs_"


def normalise_email(raw: str) -> str:
    """A syntactically valid address, lower-cased; raises ValidationError otherwise."""
    raw = (raw or "").strip()
    if not raw:
        raise ValidationError("An email address is required.")
    if len(raw) > 320:
        raise ValidationError("That email address is too long.")
    try:
        result = validate_email(raw, check_deliverability=False)
    except EmailNotValidError as exc:
        raise ValidationError(f"{raw!r} is not a valid email address: {exc}") from None
    return result.normalized.lower()


def owner_exists(session: Session) -> bool:
    return session.scalar(select(func.count()).select_from(Owner)) > 0


def create_owner(session: Session, email: str, password: str) -> Owner:
    email = normalise_email(email)
    if len(password or "") < MIN_PASSWORD_LENGTH:
        raise ValidationError(f"The password must be at least {MIN_PASSWORD_LENGTH} characters.")
    if session.scalar(select(Owner).where(Owner.email == email)):
        raise Conflict(f"An owner with the address {email} already exists.")
    owner = Owner(email=email, password_hash=generate_password_hash(password, method="scrypt"))
    session.add(owner)
    session.commit()
    return owner


def authenticate(session: Session, email: str, password: str) -> Owner | None:
    owner = session.scalar(select(Owner).where(Owner.email == (email or "").strip().lower()))
    if owner is None or not check_password_hash(owner.password_hash, password or ""):
        return None
    return owner


def _hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(session: Session, owner_id: int, name: str) -> tuple[ApiToken, str]:
    """Make a token; the plain value is returned once and only its hash is stored."""
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise ValidationError("A token needs a name of 1 to 100 characters.")
    plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(owner_id=owner_id, name=name, token_hash=_hash_token(plain), prefix=plain[:10])
    session.add(token)
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


def touch_token(session: Session, token_id: int) -> None:
    session.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=utcnow()))
    session.commit()


def revoke_token(session: Session, token_id: int) -> None:
    result = session.execute(
        update(ApiToken)
        .where(ApiToken.id == token_id, ApiToken.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    session.commit()
    if result.rowcount == 0 and session.get(ApiToken, token_id) is None:
        raise NotFound("No such token.")


def list_tokens(session: Session) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).order_by(ApiToken.created_at.desc())))
