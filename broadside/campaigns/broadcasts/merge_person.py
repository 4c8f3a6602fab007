"""Whose details fill a test send's merge fields (a broadcast's or an automation step's): the
subscriber the owner picks by address; else the newest active person the audience reaches
(a list's newest subscription, or a segment's newest member); else the sample reader, Alex.
The test send says which (`MergePerson.words`), so "Hello Ana" in the inbox is explained.

Reads stay small at a million subscribers: a picked person is one lookup by the unique
address, the newest one LIMIT 1 in id order, and the picker's suggestions a bounded few.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, exists, select
from sqlalchemy.orm import Session

from broadside.core.addresses import normalise_email
from broadside.core.errors import ValidationError
from broadside.core.models import Segment, Subscriber, Subscription
from broadside.segments import service as segments

# The form field (and API field) that names the person: the same word everywhere.
FIELD = "fill_from"
SUGGESTIONS = 8


@dataclass(frozen=True)
class MergePerson:
    email: str
    name: str
    attributes: dict[str, Any] = field(default_factory=dict)
    subscriber_id: int | None = None  # None: the sample reader

    @property
    def words(self) -> str:
        """What the test send says about its merge fields."""
        if self.subscriber_id is None:
            return "Merge fields filled in with the sample reader Alex's details (alex@example.com)."
        if self.name:
            return f"Merge fields filled in with {self.name}'s details ({self.email})."
        return f"Merge fields filled in with the details of {self.email}."


SAMPLE = MergePerson(email="alex@example.com", name="Alex")


def _person(row: Subscriber) -> MergePerson:
    return MergePerson(email=row.email, name=row.name or "", attributes=dict(row.attributes or {}),
                      subscriber_id=row.id)


def _audience(session: Session, list_id: int | None,
              segment_id: int | None) -> ColumnElement[bool] | None:
    """Who the audience reaches now, as a condition over subscribers (None: nobody chosen)."""
    if segment_id is not None:
        segment = session.get(Segment, segment_id)
        return segments.segment_clause(session, segment) if segment is not None else None
    if list_id is None:
        return None
    # Correlated, as the broadcast's own audience condition: walking subscribers newest first,
    # the first one on the list ends it.
    return exists().where(Subscription.subscriber_id == Subscriber.id,
                          Subscription.list_id == list_id, Subscription.status == "active")


def newest(session: Session, *, list_id: int | None, segment_id: int | None,
           limit: int = 1) -> list[MergePerson]:
    """The newest active, unsuppressed people of the audience, newest first (at most `limit`)."""
    condition = _audience(session, list_id, segment_id)
    if condition is None:
        return []
    rows = session.scalars(
        select(Subscriber).where(condition, Subscriber.suppression.is_(None))
        .order_by(Subscriber.id.desc()).limit(limit))
    return [_person(row) for row in rows]


def default_person(session: Session, *, list_id: int | None, segment_id: int | None) -> MergePerson:
    found = newest(session, list_id=list_id, segment_id=segment_id)
    return found[0] if found else SAMPLE


def chosen(session: Session, picked: str | None, *, list_id: int | None,
           segment_id: int | None) -> MergePerson:
    """The person the owner picked by address (any subscriber, on this audience or not), or
    the default when the field is left blank. An address nobody has is refused: a test filled
    in with someone else's details than the owner asked for would mislead."""
    picked = (picked or "").strip()
    if not picked:
        return default_person(session, list_id=list_id, segment_id=segment_id)
    try:
        address = normalise_email(picked)
    except ValidationError as exc:
        raise ValidationError(f"Fill in with: {exc.message}", field=FIELD) from None
    row = session.scalar(select(Subscriber).where(Subscriber.email == address))
    if row is None:
        raise ValidationError(
            f"No subscriber has the address {address} (never added, or erased): pick one "
            "from Subscribers, or leave the field empty for the newest one.", field=FIELD)
    return _person(row)


def fill_values(person: MergePerson) -> dict[str, Any]:
    """The merge fields' values for `CompiledRevision.render`."""
    return {"email": person.email, "name": person.name, "attributes": person.attributes}
