"""International addresses (RFC 6531/6532) end to end: a real worker, a real aiosmtpd with and
without SMTPUTF8, pipelined and in lock-step; and a provider that cannot take them."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select

from broadside.core.models import Delivery, Subscriber, Subscription
from tests.helpers import emails_by_status, make_list, start_broadcast, statuses
from tests.smtp_server import SmtpServer
from webapp.extensions import db

JURGEN = "jürgen@exämple.de"
ANN = "ann@exämple.de"


def _list_with(*emails: str):
    weekly = make_list(db.session, 0)
    db.session.execute(insert(Subscriber), [{"email": e, "name": "", "attributes": {}}
                                            for e in emails])
    ids = db.session.scalars(select(Subscriber.id).where(Subscriber.email.in_(emails))).all()
    db.session.execute(insert(Subscription), [
        {"subscriber_id": sid, "list_id": weekly.id, "status": "active"} for sid in ids])
    db.session.commit()
    return weekly


@pytest.fixture(params=[True, False], ids=["pipelined", "lockstep"])
def pipelining(request) -> bool:
    return request.param


@pytest.fixture
def server_for(app):
    """An SMTP server of the test's choosing, made the default identity's."""
    started: list[SmtpServer] = []

    def make(*, smtputf8: bool, pipelining: bool = True) -> SmtpServer:
        server = SmtpServer(smtputf8=smtputf8, pipelining=pipelining).start()
        started.append(server)
        app.config["SMTP_URL"] = server.url
        return server

    yield make
    for server in started:
        server.stop()


def test_a_utf8_address_arrives_intact_where_smtputf8_is_offered(
        app, server_for, run_worker_burst, pipelining):
    server = server_for(smtputf8=True, pipelining=pipelining)
    broadcast = start_broadcast(app, _list_with("bob@example.com", JURGEN, ANN))
    run_worker_burst()
    assert statuses(broadcast.id) == {"sent": 3}
    by_rcpt = {m.rcpt_tos[0]: m for m in server.messages}
    assert set(by_rcpt) == {"bob@example.com", JURGEN, "ann@xn--exmple-cua.de"}
    jurgen = by_rcpt[JURGEN]
    assert jurgen.message["To"] == JURGEN  # UTF-8 in the header too (RFC 6532)
    assert "To: jürgen@exämple.de\r\n".encode() in jurgen.data
    assert all(m.pipelined == pipelining for m in server.messages)


def test_without_smtputf8_only_that_row_fails_with_the_reason(
        app, server_for, run_worker_burst, pipelining):
    server = server_for(smtputf8=False, pipelining=pipelining)
    broadcast = start_broadcast(app, _list_with("bob@example.com", JURGEN, ANN))
    run_worker_burst()
    assert sorted(server.recipients()) == ["ann@xn--exmple-cua.de", "bob@example.com"]
    assert emails_by_status(broadcast.id) == {"sent": {"bob@example.com", ANN},
                                              "failed": {JURGEN}}
    row = db.session.scalars(select(Delivery).where(Delivery.status == "failed")).one()
    assert "needs SMTPUTF8" in row.reason and server.url.removeprefix("smtp://") in row.reason
    assert row.error_class == "recipient" and row.attempts == 1  # not retried
    db.session.refresh(broadcast)
    assert broadcast.status == "sent"  # no pause
    ann = next(m for m in server.messages if m.rcpt_tos == ["ann@xn--exmple-cua.de"])
    assert ann.message["To"] == "ann@xn--exmple-cua.de"
    assert ann.data.isascii()
    # Not suppressed: another identity may reach it.
    assert db.session.scalar(select(Subscriber.suppression).where(Subscriber.email == JURGEN)) is None


@pytest.fixture(params=["postmark", "resend", "ses", "mailgun"])
def provider(request):
    from tests.provider_servers import MailgunServer, PostmarkServer, ResendServer, SesServer
    servers = {"postmark": PostmarkServer, "resend": ResendServer, "ses": SesServer,
               "mailgun": MailgunServer}
    with servers[request.param]() as server:
        yield server


def test_a_provider_without_smtputf8_fails_that_row_and_takes_the_a_label(app, provider):
    from broadside.campaigns.broadcasts.drafts import create_draft
    from broadside.campaigns.broadcasts.service import send_broadcast
    from broadside.delivery.identities import service as identities
    from tests.helpers import burst_identity, get_jobs

    identity = identities.create(db.session, identities.parse_input({
        "name": "provider", "from": "News <news@example.com>",
        "transport": provider.transport_url(), "delay_ms": 0}))
    people = _list_with("bob@example.com", JURGEN, ANN)
    draft = create_draft(db.session, list_id=people.id, subject="Hi", body="News",
                         identity_id=identity.id)
    broadcast = send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                               jobs=get_jobs())
    burst_identity(app, identity.name)
    received = sorted(a.rcpt for a in provider.accepted)
    if provider.scheme == "mailgun":  # its documentation says it takes SMTPUTF8
        assert received == ["ann@xn--exmple-cua.de", "bob@example.com", JURGEN]
        assert statuses(broadcast.id) == {"sent": 3}
        return
    assert received == ["ann@xn--exmple-cua.de", "bob@example.com"]
    assert emails_by_status(broadcast.id) == {"sent": {"bob@example.com", ANN},
                                              "failed": {JURGEN}}
    row = db.session.scalars(select(Delivery).where(Delivery.status == "failed")).one()
    assert "needs SMTPUTF8" in row.reason and row.error_class == "recipient"
    db.session.refresh(broadcast)
    assert broadcast.status == "sent"
