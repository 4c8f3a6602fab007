"""An automation's lifecycle: the one place that writes `Automation.status` and `pause_reason`.

Each move is a named transition in `TRANSITIONS`, carried out as ONE guarded UPDATE
(`WHERE id = ? AND status IN (<sources>)`) with its event appended only when the row moved;
nothing is read-then-written and nothing here commits.

    disabled --enable--> enabled --disable--> disabled
    enabled --pause (the worker: a channel-wide error, with the reason)--> paused
    paused --enable (the owner's "resume")--> enabled;  paused --disable--> disabled
    any but deleted --delete--> deleted (its pending messages are skipped, same transaction)

Disabled and paused automations hold their due messages (the worker's due query and its
send-time re-check only send for `enabled`); enabling releases them. A deleted automation is
kept, with every message it sent, for the send log.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import update
from sqlalchemy.orm import Session

from broadside.campaigns.automations import ledger
from broadside.core.db import rowcount
from broadside.core.events import record_event
from broadside.core.models import Automation, AutomationMessage
from broadside.core.models.automations import AutomationStatus
from broadside.core.timeutil import utcnow

DISABLED = AutomationStatus.DISABLED
ENABLED = AutomationStatus.ENABLED
PAUSED = AutomationStatus.PAUSED
DELETED = AutomationStatus.DELETED

DELETED_REASON = "the automation was deleted"


@dataclass(frozen=True)
class Transition:
    name: str
    sources: tuple[AutomationStatus, ...]
    target: AutomationStatus
    event: str


TRANSITIONS = {
    t.name: t
    for t in (
        Transition("enable", (DISABLED, PAUSED), ENABLED, "automation enabled"),
        Transition("disable", (ENABLED, PAUSED), DISABLED, "automation disabled"),
        Transition("pause", (ENABLED,), PAUSED, "automation paused"),
        Transition("delete", (DISABLED, ENABLED, PAUSED), DELETED, "automation deleted"),
    )
}


def move(session: Session, automation_id: int, name: str, reason: str | None = None) -> bool:
    """Carry out one transition; True when this call moved the row. Does not commit."""
    transition = TRANSITIONS[name]
    now = utcnow()
    moved = rowcount(session.execute(
        update(Automation)
        .where(Automation.id == automation_id,
               Automation.status.in_([s.value for s in transition.sources]))
        .values(status=transition.target.value, updated_at=now,
                pause_reason=reason if name == "pause" else None,
                # A deleted automation frees its name for a new one.
                **({"name_key": None} if name == "delete" else {}))
        .execution_options(synchronize_session=False)
    ))
    if not moved:
        return False
    record_event(session, transition.event, automation_id=automation_id, detail=reason or "")
    if name == "delete":
        # Lock order: the automation row (moved above) before its messages.
        ledger.skip_pending(session, AutomationMessage.__table__.c.automation_id == automation_id,
                            DELETED_REASON, now)
    return True
