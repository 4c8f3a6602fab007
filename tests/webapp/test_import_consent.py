"""How imported people agreed to receive mail: the owner must say ("They already opted in" or
"Ask them to confirm"); asking sends each new person the sign-up form's confirmation email
through the real worker (RQ burst, aiosmtpd), at the sending pace, once, and never touches
anyone already on the list, unsubscribed or suppressed."""

import re

import pytest
from sqlalchemy import func, select

from broadside.audience import lists as lists
from broadside.core.models import Import, Subscriber, Subscription, TransactionalMessage
from tests.smtp_server import paired
from tests.webapp.import_steps import last_import, statuses, upload
from webapp.extensions import db, get_jobs


@pytest.fixture(params=["sqlite"])
def backend(request):
    return request.param


@pytest.fixture
def weekly(app):
    return lists.create_list(db.session, "Weekly")


def count(model) -> int:
    return db.session.scalar(select(func.count()).select_from(model))


@pytest.mark.parametrize("consent", [None, "", "yes", "active"])
def test_an_import_without_a_choice_of_consent_is_422_keeps_the_form_and_writes_nothing(
        logged_in_client, weekly, consent):
    response = upload(logged_in_client, weekly.id, b"email\nann@example.com\n", consent=consent)
    assert response.status_code == 422
    assert "Choose how these people agreed to receive mail" in response.text
    assert 'aria-invalid="true"' in response.text
    assert f'<option selected value="{weekly.id}">' in response.text  # the list is kept
    assert count(Import) == count(Subscriber) == 0


def test_asking_them_to_confirm_mails_each_new_person_once_through_the_worker(
        logged_in_client, client, weekly, app, smtp_server, run_worker_burst):
    app.config["SEND_DELAY_MS"] = 60
    upload(logged_in_client, weekly.id, b"email\nactive@example.com\nleft@example.com\n"
           b"pending@example.com\nblocked@example.com\n")
    people = {s.email: s for s in db.session.scalars(select(Subscriber))}
    db.session.execute(Subscription.__table__.update().where(
        Subscription.subscriber_id == people["left@example.com"].id).values(status="unsubscribed"))
    db.session.execute(Subscription.__table__.update().where(
        Subscription.subscriber_id == people["pending@example.com"].id).values(
        status="unconfirmed", confirmation_sent_at=people["pending@example.com"].created_at))
    db.session.execute(Subscription.__table__.delete().where(
        Subscription.subscriber_id == people["blocked@example.com"].id))
    people["blocked@example.com"].suppression = "blocked"
    db.session.commit()

    content = (b"email,name\nactive@example.com,A\nleft@example.com,L\npending@example.com,P\n"
               b"blocked@example.com,B\nnew1@example.com,N1\nnew2@example.com,N2\n"
               b"new3@example.com,N3\nnope,X\n")
    response = upload(logged_in_client, weekly.id, content, consent="confirm")
    assert response.status_code == 303
    record = last_import()
    # Small as it is, the file goes to the worker: no email is queued in the web request.
    assert (record.status, record.consent) == ("queued", "confirm")
    assert count(TransactionalMessage) == 0

    assert run_worker_burst() == 0
    new = ["new1@example.com", "new2@example.com", "new3@example.com"]
    received = smtp_server.wait_for(3)
    assert sorted(smtp_server.recipients()) == new
    gaps = smtp_server.gaps()  # paced (60 ms) like every other message; see paired()
    assert min(paired(gaps)) >= 0.060 * 0.9 and sum(gaps) / len(gaps) >= 0.060 * 0.95, gaps
    # The sign-up form's own confirmation email (kind, subject and link: see below).
    sent = {m.to_email: m for m in db.session.scalars(select(TransactionalMessage))}
    assert {m.kind for m in sent.values()} == {"confirmation"}
    for message in received:
        assert message.message["Subject"] == sent[message.rcpt_tos[0]].subject
    record = last_import()
    assert (record.status, record.imported, record.updated, record.skipped_unsubscribed,
            record.skipped_suppressed, record.rejected, record.asked) == (
        "done", 3, 2, 1, 1, 1, 3)
    assert statuses(weekly.id) == {
        "active@example.com": "active", "left@example.com": "unsubscribed",
        "pending@example.com": "unconfirmed", **dict.fromkeys(new, "unconfirmed")}
    page = logged_in_client.get(f"/subscribers/imports/{record.id}").text
    assert "3 confirmation emails were queued" in page
    assert "1 skipped because they unsubscribed from this list: they stay unsubscribed and " \
           "were not asked again" in page
    assert "it was not asked to confirm" in page

    # A duplicated job (or a restarted worker) asks nobody twice.
    get_jobs().enqueue_import(record.id)
    assert run_worker_burst() == 0
    assert len(smtp_server.recipients()) == 3 and count(TransactionalMessage) == 3

    # It is the sign-up form's own email: its link confirms the subscription.
    text = received[0].message.get_body(("plain",)).get_content()
    link = re.search(r"http://localhost:5000(/join/confirm/\S+)", text).group(1)
    assert client.post(link).status_code == 200
    assert statuses(weekly.id)[received[0].rcpt_tos[0]] == "active"
