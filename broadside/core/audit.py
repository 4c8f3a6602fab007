"""The one writer of the audit log (`audit_log`): one append-only row per change made by a
person or an API token, in the transaction of the change.

`record` adds the row to the caller's session and never commits: the change and its row are
committed together or not at all. The actor is broadside.core.actors' current one (the web
app sets it per request, the CLI per command), unless one is given. Rows are never updated by
another change; the web app completes its own request's row once, with what only the answer
says (a created object's id), `complete` (docs/ARCHITECTURE.md, "The audit log").

`entries` reads the log newest first, a page at a time keyed on the id (the Settings page and
`GET /api/audit`), with the filters an auditor asks for: person, action, object, time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from broadside.core import actors
from broadside.core.models import (
    ApiToken,
    AuditEntry,
    Automation,
    Broadcast,
    BulkAction,
    Identity,
    Import,
    MailingList,
    Owner,
    Segment,
    Subscriber,
    TransactionalTemplate,
    WebhookEndpoint,
)
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


def complete(session: Session, entry_id: int, *, object_type: str | None = None,
             object_id: object = None, summary: str | None = None,
             details: dict[str, Any] | None = None) -> None:
    """Fill in, once, what the change's answer told after its row was committed: the object
    it created (only where the row named none) and what its view noted late. Not committed."""
    values: dict[str, Any] = {}
    if summary:
        values["summary"] = summary
    if details:
        values["details"] = details
    if values:
        session.execute(update(AuditEntry).where(AuditEntry.id == entry_id).values(**values))
    if object_id is not None:
        named: dict[str, Any] = {"object_id": str(object_id)[:64]}
        if object_type:
            named["object_type"] = object_type[:32]
        session.execute(update(AuditEntry).where(AuditEntry.id == entry_id,
                                                 AuditEntry.object_id.is_(None)).values(**named))


@dataclass(frozen=True)
class Filters:
    person_id: int | None = None
    # Exact ("broadcast.send"), or a whole family ("broadcast": every broadcast.* action).
    action: str = ""
    object_type: str = ""
    object_id: str = ""
    since: datetime | None = None  # naive UTC, inclusive
    until: datetime | None = None  # naive UTC, exclusive


@dataclass(frozen=True)
class Page:
    entries: list[AuditEntry]
    older: int | None  # pass as `before` for the next (older) page
    newer: int | None  # pass as `after` for the previous (newer) page


def _where(filters: Filters) -> list[Any]:
    clauses: list[Any] = []
    if filters.person_id is not None:
        clauses.append(AuditEntry.actor_person_id == filters.person_id)
    if filters.action:
        clauses.append(or_(AuditEntry.action == filters.action,
                           AuditEntry.action.startswith(filters.action + ".", autoescape=True)))
    if filters.object_type:
        clauses.append(AuditEntry.object_type == filters.object_type)
    if filters.object_id:
        clauses.append(AuditEntry.object_id == filters.object_id)
    if filters.since is not None:
        clauses.append(AuditEntry.created_at >= filters.since)
    if filters.until is not None:
        clauses.append(AuditEntry.created_at < filters.until)
    return clauses


def entries(session: Session, filters: Filters, *, before: int | None = None,
            after: int | None = None, limit: int = 50) -> Page:
    """One page, newest first: ids below `before`, or the page just above `after` (the
    previous page), or the newest. Keyed on the primary key, so a page costs its rows."""
    query = select(AuditEntry).where(*_where(filters))
    if after is not None:
        rows = list(session.scalars(query.where(AuditEntry.id > after)
                                    .order_by(AuditEntry.id.asc()).limit(limit + 1)))
        has_newer = len(rows) > limit
        rows = rows[:limit][::-1]
        has_older = True
    else:
        if before is not None:
            query = query.where(AuditEntry.id < before)
        rows = list(session.scalars(query.order_by(AuditEntry.id.desc()).limit(limit + 1)))
        has_older = len(rows) > limit
        rows = rows[:limit]
        has_newer = before is not None
    if not rows:
        return Page([], None, None)
    return Page(rows, rows[-1].id if has_older else None, rows[0].id if has_newer else None)


# The objects the log names, by their type: what `still_there` looks for.
_MODELS: dict[str, Any] = {
    "broadcast": Broadcast, "list": MailingList, "subscriber": Subscriber, "segment": Segment,
    "automation": Automation, "identity": Identity, "template": TransactionalTemplate,
    "webhook": WebhookEndpoint, "bulk": BulkAction, "import": Import, "token": ApiToken,
}


def still_there(session: Session, rows: list[AuditEntry]) -> set[tuple[str, str]]:
    """Which of the rows' objects still exist: one query per type on the page."""
    wanted: dict[str, set[int]] = {}
    for row in rows:
        if row.object_type in _MODELS and row.object_id and row.object_id.isdigit():
            wanted.setdefault(row.object_type, set()).add(int(row.object_id))
    found: set[tuple[str, str]] = set()
    for kind, ids in wanted.items():
        model = _MODELS[kind]
        found.update((kind, str(i)) for i in session.scalars(
            select(model.id).where(model.id.in_(sorted(ids)))))
    return found


def people(session: Session) -> list[tuple[int, str]]:
    """Everyone who may appear as an actor, for the log's person filter: (id, "Name <email>")."""
    return [(row.id, f"{row.name} <{row.email}>" if row.name else row.email)
            for row in session.scalars(select(Owner).order_by(Owner.email))]
