"""Attachments travel with every copy: a broadcast with a PDF sent to a real SMTP server and
read back part by part (text, HTML, the PDF's bytes), through each provider's loopback server
in the shape its documentation gives (Postmark `Attachments`, Resend `attachments` one
`/emails` each, SES raw MIME, Mailgun MIME), an automation step's and a transactional API
message's too; the message without attachments keeps its multipart/alternative form."""

from __future__ import annotations

from email import message_from_bytes, policy

import pytest

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.mail import attachment_use
from broadside.mail.attachments import store
from tests import attachment_files as files
from tests.helpers import broadcast_status, burst_identity, make_list, statuses
from tests.provider_servers import MailgunServer, PostmarkServer, ResendServer, SesServer
from webapp.extensions import db, get_jobs

SERVERS = {"postmark": PostmarkServer, "resend": ResendServer, "ses": SesServer,
           "mailgun": MailgunServer}
NAME = "Programme d’été 2027.pdf"  # not ASCII: RFC 2231 in the MIME, as given in JSON


def attached_broadcast(app, size: int, *, identity_id: int | None = None) -> tuple[int, int, int]:
    """A broadcast to `size` readers with a PDF and a calendar file; (broadcast, pdf, ics)."""
    pdf = store(db.session, name=NAME, data=files.PDF, uploaded_by=None)
    ics = store(db.session, name="party.ics", data=files.ICS, uploaded_by=None)
    readers = make_list(db.session, size, f"Readers {pdf.id}")
    draft = create_draft(db.session, list_id=readers.id, subject="Hello {{ name }}",
                         body="Hi **{{ name }}**, the programme is attached.",
                         identity_id=identity_id)
    attachment_use.attach_to_draft(db.session, draft.id, [pdf.id, ics.id])
    send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs())
    return draft.id, pdf.id, ics.id


def test_a_broadcast_with_a_pdf_reaches_smtp_part_by_part(app, smtp_server, run_worker_burst):
    broadcast_id, _, _ = attached_broadcast(app, 3)
    assert run_worker_burst() == 0
    assert statuses(broadcast_id) == {"sent": 3}

    for received in smtp_server.messages:
        message = message_from_bytes(received.data, policy=policy.default)
        assert message.get_content_type() == "multipart/mixed"
        alternative, pdf, ics = message.iter_parts()
        assert alternative.get_content_type() == "multipart/alternative"
        text, html = alternative.iter_parts()
        assert text.get_content_type() == "text/plain"
        assert "the programme is attached" in text.get_content()
        assert html.get_content_type() == "text/html"
        assert "<strong>" in html.get_content() and "the programme is attached" in html.get_content()
        assert message.get_body(("html",)) is html and message.get_body(("plain",)) is text
        assert (pdf.get_content_type(), pdf.get_filename(), pdf.get_content_disposition()) == (
            "application/pdf", NAME, "attachment")
        assert pdf.get_content() == files.PDF  # the bytes, equal
        assert pdf["Content-Transfer-Encoding"] == "base64"
        assert b"filename*=utf-8''Programme%20d%E2%80%99%C3%A9t%C3%A9%202027.pdf" in \
            received.data  # RFC 2231
        assert (ics.get_content_type(), ics.get_filename()) == ("text/calendar", "party.ics")
        assert ics.get_payload(decode=True) == files.ICS
        assert not message.defects and not any(part.defects for part in message.walk())


def test_a_broadcast_without_attachments_stays_multipart_alternative(app, smtp_server,
                                                                     run_worker_burst):
    readers = make_list(db.session, 1)
    draft = create_draft(db.session, list_id=readers.id, subject="Plain", body="No files.")
    send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs())
    run_worker_burst()
    message = message_from_bytes(smtp_server.messages[0].data, policy=policy.default)
    assert message.get_content_type() == "multipart/alternative"
    assert list(message.iter_attachments()) == []


@pytest.fixture(params=list(SERVERS))
def provider(request):
    with SERVERS[request.param]() as server:
        yield server


def test_each_provider_receives_the_files_in_its_shape(app, provider):
    from broadside.delivery.identities import service as identities

    identity = identities.create(db.session, identities.parse_input({
        "name": f"{provider.scheme} sender", "from": "News <news@example.com>",
        "transport": provider.transport_url(), "delay_ms": 0}))
    broadcast_id, _, _ = attached_broadcast(app, 5, identity_id=identity.id)
    burst_identity(app, identity.name)

    assert broadcast_status(broadcast_id) == "sent"
    assert len(provider.accepted) == 5
    for accepted in provider.accepted:
        assert accepted.files() == [(NAME, "application/pdf", files.PDF),
                                    ("party.ics", "text/calendar", files.ICS)]
    sends = provider.sends()
    if provider.scheme == "postmark":  # one batch, each message's Attachments as documented
        assert len(sends) == 1
        shape = provider.accepted[0].fields["Attachments"][0]
        assert set(shape) == {"Name", "Content", "ContentType"}
    elif provider.scheme == "resend":  # the batch endpoint takes none: one /emails each
        assert [request.path for request in sends] == ["/emails"] * 5
        assert len({request.headers["idempotency-key"] for request in sends}) == 5
        assert set(provider.accepted[0].fields["attachments"][0]) == {"filename", "content"}
    else:  # SES and Mailgun carry our MIME bytes as they are
        assert provider.accepted[0].message.get_content_type() == "multipart/mixed"


def test_a_postmark_batch_over_50_mb_goes_as_several_requests(app):
    with PostmarkServer() as server:
        from broadside.delivery.identities import service as identities

        identity = identities.create(db.session, identities.parse_input({
            "name": "postmark sender", "from": "News <news@example.com>",
            "transport": server.transport_url(), "delay_ms": 0}))
        big = store(db.session, name="big.pdf", data=files.PDF + b"%" * (5 * 1024 * 1024),
                    uploaded_by=None)
        readers = make_list(db.session, 12, "Big")
        draft = create_draft(db.session, list_id=readers.id, subject="Big", body="x",
                             identity_id=identity.id)
        attachment_use.attach_to_draft(db.session, draft.id, [big.id])
        send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                       jobs=get_jobs())
        burst_identity(app, identity.name)

        assert statuses(draft.id) == {"sent": 12}
        assert len(server.sends()) > 1  # 12 copies of 6.7 MB encoded: over 50 MB in one
        assert all(len(request.body) <= 50 * 1024 * 1024 for request in server.sends())
        assert {accepted.files()[0][2] for accepted in server.accepted} == {
            files.PDF + b"%" * (5 * 1024 * 1024)}
