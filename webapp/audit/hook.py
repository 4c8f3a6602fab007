"""Every successful change by a person or an API token is one row of the audit log, in the
transaction of the change (the rule, and why: docs/ARCHITECTURE.md, "The audit log").

Per request: the actor is set as soon as the person (webapp/security.py) or the token
(webapp/api) is known, and reset at teardown. Before the view of an audited request
(`actions.audited`: a POST, PUT, PATCH or DELETE to a non-public route, or an export) the
pending row is prepared, with the "before" of what a settings-like route may change
(webapp/audit/snapshots.py). Then:

1. The first transaction of the web session that writes (an ORM flush with changes, or an
   INSERT, UPDATE or DELETE on the wire that changed a row: a guarded UPDATE that matched
   nothing is no change) and commits takes the row with it (`before_commit`):
   the change and its row commit together or not at all. A transaction rolled back takes its
   row with it, and the next writing one carries it.
2. After the answer: a row already committed is completed once with what only the answer
   says (a created object's id, a note made after the commit). A success (2xx, 3xx) of an act
   outside the database (`actions.OUTSIDE_DATABASE`: an hourly cap reset in Redis, an export)
   writes its row now, in its own transaction. Nothing else is written: a refused change
   (4xx, or a refusal answered with a redirect) committed nothing and leaves no row, a press
   that changed nothing (a second Send) leaves none, and a change that committed and then
   failed (a 5xx after the commit) keeps its row.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, Response, current_app, g, request
from sqlalchemy import event, inspect, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from werkzeug.exceptions import HTTPException
from werkzeug.routing import RoutingException

from broadside.core import actors, audit
from broadside.core.models import AuditEntry, Owner
from broadside.core.timeutil import utcnow
from webapp.audit import actions, snapshots
from webapp.audit_trail import noted
from webapp.extensions import db

_PENDING: ContextVar[Pending | None] = ContextVar("broadside_audit_pending", default=None)
# A statement that writes: plain, or inside a CTE (PostgreSQL's `WITH ... INSERT INTO`).
_WRITES = re.compile(r"\b(?:INSERT\s+INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM)\b", re.IGNORECASE)
_ACTOR_MARKER = "audit_actor_marker"


@dataclass
class Pending:
    endpoint: str
    action: str
    object_type: str
    object_id: str | None
    session: Session
    snapshot: Any = None  # the registry's function, or None
    before: snapshots.Snapshot = field(default_factory=dict)
    wrote: bool = False  # the current transaction has written
    row: AuditEntry | None = None  # added to the current transaction
    row_id: int | None = None  # committed
    noted_then: Any = None  # the note as the row was built
    built_details: dict[str, Any] = field(default_factory=dict)  # the snapshots' part
    skipped: bool = False  # coalesced into an earlier row


def act_as_person(person: Owner) -> None:
    """The request is this signed-in person's (webapp/security.py, before the view)."""
    _act(actors.person(person.id, person.name or "", person.email, request.remote_addr or ""))


def act_as_token(token: Any, person: Owner | None) -> None:
    """The request is this API token's (webapp/api, once the token is known)."""
    _act(actors.token(token.id, token.name, person.id if person else None,
                      person.email if person else "", request.remote_addr or ""))


def _act(actor: actors.Actor) -> None:
    if _ACTOR_MARKER not in g:
        g.setdefault(_ACTOR_MARKER, actors.begin(actor))


def _begin() -> None:
    """Before the view: prepare the row of an audited request made by someone."""
    endpoint = request.endpoint or ""
    if _PENDING.get() is not None or actors.current() is None:
        return
    if not actions.audited(endpoint, request.method):
        return
    action = actions.action_for(endpoint)
    found = actions.object_from_args(request.view_args)
    session = db.session()
    take = snapshots.snapshot_for(endpoint)
    pending = Pending(endpoint=endpoint, action=action,
                      object_type=found[0] if found else actions.object_type_of(action),
                      object_id=found[1] if found else None, session=session, snapshot=take)
    if take is not None:
        pending.before = take(session)
    _PENDING.set(pending)


def _outside_the_api() -> None:
    if not (request.endpoint or "").startswith("api."):
        _begin()


def _build(pending: Pending, session: Session) -> AuditEntry | None:
    """The row as it stands now (called at the commit, or after the answer)."""
    who = actors.current()
    if who is None:
        return None
    details: dict[str, Any] = {}
    if pending.snapshot is not None:
        changed, difference = snapshots.changes(pending.before, pending.snapshot(session))
        details.update(difference)
        if changed and pending.object_id is None:
            pending.object_id = changed
    if pending.endpoint in actions.COALESCED and _coalesced(pending, session, who):
        pending.skipped = True
        return None
    note = noted()
    pending.noted_then = repr(note)
    pending.built_details = details
    details = {**note["details"], **details}
    return audit.record(
        session, pending.action, object_type=pending.object_type, object_id=pending.object_id,
        summary=note["summary"] or actions.summary_of(pending.action, pending.object_type,
                                                      pending.object_id),
        details=details or None, actor=who)


def _coalesced(pending: Pending, session: Session, who: actors.Actor) -> bool:
    since = utcnow() - timedelta(minutes=actions.COALESCE_MINUTES)
    same_token = (AuditEntry.actor_token_id.is_(None) if who.token_id is None
                  else AuditEntry.actor_token_id == who.token_id)
    return session.scalar(select(AuditEntry.id).where(
        AuditEntry.object_type == pending.object_type, AuditEntry.object_id == pending.object_id,
        AuditEntry.action == pending.action, AuditEntry.actor_person_id == who.person_id,
        same_token, AuditEntry.created_at >= since,
    ).limit(1)) is not None


def _mine(session: Session) -> Pending | None:
    pending = _PENDING.get()
    return pending if pending is not None and pending.session is session else None


