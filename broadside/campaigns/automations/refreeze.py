"""Automations follow Settings: when something a step's revision freezes changes (the Settings
sender or postal address, the design, a sending identity's From or postal address), every
live automation that uses it gets a new revision of each live step, frozen with the new
values, in the transaction of the change.

A new revision is written only where the frozen content differs (saving Settings with only a
new time zone writes none), and it reaches the step's messages not yet due, and those held
for want of a postal address (`ledger.reassign_revision`); messages already due or sent keep
theirs, so what each person received stays reconstructible. Revisions are never updated
(invariant 8): following Settings is a new revision, never an edit of one.

A step whose content no longer freezes with the new values (a merge field the renderer now
refuses) makes the whole save refused, naming the automation and the step: nothing is saved,
so Settings never say one thing while an automation's next messages carry another.

Lock order: the automations that use the change are locked first (by id), then the row the
change writes (Settings, an identity), then their steps and messages, as an automation's own
save does; the worker pauses an automation before its identity, so locking the automations
first keeps the one order (docs/ARCHITECTURE.md, "Lock order").

Messages carry their revision's postal address; one without an address is never sent
(`ledger.UNADDRESSED`), and enabling an automation needs one (`postal_problem`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from sqlalchemy import ColumnElement, and_, func, or_, select, true
from sqlalchemy.orm import Session

from broadside.campaigns.automations import ledger
from broadside.campaigns.automations.entering import live_steps
from broadside.campaigns.automations.steps import frozen_revision, same_as
from broadside.campaigns.broadcasts.launch import NO_POSTAL_ADDRESS
from broadside.campaigns.broadcasts.service import sender_of
from broadside.core.errors import ValidationError
from broadside.core.i18n import _, _l
from broadside.core.models import Automation, AutomationRevision, AutomationStep, Identity
from broadside.core.models.automations import AutomationStatus
from broadside.core.timeutil import utcnow
from broadside.delivery.identities import service as identities

# What changed: the Settings sender and postal address, the design, or an identity (its id).
SETTINGS = "settings"
DESIGN = "design"
Change = str | int
T = TypeVar("T")

_LIVE = Automation.status != AutomationStatus.DELETED.value


def _users(change: Change) -> ColumnElement[bool]:
    """The live automations whose revisions freeze what `change` changes."""
    if change == DESIGN:
        return true()
    if change == SETTINGS:
        # The default identity's sender is the Settings one, and an identity without a postal
        # address of its own prints the Settings one.
        return or_(Automation.identity_id.is_(None), Automation.identity_id.in_(
            select(Identity.id).where(Identity.postal_address == "")))
    return Automation.identity_id == change


def reaching(session: Session, change: Change) -> int:
    """How many live automations a change of this would give new revisions (at most): the
    number the pages announce before saving."""
    return session.scalar(select(func.count()).select_from(Automation)
                          .where(_LIVE, _users(change))) or 0


@dataclass
class Refrozen:
    """The automations whose next messages now carry the new values, by name."""

    names: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.names)

    def words(self) -> str:
        """The sentence the pages add after a save ("" when nothing changed)."""
        if not self.names:
            return ""
        if len(self.names) == 1:
            return f"The next messages of the automation “{self.names[0]}” carry it now."
        return f"The next messages of {len(self.names)} live automations carry it now."


def refreeze(session: Session, automation_ids: Iterable[int], *, default_from: str) -> Refrozen:
    """A new revision of each live step of these automations whose frozen content would
    differ now, reaching its messages not yet due (or held). The caller holds the automation
    rows and commits. ValidationError names the automation and the step."""
    now = utcnow()
    result = Refrozen()
    for automation in session.scalars(select(Automation).where(
            Automation.id.in_(list(automation_ids)), _LIVE).order_by(Automation.id)):
        changed = False
        for step in live_steps(session, automation.id):
            try:
                revision = frozen_revision(session, step, automation.identity_id, default_from)
            except ValidationError as exc:
                raise ValidationError(
                    f"Not saved: the automation “{automation.name}” would no longer build with "
                    f"this change. {exc.message} Fix that step first, then save again.") from None
            current = session.get(AutomationRevision, step.revision_id) if step.revision_id else None
            if same_as(revision, current):
                continue
            session.add(revision)
            session.flush()
            step.revision_id = revision.id
            ledger.reassign_revision(session, step.id, revision.id, now)
            changed = True
        if changed:
            result.names.append(automation.name)
    session.flush()
    return result


def _lock(session: Session, where: ColumnElement[bool]) -> list[int]:
    return list(session.scalars(select(Automation.id).where(_LIVE, where)
                                .order_by(Automation.id).with_for_update()))


def save_and_refreeze(session: Session, write: Callable[[], T], change: Change, *,
                      default_from: str) -> tuple[T, Refrozen]:
    """`write` (a settings save that does not commit), then the new revisions of the
    automations that use what it changed, in one commit; on any error, nothing. Returns what
    `write` returned, and the automations refrozen."""
    try:
        automation_ids = _lock(session, _users(change))
        written = write()
        session.flush()
        result = refreeze(session, automation_ids, default_from=default_from)
        session.commit()
    except Exception:
        session.rollback()
        raise
    return written, result


def update_identity(session: Session, identity_id: int, data: identities.IdentityInput, *,
                    default_from: str) -> tuple[Identity, Refrozen]:
    """An identity saved (page and API alike) and the automations that send through it
    following its From and postal address, in one commit. Here, not in the identities'
    service: identities stand on a floor below the automations."""
    return save_and_refreeze(
        session, lambda: identities.update(session, identity_id, data, commit=False),
        identity_id, default_from=default_from)


def stale(session: Session, *, default_from: str, identity_id: int | None = None,
          every_identity: bool = False) -> list[int]:
    """Live automations (of one identity's stream, unless `every_identity`) whose steps'
    revisions print another sender or postal address than the one in force: those frozen
    before automations followed Settings, or before the environment's MAIL_FROM changed.
    Reads only the steps' revisions, nothing rendered."""
    query = (select(Automation.id, Automation.identity_id, AutomationRevision.from_name,
                    AutomationRevision.from_email, AutomationRevision.postal_address)
             .join(AutomationStep, and_(AutomationStep.automation_id == Automation.id,
                                        AutomationStep.removed_at.is_(None)))
             .join(AutomationRevision, AutomationRevision.id == AutomationStep.revision_id)
             .where(_LIVE))
    if not every_identity:
        query = query.where(Automation.identity_id.is_(None) if identity_id is None
                            else Automation.identity_id == identity_id)
    senders: dict[int | None, tuple[str, str, str]] = {}
    found = set()
    for automation_id, its_identity, name, address, postal in session.execute(query):
        if its_identity not in senders:
            senders[its_identity] = sender_of(session, its_identity, default_from)
        if senders[its_identity] != (name, address, postal):
            found.add(automation_id)
    return sorted(found)


def follow_stale(session: Session, *, default_from: str, identity_id: int | None = None) -> Refrozen:
    """The worker's catch-up: the `stale` automations of one stream refrozen, committed (an
    installation upgrading holds the messages of revisions without a postal address until
    this gives them the one Settings now have). A step that no longer freezes is left as it
    is (its messages keep their revision); the owner meets the reason on the next save."""
    ids = stale(session, default_from=default_from, identity_id=identity_id)
    if not ids:
        session.commit()
        return Refrozen()
    result = Refrozen()
    for automation_id in ids:
        try:
            _lock(session, Automation.id == automation_id)
            result.names += refreeze(session, [automation_id], default_from=default_from).names
            session.commit()
        except ValidationError:
            session.rollback()
    return result


def postal_problem(session: Session, automation: Automation) -> str | None:
    """Why this automation cannot be enabled for want of a postal address (its identity's own
    or else Settings'), as a broadcast cannot be sent; None when it has one or sends nothing."""
    if automation.record_only:
        return None
    if (sender_of(session, automation.identity_id, "")[2] or "").strip():
        return None
    return _(NO_POSTAL_ADDRESS)


HELD = _l("Held: add your postal address in Settings. Every email prints one, so its messages "
         "wait until it has one.")
HELD_IDENTITY = _l("Held: add your postal address in Settings (or on its sending identity). "
                   "Every email prints one, so its messages wait until it has one.")
NOT_YET = _l("Cannot be enabled yet: add your postal address in Settings. Every email prints one.")
NOT_YET_IDENTITY = _l("Cannot be enabled yet: add your postal address in Settings (or on its "
                      "sending identity). Every email prints one.")
HELD_CATCHING_UP = _l("Held a moment: its messages are being given your postal address.")


class Held(NamedTuple):
    """Why an automation's messages are held, and whether Settings is where to fix it."""
    words: str
    settings_link: bool


def held_reasons(session: Session) -> dict[int, Held]:
    """Live automations that send whose current steps print no postal address, with the
    reason their messages are held (or, disabled, why it cannot be enabled), in the owner's
    words."""
    reasons: dict[int, Held] = {}
    for automation_id, identity_id, status in session.execute(
            select(Automation.id, Automation.identity_id, Automation.status).distinct()
            .join(AutomationStep, and_(AutomationStep.automation_id == Automation.id,
                                       AutomationStep.removed_at.is_(None)))
            .join(AutomationRevision, AutomationRevision.id == AutomationStep.revision_id)
            .where(_LIVE, Automation.record_only.is_(False), ledger.UNADDRESSED)):
        if (sender_of(session, identity_id, "")[2] or "").strip():
            reasons[automation_id] = Held(str(HELD_CATCHING_UP), False)
        elif status == AutomationStatus.DISABLED.value:
            reasons[automation_id] = Held(str(NOT_YET if identity_id is None else NOT_YET_IDENTITY), True)
        else:
            reasons[automation_id] = Held(str(HELD if identity_id is None else HELD_IDENTITY), True)
    return reasons
