"""Reads of people and API tokens for the command line (`flask --app webapp users|owner|
tokens`), beside the writes in `accounts` and `people`."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core.accounts import TokenShown
from broadside.core.models import ApiToken, Owner


def find_owner(session: Session, email: str | None = None) -> Owner | None:
    """The person with this address (any case, any role), or without one the first owner
    created."""
    query = select(Owner).order_by(Owner.id)
    if email:
        query = query.where(Owner.email == email.strip().lower())
    else:
        query = query.where(Owner.role == "owner")
    return session.scalars(query).first()


def tokens_by_id(session: Session) -> list[TokenShown]:
    """Every API token, revoked ones included, oldest first, with whose it is."""
    rows = session.execute(select(ApiToken, Owner.email, Owner.role)
                           .join(Owner, Owner.id == ApiToken.owner_id).order_by(ApiToken.id))
    return [TokenShown(token, email, role) for token, email, role in rows]
