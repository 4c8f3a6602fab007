"""Mailing lists: create, edit, delete (never while a broadcast is using it), and counts."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import delete, exists, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.campaigns.automations.ledger import forget_list
from broadside.core.db import rowcount
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _, clean_locale
from broadside.core.models import Automation, Broadcast, Import, MailingList, Subscription
from broadside.core.models.audience import SUBSCRIPTION_STATUSES
from broadside.core.models.automations import AutomationStatus

MAX_NAME = 200
MAX_DESCRIPTION = 5000
# A list cannot be deleted while a broadcast to it may still send (or is about to).
BUSY_BROADCAST_STATUSES = ("scheduled", "queued", "sending", "paused")


@dataclass
class ListSummary:
    list: MailingList
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _clean_name(name: str | None) -> str:
    name = " ".join((name or "").split())
    if not name:
        raise ValidationError(_("A list needs a name."), field="name")
    if len(name) > MAX_NAME:
        raise ValidationError(_("A list name can be at most %(limit)s characters.",
                                limit=MAX_NAME), field="name")
    if "\x00" in name:  # PostgreSQL refuses NUL in text: say so instead of failing the write
        raise ValidationError(_("A list name cannot contain a NUL character."), field="name")
    return name


def _clean_description(description: str | None) -> str:
    description = (description or "").strip()
    if len(description) > MAX_DESCRIPTION:
        raise ValidationError(_("The description can be at most %(limit)s characters.",
                                limit=MAX_DESCRIPTION), field="description")
    if "\x00" in description:
        raise ValidationError(_("The description cannot contain a NUL character."),
                              field="description")
    return description


def clean_language(language: str | None) -> str | None:
    """A list's language as stored: a language tag (`de`, `he`, `pt-BR`), or None for
    Settings' default. ValidationError (field `language`) for anything else."""
    if language is None or not str(language).strip():
        return None
    tag = clean_locale(language)
    if tag is None:
        raise ValidationError(_("“%(language)s” is not a language tag (such as de, fr or "
                                "pt-BR).", language=str(language)[:40]), field="language")
    return tag


def _name_taken(session: Session, name: str, except_id: int | None = None) -> bool:
    query = select(MailingList.id).where(func.lower(MailingList.name) == name.lower())
    if except_id is not None:
        query = query.where(MailingList.id != except_id)
    return session.scalar(query) is not None


def _commit_or_conflict(session: Session, name: str) -> None:
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise Conflict(_("There is already a list called “%(name)s”.", name=name),
                       field="name") from None


def create_list(session: Session, name: str | None, description: str | None = "",
                signup_enabled: bool = False) -> MailingList:
    name = _clean_name(name)
    description = _clean_description(description)
    if _name_taken(session, name):
        raise Conflict(_("There is already a list called “%(name)s”.", name=name), field="name")
    mailing_list = MailingList(name=name, description=description, signup_enabled=signup_enabled)
    session.add(mailing_list)
    _commit_or_conflict(session, name)
    return mailing_list


def get_list(session: Session, list_id: int) -> MailingList:
    mailing_list = session.get(MailingList, list_id)
    if mailing_list is None:
        raise NotFound(_("There is no such list."))
    return mailing_list


def update_list(session: Session, list_id: int, *, name: str | None, description: str | None,
                signup_enabled: bool, language: str | None | object = ...) -> MailingList:
    """`language`: a tag, or "" / None for Settings' default; left as it is when not given."""
    mailing_list = get_list(session, list_id)
    name = _clean_name(name)
    description = _clean_description(description)
    if language is not ...:
        mailing_list.language = clean_language(language)  # type: ignore[arg-type]
    if _name_taken(session, name, except_id=list_id):
        raise Conflict(_("There is already a list called “%(name)s”.", name=name), field="name")
    mailing_list.name = name
    mailing_list.description = description
    mailing_list.signup_enabled = bool(signup_enabled)
    _commit_or_conflict(session, name)
    return mailing_list


def busy_broadcasts(session: Session, list_id: int) -> int:
    """How many broadcasts to this list are scheduled, queued, sending or paused."""
    return session.scalar(
        select(func.count()).select_from(Broadcast).where(
            Broadcast.list_id == list_id, Broadcast.status.in_(BUSY_BROADCAST_STATUSES)
        )
    ) or 0


def delete_list(session: Session, list_id: int) -> str:
    """Delete a list and its subscriptions (subscribers stay); returns the list's name.

    The DELETE itself carries the "no busy broadcast" predicate, so a broadcast queued between
    the confirmation page and this call still stops the delete.
    """
    mailing_list = get_list(session, list_id)
    name = mailing_list.name
    busy = exists().where(
        Broadcast.list_id == list_id, Broadcast.status.in_(BUSY_BROADCAST_STATUSES)
    )
    forget_list(session, list_id)  # automation messages re-checked against it: as SET NULL would
    automated = exists().where(Automation.list_id == list_id,
                               Automation.status != AutomationStatus.DELETED.value)
    automation = session.scalar(select(Automation.name).where(
        Automation.list_id == list_id, Automation.status != AutomationStatus.DELETED.value).limit(1))
    if automation is not None:
        session.rollback()
        raise Conflict(_("The list “%(name)s” is the trigger of the automation “%(automation)s”. "
                         "Give it another list or delete it before deleting this list.",
                         name=name, automation=automation))
    result = session.execute(
        delete(MailingList).where(MailingList.id == list_id, ~busy, ~automated)
        .execution_options(synchronize_session=False)
    )
    if rowcount(result) == 0:
        session.rollback()
        raise Conflict(_(
            "The list “%(name)s” has a broadcast that is scheduled, queued, sending or paused. "
            "Cancel or finish it before deleting the list.", name=name))
    session.commit()
    session.expunge_all()
    return name


def counts_by_list(session: Session,
                   list_ids: list[int] | None = None) -> dict[int, dict[str, int]]:
    """{list_id: {status: count}} from one GROUP BY on the (list_id, status) index."""
    query = select(Subscription.list_id, Subscription.status, func.count()).group_by(
        Subscription.list_id, Subscription.status
    )
    if list_ids is not None:
        query = query.where(Subscription.list_id.in_(list_ids))
    counts: dict[int, dict[str, int]] = {}
    for list_id, status, count in session.execute(query):
        counts.setdefault(list_id, dict.fromkeys(SUBSCRIPTION_STATUSES, 0))[status] = count
    return counts


def list_summaries(session: Session) -> list[ListSummary]:
    lists = session.scalars(select(MailingList).order_by(func.lower(MailingList.name))).all()
    counts = counts_by_list(session)
    return [
        ListSummary(item, counts.get(item.id, dict.fromkeys(SUBSCRIPTION_STATUSES, 0)))
        for item in lists
    ]


def list_summary(session: Session, list_id: int) -> ListSummary:
    mailing_list = get_list(session, list_id)
    counts = counts_by_list(session, [list_id]).get(
        list_id, dict.fromkeys(SUBSCRIPTION_STATUSES, 0)
    )
    return ListSummary(mailing_list, counts)


def all_lists(session: Session) -> list[MailingList]:
    return list(session.scalars(select(MailingList).order_by(func.lower(MailingList.name))))


def recent_imports(session: Session, list_id: int, limit: int = 5) -> list[Import]:
    return list(session.scalars(
        select(Import).where(Import.list_id == list_id).order_by(Import.id.desc()).limit(limit)
    ))
