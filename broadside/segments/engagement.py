"""Engagement conditions of segment rules: who opened or clicked, read from the per-person
rows of reader analytics (`analytics_people`), compiled to SQL on both databases.

    {"field": "opened",       "op": "is" | "is_not",                   "value": BROADCAST_ID}
    {"field": "clicked",      "op": "is" | "is_not",                   "value": BROADCAST_ID}
    {"field": "opened_any",   "op": "within_days" | "not_within_days", "value": DAYS}
    {"field": "clicked_any",  "op": "within_days" | "not_within_days", "value": DAYS}
    {"field": "never_opened", "op": "is",                              "value": true}

What they can know: a person's open or click is recorded only for a broadcast sent with
per-person tracking, to a list whose owner turned per-person tracking on, and only for hits
not taken for a machine (analytics/counting.py): a privacy proxy's or a link scanner's hit
never makes anyone an opener or a clicker. Elsewhere nobody opened anything as far as these
conditions can tell, so the builder offers them only where a list tracks per person.

Semantics an owner would expect, where the format alone does not decide:
- `opened X is_not` matches everyone with no recorded open of X, including people X never
  reached: combine it with `received X is` for "got it and did not open it".
- `opened_any within_days N` looks at when each copy was first opened (the row keeps the
  first time only): someone who first opened a broadcast long ago and again yesterday does
  not count as opening within the last day.
- `never_opened` matches people reached by at least one broadcast tracked per person (a copy
  that may have arrived, `sent` or `unknown`, belonging to a list that tracks per person) who
  have no recorded open at all. People never reached by such a broadcast do not match: that
  they never opened is unknown, not true. Its value is always `true`.
- A click does not count as an open (the conditions read each kind as recorded).

Every condition is an EXISTS correlated on `subscribers.id`, reading deliveries through
UNIQUE(subscriber_id, broadcast_id) and analytics_people through UNIQUE(delivery_id, kind,
position): no new index is needed.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, exists, func, not_

from broadside.core.i18n import _l
from broadside.core.models import Broadcast, Delivery, MailingList, PersonActivity, Subscriber
from broadside.core.models.sending import DeliveryStatus

MAX_DAYS = 3650
PER_PERSON = "per_person"  # a broadcast's tracking mode (campaigns/analytics/modes.py)
REACHED = (DeliveryStatus.SENT.value, DeliveryStatus.UNKNOWN.value)
KIND = {"opened": "open", "clicked": "click", "opened_any": "open", "clicked_any": "click",
        "never_opened": "open"}

OPERATORS: dict[str, tuple[str, ...]] = {
    "opened": ("is", "is_not"),
    "clicked": ("is", "is_not"),
    "opened_any": ("within_days", "not_within_days"),
    "clicked_any": ("within_days", "not_within_days"),
    "never_opened": ("is",),
}
BROADCAST_FIELDS = ("opened", "clicked")
FIELD_LABELS = {
    "opened": _l("Opened broadcast"),
    "clicked": _l("Clicked in broadcast"),
    "opened_any": _l("Opened anything"),
    "clicked_any": _l("Clicked anything"),
    "never_opened": _l("Never opened anything"),
}
# Operator words that depend on the field ("did open", not "did receive").
FIELD_OPERATOR_LABELS = {
    "opened:is": _l("did open"),
    "opened:is_not": _l("did not open"),
    "clicked:is": _l("did click"),
    "clicked:is_not": _l("did not click"),
    "never_opened:is": _l("is true (reached, never opened)"),
}


def clean_never(value: object) -> bool | None:
    """`never_opened`'s value: True for true (as JSON, or "true" as a form posts it);
    None for anything else."""
    if value is True or (isinstance(value, str) and value.strip().lower() == "true"):
        return True
    return None


def _activity(kind: str, *where: ColumnElement[bool]) -> ColumnElement[bool]:
    """A recorded `kind` on one of the person's copies (restricted by `where`)."""
    return exists().where(Delivery.subscriber_id == Subscriber.id,
                          PersonActivity.delivery_id == Delivery.id,
                          PersonActivity.kind == kind, *where)


def _reached_with_tracking() -> ColumnElement[bool]:
    """The person was reached by a broadcast tracked per person, through a list that tracks
    per person (the copy's list, else the broadcast's)."""
    copy_list = func.coalesce(Delivery.list_id, Broadcast.list_id)
    return exists().where(
        Delivery.subscriber_id == Subscriber.id, Delivery.status.in_(REACHED),
        Broadcast.id == Delivery.broadcast_id, Broadcast.tracking == PER_PERSON,
        exists().where(MailingList.id == copy_list, MailingList.per_person_tracking.is_(True)))


def condition(field: str, op: str, value: int | bool, now: datetime) -> ColumnElement[bool]:
    """The condition over `subscribers` (its value parsed by `rules.parse`)."""
    kind = KIND[field]
    if field in BROADCAST_FIELDS:
        did = _activity(kind, Delivery.broadcast_id == value)
        return did if op == "is" else not_(did)
    if field in ("opened_any", "clicked_any"):
        assert isinstance(value, int)
        recent = _activity(kind, PersonActivity.first_at >= now - timedelta(days=value))
        return recent if op == "within_days" else not_(recent)
    if field == "never_opened":
        return _reached_with_tracking() & not_(_activity(kind))
    raise AssertionError(field)
