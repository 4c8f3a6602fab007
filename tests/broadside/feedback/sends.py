"""An identity's sent messages of every kind, written straight into the tables as the worker
leaves them (sent, with `sent_at`), and their bounces and complaints reported the ways
Broadside hears of them: a provider's report naming our Message-ID, and the worker's own
refusal at RCPT (`suppress_uncommitted` naming the delivery)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

from sqlalchemy import insert, select, update

from broadside.audience.unsubscribe import service as leaving
from broadside.audience.unsubscribe.suppression import suppress_uncommitted
from broadside.core.models import (
    Automation,
    AutomationMessage,
    Broadcast,
    Delivery,
    Subscriber,
    TransactionalMessage,
)
from broadside.core.timeutil import utcnow
from broadside.mail.message_refs import (
    automation_message_id,
    delivery_message_id,
    transactional_message_id,
)
from webapp.extensions import db

_people = itertools.count(1)


def people(n: int) -> list[tuple[int, str]]:
    """n new subscribers: (id, address)."""
    emails = [f"p{next(_people)}@example.com" for _ in range(n)]
    db.session.execute(insert(Subscriber), [{"email": e, "name": ""} for e in emails])
    rows = db.session.execute(select(Subscriber.id, Subscriber.email)
                              .where(Subscriber.email.in_(emails))).all()
    by_email = {e: i for i, e in rows}
    return [(by_email[e], e) for e in emails]


def times(n: int, newest: datetime | None = None, step: timedelta = timedelta(seconds=1)):
    newest = newest or utcnow()
    return [newest - step * k for k in range(n)]


def broadcast(identity_id: int | None, sent: list[datetime], *, finished: bool = True):
    """A broadcast of the identity and one sent delivery per time: [(delivery id, email)]."""
    row = Broadcast(subject="Hello", status="sent" if finished else "sending",
                    identity_id=identity_id, started_at=min(sent),
                    finished_at=max(sent) if finished else None)
    db.session.add(row)
    db.session.flush()
    who = people(len(sent))
    db.session.execute(insert(Delivery), [
        {"broadcast_id": row.id, "subscriber_id": sid, "status": "sent", "sent_at": at}
        for (sid, _), at in zip(who, sent, strict=True)])
    ids = dict(db.session.execute(select(Delivery.subscriber_id, Delivery.id)
                                  .where(Delivery.broadcast_id == row.id)).all())
    db.session.commit()
    return row.id, [(ids[sid], email) for sid, email in who]


def automation(identity_id: int | None, sent: list[datetime]):
    row = Automation(name=f"Welcome {next(_people)}", trigger_type="joined_list",
                     status="enabled", identity_id=identity_id)
    db.session.add(row)
    db.session.flush()
    who = people(len(sent))
    db.session.execute(insert(AutomationMessage), [
        {"automation_id": row.id, "step_id": 1, "position": 1, "revision_id": 1,
         "subscriber_id": sid, "status": "sent", "due_at": at, "sent_at": at}
        for (sid, _), at in zip(who, sent, strict=True)])
    ids = dict(db.session.execute(select(AutomationMessage.subscriber_id, AutomationMessage.id)
                                  .where(AutomationMessage.automation_id == row.id)).all())
    db.session.commit()
    return row.id, [(ids[sid], email) for sid, email in who]


def transactional(identity_id: int | None, sent: list[datetime]):
    who = people(len(sent))
    db.session.execute(insert(TransactionalMessage), [
        {"kind": "template", "to_email": email, "subject": "Your code", "status": "sent",
         "subscriber_id": sid, "identity_id": identity_id, "sent_at": at, "created_at": at}
        for (sid, email), at in zip(who, sent, strict=True)])
    rows = db.session.execute(select(TransactionalMessage.to_email, TransactionalMessage.id)
                              .where(TransactionalMessage.to_email.in_([e for _, e in who]))).all()
    ids = dict(rows)
    db.session.execute(update(TransactionalMessage), [
        {"id": i, "message_id": transactional_message_id(i, "x@y.z")} for i in ids.values()])
    db.session.commit()
    return [(ids[email], email) for _, email in who]


def bounce_delivery(broadcast_id: int, sent: tuple[int, str], kind: str = "hard") -> None:
    delivery_id, email = sent
    leaving.record_bounce(db.session, email, kind,
                          message_ids=[delivery_message_id(delivery_id, broadcast_id, "x@y.z")])


def complain_delivery(broadcast_id: int, sent: tuple[int, str]) -> None:
    delivery_id, email = sent
    leaving.record_complaint(db.session, email,
                             message_ids=[delivery_message_id(delivery_id, broadcast_id, "x@y.z")])


def bounce_automation(automation_id: int, sent: tuple[int, str]) -> None:
    message_id, email = sent
    leaving.record_bounce(db.session, email, "hard",
                          message_ids=[automation_message_id(message_id, automation_id, "x@y.z")])


def bounce_transactional(sent: tuple[int, str]) -> None:
    message_id, email = sent
    leaving.record_bounce(db.session, email, "hard",
                          message_ids=[transactional_message_id(message_id, "x@y.z")])


def refused_at_rcpt(broadcast_id: int, identity_id: int | None) -> None:
    """A delivery the mail server refused at RCPT with 5.1.1 (failed, never sent), suppressed
    by the worker naming it."""
    [(sid, _)] = people(1)
    row = Delivery(broadcast_id=broadcast_id, subscriber_id=sid, status="failed",
                   smtp_code=550, reason="550 5.1.1 No such user")
    db.session.add(row)
    db.session.flush()
    suppress_uncommitted(db.session, sid, "bounced", "550 5.1.1 No such user",
                         broadcast_id=broadcast_id, delivery_id=row.id)
    db.session.commit()
