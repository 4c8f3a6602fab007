"""Revisions in flight: how many messages went out in the last hour from each frozen revision of
an automation step (`automation_messages.revision_id`) or of a transactional template
(`transactional_messages.template_revision_id`), for /metrics and the System page.

A revision is outdated when a newer one of the same step or template (the step's
`revision_id`; the template's highest revision id) was frozen more than `OUTDATED_AFTER`
after it: mail that still goes out from it says something the owner has since changed (a
message held or claimed before the change keeps its revision on purpose, invariant 8, but a
day later that is worth a look).

Read from two partial indexes over the messages sent (`ix_automation_messages_sent`,
`ix_transactional_sent_revision`: migration 0027), one range of the last hour each, then the
few revisions, steps and templates they name by primary key: the cost follows the last hour's
mail, never all the mail ever sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from broadside.core.i18n import ngettext
from broadside.core.models import TransactionalMessage
from broadside.core.models.automations import (
    Automation,
    AutomationMessage,
    AutomationRevision,
    AutomationStep,
)
from broadside.core.models.transactional import TransactionalTemplate, TransactionalTemplateRevision
from broadside.core.timeutil import utcnow

WINDOW = timedelta(hours=1)
OUTDATED_AFTER = timedelta(days=1)
STEP, TEMPLATE = "automation_step", "template"


@dataclass(frozen=True)
class InFlight:
    """One revision mail went out from in the last hour."""

    kind: str  # STEP or TEMPLATE
    revision_id: int
    source_id: int  # the step's or the template's id
    name: str  # "Welcome, step 2" or the template's name
    sent: int  # messages sent from it in the last hour
    created_at: datetime  # when this revision was frozen
    newest_revision_id: int | None
    newest_created_at: datetime | None

    @property
    def outdated(self) -> bool:
        """A newer revision of the same step or template was frozen more than a day after it."""
        return (self.newest_revision_id is not None and self.newest_created_at is not None
                and self.newest_revision_id != self.revision_id
                and self.newest_created_at - self.created_at > OUTDATED_AFTER)

    @property
    def behind(self) -> timedelta | None:
        """How much older it is than the newest revision (None: it is the newest)."""
        if self.newest_created_at is None or self.newest_revision_id == self.revision_id:
            return None
        return self.newest_created_at - self.created_at

    @property
    def behind_words(self) -> str:
        """How much older, in whole days as the page says it ("2 days")."""
        days = round(self.behind.total_seconds() / 86400) if self.behind is not None else 0
        return ngettext("%(num)s day", "%(num)s days", days)


def _steps(session: Session, since: datetime) -> list[InFlight]:
    sent = session.execute(
        select(AutomationMessage.revision_id, func.count())
        .where(AutomationMessage.sent_at.is_not(None), AutomationMessage.sent_at >= since)
        .group_by(AutomationMessage.revision_id)).all()
    if not sent:
        return []
    counts = dict(sent)
    revisions = {row.id: row for row in session.execute(
        select(AutomationRevision.id, AutomationRevision.step_id, AutomationRevision.created_at)
        .where(AutomationRevision.id.in_(counts)))}
    newest = AutomationRevision.__table__.alias("newest")
    steps = {row.id: row for row in session.execute(
        select(AutomationStep.id, AutomationStep.position, AutomationStep.revision_id,
               Automation.name, newest.c.created_at.label("newest_created_at"))
        .join(Automation, Automation.id == AutomationStep.automation_id)
        .outerjoin(newest, newest.c.id == AutomationStep.revision_id)
        .where(AutomationStep.id.in_({r.step_id for r in revisions.values()})))}
    found = []
    for revision_id, count in counts.items():
        revision = revisions.get(revision_id)
        step = steps.get(revision.step_id) if revision is not None else None
        if revision is None or step is None:
            continue  # a revision is never deleted; a row naming none is nobody's to show
        found.append(InFlight(STEP, revision_id, step.id, f"{step.name}, step {step.position}",
                              count, revision.created_at, step.revision_id,
                              step.newest_created_at))
    return found


def _templates(session: Session, since: datetime) -> list[InFlight]:
    sent = session.execute(
        select(TransactionalMessage.template_revision_id, func.count())
        .where(TransactionalMessage.template_revision_id.is_not(None),
               TransactionalMessage.sent_at >= since)
        .group_by(TransactionalMessage.template_revision_id)).all()
    if not sent:
        return []
    counts = dict(sent)
    revisions = {row.id: row for row in session.execute(
        select(TransactionalTemplateRevision.id, TransactionalTemplateRevision.template_id,
               TransactionalTemplateRevision.created_at)
        .where(TransactionalTemplateRevision.id.in_(counts)))}
    template_ids = {r.template_id for r in revisions.values()}
    names = dict(session.execute(select(TransactionalTemplate.id, TransactionalTemplate.name)
                                 .where(TransactionalTemplate.id.in_(template_ids))).all())
    newest_ids = dict(session.execute(
        select(TransactionalTemplateRevision.template_id, func.max(TransactionalTemplateRevision.id))
        .where(TransactionalTemplateRevision.template_id.in_(template_ids))
        .group_by(TransactionalTemplateRevision.template_id)).all())
    newest_at = dict(session.execute(
        select(TransactionalTemplateRevision.id, TransactionalTemplateRevision.created_at)
        .where(TransactionalTemplateRevision.id.in_(set(newest_ids.values())))).all())
    found = []
    for revision_id, count in counts.items():
        revision = revisions.get(revision_id)
        if revision_id is None or revision is None:
            continue
        newest_id = newest_ids.get(revision.template_id)
        found.append(InFlight(TEMPLATE, revision_id, revision.template_id,
                              names.get(revision.template_id, f"template {revision.template_id}"),
                              count, revision.created_at, newest_id,
                              newest_at.get(newest_id) if newest_id is not None else None))
    return found


def revisions_in_flight(session: Session, now: datetime | None = None) -> list[InFlight]:
    """Every revision mail went out from in the last hour, outdated ones first, then by kind
    and id."""
    since = (now or utcnow()) - WINDOW
    found = _steps(session, since) + _templates(session, since)
    return sorted(found, key=lambda f: (not f.outdated, f.kind, f.source_id, f.revision_id))
