"""A provider refusing the channel pauses the identity's sends, with a reason the owner can
act on; the other identities go on; fixing the transport and resuming completes the send."""

from __future__ import annotations

import signal

import pytest
from sqlalchemy import select

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import resume_broadcast, send_broadcast, send_test
from broadside.core.models import Identity, TransactionalMessage
from broadside.delivery.identities import service as identities
from jobs.app import from_flask
from jobs.worker import run_worker
from tests.helpers import assert_nobody_twice, broadcast_row, get_jobs, make_list, statuses
from tests.smtp_server import SmtpServer
from webapp.extensions import db


@pytest.fixture
def locked_server():
    server = SmtpServer(auth=("mailer", "right-password")).start()
    yield server
    server.stop()


def burst(app, *names: str) -> int:
    db.session.commit()  # the test's reads end before the worker writes (SQLite)
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return run_worker(from_flask(app), burst=True, identities=names)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        db.session.expire_all()


def _send(app, list_id: int, identity_id: int | None) -> int:
    draft = create_draft(db.session, list_id=list_id, subject="Hi", body="Hello", identity_id=identity_id)
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs()).id


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")
def test_a_refused_login_pauses_the_identity_and_only_it(app, smtp_server, locked_server):
    app.config["SMTP_URL"] = smtp_server.url
    wrong = f"smtp://mailer:wrong@{locked_server.host}:{locked_server.port}"
    product = identities.create(db.session, identities.parse_input(
        {"name": "Product", "from": "Product <hi@product.example>", "transport": wrong, "delay_ms": 0}))
    users = make_list(db.session, 5, "Users", domain="users.example")
    readers = make_list(db.session, 4, "Readers", domain="readers.example")
    first = _send(app, users.id, product.id)
    second = _send(app, users.id, product.id)
    news = _send(app, readers.id, None)
    test_id = send_test(db.session, second, "owner@example.org", default_from=app.config["MAIL_FROM"],
                        jobs=get_jobs())

    burst(app, "Product")
    paused = broadcast_row(first)
    assert paused.status == "paused"
    assert "refused our login" in paused.pause_reason and "535" in paused.pause_reason
    assert "“Product” (Settings → Sending identities)" in paused.pause_reason  # what to fix
    identity = db.session.get(Identity, product.id)
    assert identity.status == "paused" and "535" in identity.pause_reason
    # Everything else of that identity holds: the second broadcast waits with a notice, the
    # test send stays pending; nobody failed.
    waiting = broadcast_row(second)
    assert waiting.status == "sending" and "“Product” is paused" in waiting.notice
    assert statuses(second) == {"pending": 5}
    assert statuses(first) == {"pending": 5}
    assert db.session.get(TransactionalMessage, test_id).status == "pending"
    assert locked_server.recipients() == []

    # Another identity's stream is not held by it.
    burst(app, "default")
    assert broadcast_row(news).status == "sent" and len(smtp_server.recipients()) == 4

    # The fix: the right password (saving a changed transport resumes the identity), then
    # Resume on the paused broadcast.
    identities.update(db.session, product.id, identities.parse_input(
        {"name": "Product", "from": "Product <hi@product.example>", "transport": locked_server.url,
         "delay_ms": 0}, updating=True))
    assert db.session.get(Identity, product.id).status == "active"
    resume_broadcast(db.session, first, jobs=get_jobs())
    burst(app, "Product")
    assert broadcast_row(first).status == "sent" and broadcast_row(second).status == "sent"
    received = locked_server.recipients()
    assert sorted(received) == sorted(["owner@example.org"] + [
        f"reader{i:05d}@users.example" for i in range(5)] * 2)
    assert_nobody_twice([r for r in received if r != "owner@example.org"][:5])
    assert db.session.get(TransactionalMessage, test_id).status == "sent"
    assert all(m.mail_from == "hi@product.example" for m in locked_server.messages)


def test_resuming_the_default_identitys_broadcast_lifts_its_pause(app, smtp_server):
    """The default identity pauses on the settings row (it is no row of its own)."""
    app.config["SMTP_URL"] = smtp_server.url
    from broadside.delivery.identities import lifecycle

    assert lifecycle.pause(db.session, None, "535 refused")
    db.session.commit()
    assert identities.default_identity(db.session, app.config).status == "paused"
    readers = make_list(db.session, 2, "Readers", domain="readers.example")
    news = _send(app, readers.id, None)
    burst(app)
    assert statuses(news) == {"pending": 2}
    assert "paused" in (broadcast_row(news).notice or "")
    identities.resume(db.session, None)
    burst(app)
    assert broadcast_row(news).status == "sent"
    assert db.session.scalar(select(Identity.id)) is None  # the default never became a row
