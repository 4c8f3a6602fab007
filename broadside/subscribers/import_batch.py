"""One batch of an import written to its list: the people upserted, their subscriptions
added in the status the owner chose, an event each, and (for people who already opted in,
when asked) their welcome, all in the batch's transaction.

Nobody already on the list is re-activated, downgraded or asked again: an existing
subscription keeps its status, and a suppressed person is never put on a list. The counts
returned say which of these each row was (`importer` explains them to the owner).
"""

from __future__ import annotations

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from broadside.automations.entering import enter_joined
from broadside.models import Event, Subscriber, Subscription
from broadside.outgoing import outbox
from broadside.subscribers.service import dialect_insert
from broadside.timeutil import utcnow


def write_batch(session: Session, list_id: int, import_id: int,
                 batch: list[tuple[str, str, dict[str, str]]], *, consent: str,
                 welcome: bool = False) -> dict[str, int]:
    """Upsert one batch; returns the Tally counts it adds. With `welcome` (and people who
    already opted in), exactly the people this batch put on the list enter its welcome
    automations, in the batch's own transaction: a crash mid-import leaves nobody welcomed
    who was not imported and nobody imported who should have been welcomed (a resumed import
    finds them on the list already, so it neither re-adds nor re-welcomes them). People asked
    to confirm enter them when they confirm, as sign-ups do."""
    now = utcnow()
    wanted = {e: (n, a) for e, n, a in batch}
    known = {
        row.email: row for row in session.execute(
            select(Subscriber.id, Subscriber.email, Subscriber.name, Subscriber.attributes,
                   Subscriber.suppression).where(Subscriber.email.in_(list(wanted)))
        )
    }
    fresh = [email for email in wanted if email not in known]
    joining: list[int] = []
    counts = {"imported": 0, "updated": 0, "skipped_unsubscribed": 0, "skipped_suppressed": 0}
    if fresh:
        # ON CONFLICT DO NOTHING: a sign-up that created the same address a moment ago wins.
        session.execute(
            dialect_insert(session, Subscriber.__table__).on_conflict_do_nothing(
                index_elements=["email"]
            ),
            [{"email": e, "name": wanted[e][0], "attributes": wanted[e][1], "created_at": now,
              "soft_bounce_count": 0} for e in fresh],
        )
        joining.extend(session.scalars(select(Subscriber.id).where(Subscriber.email.in_(fresh))))
    if known:
        on_list: dict[int, str] = {
            subscriber_id: status for subscriber_id, status in session.execute(
                select(Subscription.subscriber_id, Subscription.status).where(
                    Subscription.list_id == list_id,
                    Subscription.subscriber_id.in_([row.id for row in known.values()]),
                ))
        }
        changes = []
        for row in known.values():
            name, attributes = wanted[row.email]
            new_name = name or row.name
            new_attributes = {**(row.attributes or {}), **attributes}
            if new_name != row.name or new_attributes != (row.attributes or {}):
                changes.append({"b_id": row.id, "b_name": new_name, "b_attributes": new_attributes})
            # An import never re-activates, downgrades or re-asks anyone: existing
            # subscriptions keep their status and suppressed people are not put on lists.
            status = on_list.get(row.id)
            if row.suppression is not None:
                counts["skipped_suppressed"] += 1
            elif status == "unsubscribed":
                counts["skipped_unsubscribed"] += 1
            elif status is not None:
                counts["updated"] += 1
            else:
                joining.append(row.id)
        if changes:
            table = Subscriber.__table__
            session.execute(
                update(table).where(table.c.id == bindparam("b_id"))
                .values(name=bindparam("b_name"), attributes=bindparam("b_attributes")),
                changes,
            )
    if joining:
        asking = consent == "confirm"
        session.execute(
            dialect_insert(session, Subscription.__table__).on_conflict_do_nothing(
                index_elements=["subscriber_id", "list_id"]
            ),
            [{"subscriber_id": sid, "list_id": list_id, "created_at": now,
              "status": "unconfirmed" if asking else "active"} for sid in joining],
        )
        detail = f"imported (import {import_id})" + (", asked to confirm" if asking else "")
        session.execute(
            Event.__table__.insert(),
            [{"kind": "subscribed", "subscriber_id": sid, "list_id": list_id, "created_at": now,
              "detail": detail} for sid in joining],
        )
        status = "unconfirmed" if asking else "active"
        outbox.emit_many(session, "subscriber.created", lambda: [
            {"subscriber": person, "list_id": list_id, "status": status, "source": "import"}
            for person in outbox.people(session, joining).values()], now)
        if welcome and not asking:
            # The subscriptions this batch made carry its exact timestamp (a sign-up racing
            # the import for the same person keeps its own row and its own welcome).
            added = list(session.scalars(select(Subscription.subscriber_id).where(
                Subscription.list_id == list_id, Subscription.subscriber_id.in_(joining),
                Subscription.created_at == now)))
            enter_joined(session, list_id, added, source="import", now=now)
    counts["imported"] = len(joining)
    return counts
