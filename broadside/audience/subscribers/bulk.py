"""Bulk actions on the subscriber table: add to a list, remove from a list, unsubscribe (from
one list or all), block, erase, for the selected people or everyone a filter matches.

What it guarantees:

- Nothing is written until the owner confirms a `Plan` that says how many people and what
  will happen (`plan`); `submit` stores a `BulkAction` row and, in the same transaction, the
  set of people it is for (`bulk_members.fix`: the selected ids, or everyone the filter
  matches at that moment, up to the highest subscriber id the confirmation page saw), then
  queues one worker job. A set that is not the size the owner confirmed is not stored
  (`SetChanged`): they confirm again. So the action touches nobody outside what was
  confirmed; someone who comes to match the filter later is never included.
- The worker (`jobs/bulk.py`) works in batches of the set (BATCH_SIZE ids, keyset over ids
  ascending), each in one transaction that first moves the row's cursor (`last_id`) with an
  UPDATE guarded on where it was, then applies the batch's effect to those of the batch who
  still match the filter (the others are left alone and counted in `no_longer_matched`),
  then deletes the batch's rows of the set: of two runs of one batch (a duplicated job, a
  restarted worker) exactly one does it, and the other rolls back.
- Every effect is itself guarded, so even a batch run again changes nothing: adding,
  unsubscribing and removing are set-based transitions of `broadside.audience.subscriptions`
  (the one writer of a subscription's status: `subscribe_many` creates only missing
  subscriptions, `leave_many` moves only those not left yet, `remove_many` deletes only
  those still on the list), blocking is the single action's guarded write
  (`suppress_uncommitted`), all with their events; erasing deletes only people still there.
- Nothing here sends mail: adding to a list starts no welcome series, unsubscribing sends
  no confirmation.

`BulkAction.status` is written only here: queued -> running -> done | failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from broadside.audience import subscriptions
from broadside.audience.subscribers import bulk_members, service
from broadside.audience.subscribers.search import Filters
from broadside.audience.subscribers.total import count_exactly
from broadside.audience.unsubscribe.suppression import suppress_uncommitted
from broadside.core.db import rowcount
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _, _l, ngettext
from broadside.core.models import BulkAction, MailingList, Subscriber
from broadside.core.timeutil import utcnow

BATCH_SIZE = 1000
SLICE_SECONDS = 5.0  # a job's share of the worker before it queues its continuation
MAX_SELECTION = 1000
NEEDS_LIST = ("add", "remove")
# What the owner chooses from (unsubscribing from every list is an unsubscribe without a list).
CHOICES = {"add": _l("Add to a list"), "remove": _l("Remove from a list"),
           "unsubscribe": _l("Unsubscribe from a list"),
           "unsubscribe_all": _l("Unsubscribe from every list"),
           "block": _l("Block (no mail from any list)"), "erase": _l("Erase for good")}
TRANSITIONS = {"start": (("queued",), "running"), "finish": (("running",), "done"),
               "fail": (("queued", "running"), "failed")}


def people(count: int) -> str:
    return ngettext("%(num)s person", "%(num)s people", count)


class SetChanged(Conflict):
    """The people the action would be for are no longer as many as the owner confirmed;
    nothing was stored. `total`: how many they are now."""

    def __init__(self, expected: int, total: int) -> None:
        super().__init__(_("The number of people changed since you looked: it is now "
                           "%(total)s, not %(expected)s. Check and confirm again.",
                           total=f"{total:,}", expected=f"{expected:,}"))
        self.total = total


@dataclass(frozen=True)
class Plan:
    """A checked bulk action, not yet stored: what the confirmation page says."""

    action: str
    list_id: int | None
    list_name: str
    subscriber_ids: list[int] | None
    filters: Filters | None
    max_id: int
    total: int

    @property
    def choice(self) -> str:
        """The choice that makes this plan again (the confirmation form posts it back)."""
        return "unsubscribe_all" if self.action == "unsubscribe" and not self.list_id \
            else self.action

    @property
    def headline(self) -> str:
        n, name = self.total, self.list_name
        if self.action == "add":
            return ngettext("Add %(num)s person to %(list)s", "Add %(num)s people to %(list)s",
                            n, list=name)
        if self.action == "remove":
            return ngettext("Remove %(num)s person from %(list)s",
                            "Remove %(num)s people from %(list)s", n, list=name)
        if self.action == "unsubscribe" and self.list_id:
            return ngettext("Unsubscribe %(num)s person from %(list)s",
                            "Unsubscribe %(num)s people from %(list)s", n, list=name)
        if self.action == "unsubscribe":
            return ngettext("Unsubscribe %(num)s person from every list",
                            "Unsubscribe %(num)s people from every list", n)
        if self.action == "block":
            return ngettext("Block %(num)s person", "Block %(num)s people", n)
        return ngettext("Erase %(num)s person", "Erase %(num)s people", n)

    @property
    def details(self) -> list[str]:
        name = self.list_name
        return {
            "add": [_("Each joins %(list)s as active. Anyone already on it keeps their status "
                      "there: someone who unsubscribed stays unsubscribed.", list=name),
                    _("Nothing is sent: the list's welcome series does not start for them.")],
            "remove": [_("Their subscription to %(list)s is deleted, as if they had never been "
                         "added. Anyone who unsubscribed from it stays recorded as "
                         "unsubscribed, so nobody can be re-added against their wish.",
                         list=name),
                       _("Nothing is sent, and their other lists are untouched.")],
            "unsubscribe": [_("They stop getting %(list)s, as if they had unsubscribed at your "
                              "request; each change is recorded in their history.", list=name)
                            if self.list_id else
                            _("They stop getting every list they are on, as if they had "
                              "unsubscribed at your request; each change is recorded in their "
                              "history."),
                            _("Nothing is sent to them, not even a confirmation.")],
            "block": [_("They get no more mail from any list, now or if they sign up again, "
                        "until you lift the block on their page. Their subscriptions are kept."),
                      _("Nothing is sent.")],
            "erase": [_("This deletes them for good: their addresses, names, attributes, "
                        "subscriptions and history. Broadcast totals keep counting their "
                        "deliveries, without saying who they were for."),
                      _("This cannot be undone. To stop mail but keep the record, unsubscribe "
                        "or block instead.")],
        }[self.action]


def _parse_ids(raw: list[str]) -> list[int]:
    ids: set[int] = set()
    for value in raw:
        value = (value or "").strip()
        if not value.isdigit() or not 0 < int(value) < 2**31:
            raise ValidationError(_("The selection is not valid (a subscriber id was not a "
                                  "number). Reload the table and select again."))
        ids.add(int(value))
    if len(ids) > MAX_SELECTION:
        raise ValidationError(_("Select at most %(max)s people, or choose everyone matching "
                                "the filter.", max=f"{MAX_SELECTION:,}"))
    return sorted(ids)


def highest_id(session: Session) -> int:
    return session.scalar(select(func.max(Subscriber.id))) or 0


def plan(session: Session, *, action: str | None, list_id: int | None, scope: str | None,
         ids: list[str], filters: Filters, max_id: int | None = None,
         count: bool = True) -> Plan:
    """Check a requested bulk action and count exactly who it touches; ValidationError with
    the sentence to show when something is missing or wrong. Reads only. `count=False`
    leaves a filter's people uncounted (`total` 0): `submit` counts them as it stores them,
    so the press does not count a million people twice."""
    if not isinstance(action, str) or action not in CHOICES:  # an API body may hold anything
        raise ValidationError(_("Choose what to do with them."), field="action")
    if action == "unsubscribe_all":
        action, list_id = "unsubscribe", None
    elif action == "unsubscribe" and not list_id:
        raise ValidationError(_("Choose the list to unsubscribe them from, or choose "
                                "“Unsubscribe from every list”."))
    if scope not in ("selected", "all"):
        raise ValidationError(_("Choose whether to act on the selected people or on everyone "
                              "matching the filter."))
    list_name = ""
    if action in NEEDS_LIST and not list_id:
        raise ValidationError("Choose the list to add them to." if action == "add" else
                              "Choose the list to remove them from.")
    if list_id:
        if action not in (*NEEDS_LIST, "unsubscribe"):
            list_id = None  # blocking and erasing are for every list
        else:
            found = session.scalar(select(MailingList.name).where(MailingList.id == list_id))
            if found is None:
                raise ValidationError(_("That list does not exist any more. Choose another."))
            list_name = found
    latest = highest_id(session)
    if scope == "selected":
        selected = _parse_ids(ids)
        if not selected:
            raise ValidationError(_("Nobody is selected: tick the people to act on, or choose "
                                  "everyone matching the filter."))
        existing = set(session.scalars(select(Subscriber.id)
                                       .where(Subscriber.id.in_(selected))))
        missing = [i for i in selected if i not in existing]
        if missing:
            shown = ", ".join(map(str, missing[:5])) + (" …" if len(missing) > 5 else "")
            raise ValidationError(ngettext(
                "%(num)s person of the selection no longer exists (id %(ids)s). Reload the "
                "table and select again.", "%(num)s people of the selection no longer exist "
                "(id %(ids)s). Reload the table and select again.", len(missing), ids=shown))
        return Plan(action, list_id or None, list_name, selected, None, selected[-1],
                    len(selected))
    frozen = min(max_id, latest) if max_id else latest
    if not count:
        return Plan(action, list_id or None, list_name, None, filters, frozen, 0)
    total = count_exactly(session, filters, frozen)
    if not total:
        raise ValidationError(_("Nobody matches this filter, so there is nothing to do."))
    return Plan(action, list_id or None, list_name, None, filters, frozen, total)


def submit(session: Session, confirmed: Plan, enqueue: Callable[[int], Any], *,
           expected: int | None = None) -> BulkAction:
    """Store a confirmed plan with its set of people, in one transaction, and queue its job;
    SetChanged (nothing stored) when the set is not `expected` people; a Redis outage fails
    the action visibly."""
    record = BulkAction(
        action=confirmed.action, list_id=confirmed.list_id, list_name=confirmed.list_name,
        subscriber_ids=confirmed.subscriber_ids,
        filters=confirmed.filters.as_dict() if confirmed.filters is not None else None,
        max_id=confirmed.max_id, total=confirmed.total, status="queued",
    )
    session.add(record)
    session.flush()
    total = bulk_members.fix(session, record.id, subscriber_ids=confirmed.subscriber_ids,
                             filters=confirmed.filters, max_id=confirmed.max_id)
    if expected is not None and total != expected:
        session.rollback()
        raise SetChanged(expected, total)
    if not total:
        session.rollback()
        raise ValidationError(_("Nobody matches this filter any more, so there is nothing to do."))
    record.total = total
    session.commit()
    try:
        enqueue(record.id)
    except RedisError:
        fail(session, record.id, "The action could not be queued (Redis is not answering). "
                                 "Nothing was changed; try again.")
    return get(session, record.id)


def get(session: Session, bulk_id: int) -> BulkAction:
    record = session.get(BulkAction, bulk_id, populate_existing=True)
    if record is None:
        raise NotFound(_("There is no such bulk action."))
    return record


def _move(session: Session, bulk_id: int, transition: str, **values: Any) -> bool:
    sources, target = TRANSITIONS[transition]
    if target in ("done", "failed"):
        values["finished_at"] = utcnow()
    result = session.execute(
        update(BulkAction).where(BulkAction.id == bulk_id, BulkAction.status.in_(sources))
        .values(status=target, **values).execution_options(synchronize_session=False))
    return rowcount(result) == 1


def _filters(record: BulkAction) -> Filters | None:
    """The filter the set must still match (None for a selection: the ticked people)."""
    return None if record.subscriber_ids is not None else Filters.from_dict(record.filters or {})


def run_batch(session: Session, bulk_id: int, batch_size: int = BATCH_SIZE) -> int | None:
    """One batch, in one transaction; returns how many people it covered (0: the action is
    finished now), None when the action is not running or another run took this batch."""
    record = get(session, bulk_id)
    if record.status != "running":
        session.rollback()
        return None
    start = record.last_id
    if record.list_id is not None and session.get(MailingList, record.list_id) is None:
        fail(session, bulk_id, f"The list {record.list_name} was deleted, so the action "
                               f"stopped after {people(record.processed)}.")
        return None
    ids = bulk_members.next_batch(session, bulk_id, start, batch_size)
    if not ids:
        _move(session, bulk_id, "finish")
        session.commit()
        return 0
    # Only the confirmed set, and of it only those who still match (the rest: left alone).
    matching = bulk_members.still_matching(session, ids, _filters(record))
    # Claim the batch: the cursor moves first, guarded on where it was.
    claimed = session.execute(
        update(BulkAction).where(BulkAction.id == bulk_id, BulkAction.last_id == start,
                                 BulkAction.status == "running")
        .values(last_id=ids[-1], processed=BulkAction.processed + len(ids),
                no_longer_matched=BulkAction.no_longer_matched + len(ids) - len(matching))
        .execution_options(synchronize_session=False))
    if rowcount(claimed) != 1:
        session.rollback()
        return None
    changed = apply(session, record.action, record.list_id, matching, bulk_id) \
        if matching else 0
    session.execute(update(BulkAction).where(BulkAction.id == bulk_id)
                    .values(changed=BulkAction.changed + changed)
                    .execution_options(synchronize_session=False))
    bulk_members.forget(session, bulk_id, up_to=ids[-1])
    session.commit()
    return len(ids)


def apply(session: Session, action: str, list_id: int | None, ids: list[int],
          bulk_id: int) -> int:
    """One batch's effect, in the caller's transaction; returns how many people changed."""
    if action == "add":
        assert list_id is not None
        return len(subscriptions.subscribe_many(session, list_id, ids, detail="added by owner",
                                                source="owner"))
    if action == "remove":
        assert list_id is not None
        return len(subscriptions.remove_many(session, list_id, ids,
                                             detail=f"by the owner (bulk action {bulk_id})"))
    if action == "unsubscribe":
        left = subscriptions.leave_many(session, ids, list_id, source="owner")
        return len({sid for sid, _ in left})
    if action == "block":
        detail = f"blocked by the owner (bulk action {bulk_id})"
        return sum(1 for sid in ids if suppress_uncommitted(session, sid, "blocked", detail))
    if action == "erase":
        return service.erase_uncommitted(session, ids)
    raise ValidationError(_("Unknown bulk action %(action)r.", action=action))


def run_slice(session: Session, bulk_id: int, *, batch_size: int = BATCH_SIZE,
              seconds: float = SLICE_SECONDS, clock: Callable[[], float] = time.monotonic
              ) -> str:
    """Batches for up to `seconds`: "continue" (queue the next slice), "done", or "stopped"
    (failed, unknown, or nothing to do)."""
    _move(session, bulk_id, "start")
    session.commit()
    deadline = clock() + seconds
    while True:
        covered = run_batch(session, bulk_id, batch_size)
        if covered is None:
            return "stopped"
        if covered == 0:
            return "done"
        if clock() >= deadline:
            return "continue"


def fail(session: Session, bulk_id: int, message: str) -> None:
    """Stop the action with the owner's reason; the rest of its set goes with it."""
    session.rollback()
    if _move(session, bulk_id, "fail", error=message[:2000]):
        bulk_members.forget(session, bulk_id)
    session.commit()


def interrupted(session: Session) -> list[int]:
    """Bulk actions a stopped worker left queued or running (to queue again)."""
    return list(session.scalars(select(BulkAction.id)
                                .where(BulkAction.status.in_(("queued", "running")))
                                .order_by(BulkAction.id)))
