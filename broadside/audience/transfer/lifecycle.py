"""An import's lifecycle: the one place that writes `Import.status` (and `finished_at` and
`error`, which move with it).

    queued -> running -> done                  (people who opted in)
    queued -> running -> asking -> done        (people asked to confirm: their emails)
    queued | running | asking -> failed        (with the sentence the owner reads)
    running -> queued                          (a worker restarted mid-run: run it again)

Every move is a named transition in `TRANSITIONS`, carried out as ONE guarded UPDATE
(`WHERE id = ? AND status IN (<from-states>)`): of a duplicated job's two runs exactly one
claims the import, and a late failure cannot overwrite an import that finished. An import
appends no event: its row (counts, error, the rejected rows) is its record. Nothing here
commits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import BindParameter, DateTime, bindparam, update
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.models import Import
from broadside.core.models.audience import ImportStatus
from broadside.core.timeutil import utcnow

QUEUED = ImportStatus.QUEUED
RUNNING = ImportStatus.RUNNING
ASKING = ImportStatus.ASKING
DONE = ImportStatus.DONE
FAILED = ImportStatus.FAILED

INITIAL = QUEUED  # a stored upload waits here for its run
UNFINISHED = (QUEUED, RUNNING, ASKING)  # what a stopped worker may have left

_IMPORTS = Import.__table__
NOW = bindparam("_now", type_=DateTime())


def given(name: str) -> BindParameter:
    """A value the caller passes by name to `move` (the failure's message)."""
    return bindparam(name)


@dataclass(frozen=True)
class Transition:
    name: str
    sources: tuple[ImportStatus, ...]
    target: ImportStatus
    sets: Mapping[str, Any] = field(default_factory=dict)


TRANSITIONS: dict[str, Transition] = {t.name: t for t in (
    # The run takes it, once: a duplicated or retried job finds it claimed.
    Transition("claim", (QUEUED,), RUNNING),
    # The rows are in and these people opted in: nothing more to do.
    Transition("finish", (RUNNING,), DONE, {"finished_at": NOW}),
    # The rows are in and these people are to be asked: the job queues their emails next.
    Transition("ask", (RUNNING,), ASKING),
    Transition("asked", (ASKING,), DONE, {"finished_at": NOW}),
    # The worker starts and finds it running: nothing can be running it, so it runs again
    # (every write is an upsert).
    Transition("requeue", (RUNNING,), QUEUED),
    Transition("fail", UNFINISHED, FAILED, {"finished_at": NOW, "error": given("error")}),
)}

_statements = {
    t.name: update(_IMPORTS)
    .where(_IMPORTS.c.id == bindparam("_id"), _IMPORTS.c.status.in_([s.value for s in t.sources]))
    .values(status=t.target.value, **t.sets)
    for t in TRANSITIONS.values()
}


def move(session: Session, import_id: int, name: str, **values: Any) -> bool:
    """Carry out transition `name` if (and only if) the import is in one of its from-states;
    returns whether it moved. `fail` takes `error`. Does not commit."""
    if "error" in values:
        values["error"] = values["error"][:2000]
    return rowcount(session.execute(
        _statements[name], {"_id": import_id, "_now": utcnow(), **values})) == 1
