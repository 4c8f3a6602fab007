"""How many identities an installation may have: MAX_IDENTITIES besides the default (each is
a stream, a thread and a lease in every worker that serves all: broadside.core.config).
`service.create`, the one place identities are made, counts under `lock_the_count`."""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from broadside.core.db import dialect_insert
from broadside.core.models import Identity, SiteSettings
from broadside.core.models.identities import IdentityStatus

DEFAULT_MAX = 50


def live_count(session: Session) -> int:
    """The identities that are rows and not deleted (the default is not one)."""
    return int(session.scalar(select(func.count()).select_from(Identity).where(
        Identity.status != IdentityStatus.DELETED.value)) or 0)


def limit_reached(count: int, limit: int) -> str:
    """Why no identity can be added, in the owner's words (the API's 422, the page's note)."""
    return (f"This installation has {count} of its {limit} sending identities (besides the "
            f"default); delete one that is no longer used, or raise MAX_IDENTITIES in the "
            f"environment and restart.")


def lock_the_count(session: Session) -> None:
    """The settings row's write lock, held until the caller's commit or rollback: PostgreSQL
    locks the row, SQLite takes its database write lock, so two creates cannot both count
    below the bound. The row is made first if missing, without racing another first request
    (ON CONFLICT DO NOTHING)."""
    session.execute(dialect_insert(session, SiteSettings).values(id=1).on_conflict_do_nothing())
    session.execute(update(SiteSettings).where(SiteSettings.id == 1)
                    .values(id=SiteSettings.id).execution_options(synchronize_session=False))
