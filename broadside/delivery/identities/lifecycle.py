"""An identity's lifecycle: the one place that writes `Identity.status` and `pause_reason`
(and the default identity's pause, kept on the settings row since the default is no row).

    active --pause (the worker: the provider refused the channel; the reputation guard: a
             bounce or complaint rate at its limit; with the reason)--> paused
    paused --resume (the owner, or saving a changed transport URL)--> active
    active | paused --delete (only when unused: broadside.delivery.identities.service)--> deleted

Each move is one guarded UPDATE with its event appended only when the row moved (and a pause
its `identity.paused` webhook event, in the same transaction); nothing here commits. A paused
identity's worker claims nothing (its broadcasts wait in `sending` with a notice, its
automation messages and transactional mail stay pending) until it is resumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.events import record_event
from broadside.core.models import Identity, SiteSettings
from broadside.core.models.identities import IdentityStatus
from broadside.core.site_settings import get_settings
from broadside.core.timeutil import utcnow
from broadside.webhooks import emitter

ACTIVE = IdentityStatus.ACTIVE
PAUSED = IdentityStatus.PAUSED
DELETED = IdentityStatus.DELETED


@dataclass(frozen=True)
class Transition:
    name: str
    sources: tuple[IdentityStatus, ...]
    target: IdentityStatus
    event: str


TRANSITIONS = {
    t.name: t
    for t in (
        Transition("pause", (ACTIVE,), PAUSED, "identity paused"),
        Transition("resume", (PAUSED,), ACTIVE, "identity resumed"),
        Transition("delete", (ACTIVE, PAUSED), DELETED, "identity deleted"),
    )
}


def move(session: Session, identity_id: int | None, name: str, reason: str | None = None,
         *, label: str = "", figures: dict[str, Any] | None = None) -> bool:
    """Carry out one transition (`identity_id` None: the default identity, which can pause
    and resume but is never deleted); True when this call moved it. Does not commit."""
    transition = TRANSITIONS[name]
    if identity_id is None:
        if name == "delete":
            raise ValueError("the default identity is the environment; it cannot be deleted")
        get_settings(session)  # the row exists before it is guarded
        column = SiteSettings.default_pause_reason
        guard = column.is_(None) if name == "pause" else column.isnot(None)
        moved = rowcount(session.execute(
            update(SiteSettings).where(SiteSettings.id == 1, guard)
            .values(default_pause_reason=(reason or "paused") if name == "pause" else None)
            .execution_options(synchronize_session=False)))
    else:
        moved = rowcount(session.execute(
            update(Identity)
            .where(Identity.id == identity_id,
                   Identity.status.in_([s.value for s in transition.sources]))
            .values(status=transition.target.value, updated_at=utcnow(),
                    pause_reason=reason if name == "pause" else None,
                    # A deleted identity frees its name for a new one.
                    **({"name_key": None} if name == "delete" else {}))
            .execution_options(synchronize_session=False)))
    if moved:
        detail = f"{label or 'default'}: {reason}" if reason else (label or "default")
        record_event(session, transition.event, detail=detail[:1000])
        if name == "pause":
            emitter.emit(session, "identity.paused", lambda: {
                "identity": {"id": identity_id, "name": label or "default"},
                "reason": reason or "paused", "figures": figures})
    return bool(moved)


def pause(session: Session, identity_id: int | None, reason: str, *, label: str = "",
          figures: dict[str, Any] | None = None) -> bool:
    """active -> paused with the reason (the worker's channel refusal, the reputation guard
    with its `figures`, which the `identity.paused` webhook event carries)."""
    return move(session, identity_id, "pause", reason, label=label, figures=figures)


def resume(session: Session, identity_id: int | None, *, label: str = "") -> bool:
    return move(session, identity_id, "resume", label=label)