def _before_commit(session: Session) -> None:
    pending = _mine(session)
    if pending is None or pending.row is not None or pending.row_id or pending.skipped:
        return
    dirty = bool(session.new or session.deleted) or any(
        session.is_modified(item) for item in session.dirty)
    if pending.wrote or dirty:
        pending.row = _build(pending, session)


def _after_commit(session: Session) -> None:
    pending = _mine(session)
    if pending is None:
        return
    pending.wrote = False
    if pending.row is not None and pending.row_id is None:
        identity = inspect(pending.row).identity
        pending.row_id = int(identity[0]) if identity else None


def _after_rollback(session: Session, _previous: Any = None) -> None:
    pending = _mine(session)
    if pending is None:
        return
    pending.wrote = False
    if pending.row is not None and pending.row_id is None:
        state = inspect(pending.row)
        if not (state.pending or state.persistent):
            pending.row = None  # rolled back with its change: the next writing commit carries it


def _cursor(conn: Any, cursor: Any, statement: str, *_args: Any) -> None:
    """A statement that changed rows (a guarded UPDATE that matched none changed nothing;
    -1, a count the driver does not know, counts as a change)."""
    pending = _PENDING.get()
    if pending is not None and not pending.wrote and _WRITES.search(statement):
        pending.wrote = getattr(cursor, "rowcount", -1) != 0


def _answer_object(response: Response) -> tuple[str | None, str] | None:
    """The object a successful answer names: the API's JSON `id`, or the page a redirect
    (or htmx's HX-Redirect) leads to, by its first `*_id`."""
    if response.is_json:
        body = response.get_json(silent=True)
        if isinstance(body, dict) and isinstance(body.get("id"), int | str):
            return None, str(body["id"])
    location = response.headers.get("HX-Redirect") or response.headers.get("Location")
    if not location:
        return None
    try:
        _, args = current_app.url_map.bind("localhost").match(urlsplit(location).path,
                                                              method="GET")
    except (HTTPException, RoutingException):  # a redirect outside our routes names nothing
        return None
    found = actions.object_from_args(args)
    return found if found else None


def _after_request(response: Response) -> Response:
    pending = _PENDING.get()
    if pending is None or pending.skipped:
        return response
    try:
        _finish(pending, response)
    except Exception:
        db.session.rollback()
        current_app.logger.exception("the audit row of %s could not be written", pending.action)
    return response


def _finish(pending: Pending, response: Response) -> None:
    named = None if pending.object_id else _answer_object(response)
    object_type = (named[0] or pending.object_type) if named else None
    if pending.row_id is not None:
        note = noted()
        late = repr(note) != pending.noted_then
        if named or late:
            summary = note["summary"] if late else None
            if named and not note["summary"]:  # the default sentence, now with its object
                summary = actions.summary_of(pending.action, object_type or "", named[1])
            audit.complete(db.session, pending.row_id, object_type=object_type,
                           object_id=named[1] if named else None, summary=summary,
                           details={**note["details"], **pending.built_details}
                           if late and note["details"] else None)
            db.session.commit()
        return
    if response.status_code >= 400 or pending.endpoint not in actions.OUTSIDE_DATABASE:
        return
    if named:
        pending.object_type, pending.object_id = object_type or pending.object_type, named[1]
    # In a session and transaction of its own: the request's may still be reading the
    # answer's body (an export streams its rows after this), so it is neither rolled back
    # nor committed here (that expired the rows a streamed CSV was still reading: a 500).
    with Session(db.engine) as own:
        pending.row = _build(pending, own)
        if pending.row is not None:
            own.commit()


@contextmanager
def command(action: str, object_type: str = "", object_id: object = None) -> Iterator[Pending]:
    """A CLI command's change, by the command line: its row rides with the first writing
    commit inside the block, as a request's does; set `.object_id` on what this yields once
    the object exists (a created person or token)."""
    session = db.session()
    pending = Pending(endpoint="", action=action, object_type=object_type,
                      object_id=None if object_id is None else str(object_id), session=session)
    with actors.acting(actors.COMMAND_LINE):
        marker = _PENDING.set(pending)
        try:
            yield pending
            if pending.row_id is not None and pending.object_id is not None:
                audit.complete(session, pending.row_id, object_id=pending.object_id,
                               summary=actions.summary_of(action, object_type, pending.object_id))
                session.commit()
            elif pending.row_id is None:
                session.rollback()
                pending.row = _build(pending, session)
                session.commit()
        finally:
            _PENDING.reset(marker)


def _teardown(_exc: BaseException | None) -> None:
    _PENDING.set(None)
    # A test's requests share one app context, and so one `g`: forget this request's note
    # its signed-in person and what its token was granted, as a real request's own `g` would.
    for name in ("audit_note", "_login_user", "broadside_granted"):
        g.pop(name, None)
    marker = g.pop(_ACTOR_MARKER, None)
    if marker is not None:
        try:
            actors.end(marker)
        except ValueError:  # set in another context (never in a request): forget it there
            actors.begin(None)


_LISTENING = False


def install(app: Flask) -> None:
    """Hook the log into `app` (called when the audit blueprint is registered, after the
    security check and the API's token check, so the actor is known before `_begin`)."""
    global _LISTENING
    if not _LISTENING:
        event.listen(Session, "before_commit", _before_commit)
        event.listen(Session, "after_commit", _after_commit)
        event.listen(Session, "after_soft_rollback", _after_rollback)
        event.listen(Engine, "after_cursor_execute", _cursor)
        _LISTENING = True
    app.before_request(_outside_the_api)
    app.before_request_funcs.setdefault("api", []).append(_begin)
    app.after_request(_after_request)
    app.teardown_request(_teardown)
