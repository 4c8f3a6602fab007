"""Reads of owners and API tokens for the command line (`flask --app webapp owner|tokens`),
beside the writes in `accounts`."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core.models import ApiToken, Owner


def find_owner(session: Session, email: str | None = None) -> Owner | None:
    """The owner with this address (any case), or without one the first owner created."""
    query = select(Owner).order_by(Owner.id)
    if email:
        query = query.where(Owner.email == email.strip().lower())
    return session.scalars(query).first()


def tokens_by_id(session: Session) -> list[ApiToken]:
    """Every API token, revoked ones included, oldest first."""
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id)))
