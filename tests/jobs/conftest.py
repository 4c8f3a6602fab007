"""Helpers for the sending pipeline's tests: a list of people, a sent broadcast, a worker run."""

from __future__ import annotations

import signal

import pytest
from sqlalchemy import func, insert, select

from webapp.broadcasts.drafts import create_draft
from webapp.broadcasts.service import send_broadcast
from webapp.extensions import db
from webapp.models import Broadcast, Delivery, MailingList, Subscriber, Subscription


def make_list(session, size: int, name: str = "Weekly", domain: str = "example.com") -> MailingList:
    mailing_list = MailingList(name=name)
    session.add(mailing_list)
    session.flush()
    if size:
        session.execute(
            insert(Subscriber),
            [
                {"email": f"reader{i:05d}@{domain}", "name": f"Reader {i}", "attributes": {}}
                for i in range(size)
            ],
        )
        ids = session.scalars(
            select(Subscriber.id).where(Subscriber.email.like(f"%@{domain}")).order_by(Subscriber.id)
        ).all()
        session.execute(
            insert(Subscription),
            [{"subscriber_id": sid, "list_id": mailing_list.id, "status": "active"} for sid in ids],
        )
    session.commit()
    return mailing_list


def while_the_server_takes(smtp_server, email: str, statement, then=None) -> None:
    """Run `statement` (committed, on its own connection) while the SMTP server is taking the
    message to `email`, after the end of DATA and before its reply: something that happens at
    that exact moment of a send. `then()` runs right after the commit."""
    engine = db.engine

    def hook(envelope) -> None:
        if envelope.rcpt_tos == [email]:
            with engine.begin() as connection:
                connection.execute(statement)
            if then is not None:
                then()

    smtp_server.script.on_data = hook


def start_broadcast(
    app,
    mailing_list: MailingList,
    subject: str = "Hello {{ name }}",
    body: str = "Hi **{{ name }}**, this is the news.",
    enqueue: bool = True,
) -> Broadcast:
    draft = create_draft(db.session, list_id=mailing_list.id, subject=subject, body=body)
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], enqueue=enqueue)


def statuses(broadcast_id: int) -> dict[str, int]:
    db.session.commit()
    rows = db.session.execute(
        select(Delivery.status, func.count())
        .where(Delivery.broadcast_id == broadcast_id)
        .group_by(Delivery.status)
    ).all()
    return {status: count for status, count in rows}


def counters(broadcast_id: int) -> dict[str, int]:
    db.session.expire_all()
    b = db.session.get(Broadcast, broadcast_id)
    return {
        k: v
        for k, v in {
            "pending": b.pending_count,
            "sending": b.sending_count,
            "sent": b.sent_count,
            "skipped": b.skipped_count,
            "failed": b.failed_count,
            "unknown": b.unknown_count,
        }.items()
        if v
    }


@pytest.fixture
def run_worker_burst(app, smtp_server):
    """Run the real worker in this process until the queues are empty (RQ burst mode)."""
    from jobs.worker import run_worker

    app.config["SMTP_URL"] = app.config.get("SMTP_URL") or smtp_server.url
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def run() -> int:
        try:
            return run_worker(app, burst=True)
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)
            db.session.expire_all()

    return run
