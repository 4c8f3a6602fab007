"""Two-factor sign-in (TOTP, RFC 6238) and its recovery codes: the one writer of a person's
`totp_*` columns and `recovery_codes` rows."""

from __future__ import annotations

from sqlalchemy import delete, update
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.errors import NotFound
from broadside.core.models import Owner, RecoveryCode


def reset(session: Session, person_id: int) -> None:
    """Turn the person's two-factor sign-in off and forget their recovery codes (an owner's
    help, or the command line, for someone who lost their device): they sign in with their
    password alone, and enrol again (at once, where the owner requires it). In the caller's
    transaction; NotFound for nobody."""
    moved = session.execute(update(Owner).where(Owner.id == person_id)
                            .values(totp_secret=None, totp_enabled_at=None, totp_last_step=None)
                            .execution_options(synchronize_session=False))
    if not rowcount(moved):
        raise NotFound("There is no such person.")
    session.execute(delete(RecoveryCode).where(RecoveryCode.owner_id == person_id))
