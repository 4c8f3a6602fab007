"""The one writer of the audit log (`audit_log`): one append-only row per change made by a
person or an API token, in the transaction of the change.

`record` adds the row to the caller's session and never commits: the change and its row are
committed together or not at all. The actor is broadside.core.actors' current one (the web
app sets it per request, the CLI per command), unless one is given.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from broadside.core import actors
from broadside.core.models import AuditEntry
from broadside.core.timeutil import utcnow


def record(session: Session, action: str, *, object_type: str = "",
           object_id: object = None, summary: str = "",
           details: dict[str, Any] | None = None,
           actor: actors.Actor | None = None) -> AuditEntry | None:
    """One row for `action` on the object, by the current actor; None (nothing written) when
    nobody is acting (the worker)."""
    who = actor or actors.current()
    if who is None:
        return None
    entry = AuditEntry(created_at=utcnow(), actor_person_id=who.person_id,
                       actor_token_id=who.token_id, actor=who.label[:500],
                       address=who.address[:64], action=action[:64],
                       object_type=object_type[:32],
                       object_id=None if object_id is None else str(object_id)[:64],
                       summary=summary, details=details)
    session.add(entry)
    return entry
