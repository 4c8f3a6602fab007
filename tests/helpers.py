"""Helpers shared by tests in every folder (fixtures stay in the conftest modules).

Import from here, never from a conftest module.
"""

from __future__ import annotations

import re
import time

from flask import current_app
from sqlalchemy import func, insert, select

from broadside.broadcasts.drafts import create_draft
from broadside.broadcasts.service import send_broadcast
from broadside.hourly import HourlyCap
from broadside.lease import Lease
from broadside.models import Broadcast, Delivery, MailingList, Subscriber, Subscription
from broadside.queues import Jobs
from broadside.unsubscribe import tokens
from jobs.pacing import Pacer
from jobs.runtime import Runtime
from webapp.extensions import db, get_jobs

SECRET_KEY = "test-secret-key-0123456789"
OWNER_EMAIL = "owner@example.com"
OWNER_PASSWORD = "correct horse battery"


def csrf_token_from(html: str) -> str:
    match = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', html) or re.search(
        r'name="csrf_token" value="([^"]+)"', html
    )
    assert match, "no CSRF token on the page"
    return match.group(1)


def wait_until(condition, timeout: float = 20.0, interval: float = 0.05, message: str = ""):
    """Poll `condition` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(message or f"condition not met within {timeout}s")


def make_token(subscriber_id: int, list_id: int, broadcast_id: int | None = None, *,
               secret_key: str | None = None) -> str:
    """An unsubscribe token signed with the current app's SECRET_KEY (or the one given)."""
    return tokens.make_token(subscriber_id, list_id, broadcast_id,
                             secret_key=secret_key or current_app.config["SECRET_KEY"])


def read_token(token: str) -> tokens.UnsubscribeClaim | None:
    return tokens.read_token(token, secret_key=current_app.config["SECRET_KEY"])


def unsubscribe_url(token: str, base_url: str | None = None) -> str:
    return tokens.unsubscribe_url(token, base_url or current_app.config["BASE_URL"])


def worker_runtime(app, transport, *, identity: str | None = None, hourly: HourlyCap | None = None,
                   **config) -> Runtime:
    """A worker's runtime built by hand (as `jobs.worker.run_worker` builds it), for tests that
    run one slice or one maintenance pass in this process. `config` overrides the app's."""
    redis = app.extensions["broadside_redis"]
    namespace = app.config["BROADSIDE_NAMESPACE"]
    lease = Lease(redis, namespace, identity) if identity else Lease(redis, namespace)
    return Runtime(
        lease=lease, pacer=Pacer(0), transport=transport,
        hourly=hourly or HourlyCap(redis, namespace, 0), config={**app.config, **config},
        jobs=Jobs(redis, namespace), instance_path=app.instance_path,
    )


# ---------------------------------------------------------------- lists and broadcasts


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
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                          jobs=get_jobs() if enqueue else None)


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
