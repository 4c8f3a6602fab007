"""Codes minted in the send log, through the real worker, Redis and SMTP server on SQLite and
PostgreSQL: each copy carries the code its claim minted (the one in the table), a row refused
for now and claimed again keeps its code, and a record-only automation mints and logs without
sending."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from broadside.audience.subscribers import service as subscribers
from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast, send_test
from broadside.campaigns.codes.minting import ALPHABET
from broadside.core.models import AutomationMessage, Code, Delivery, MailingList, Subscriber
from jobs.automations import RECORDED_ONLY
from tests.helpers import make_list, statuses
from webapp.extensions import db, get_jobs

# Every email prints a postal address: automations need Settings' to be enabled and to send.
pytestmark = pytest.mark.usefixtures("postal_address")
CODE = re.compile(rf"\b[A-Z0-9]{{1,12}}-[{ALPHABET}]{{8}}\b")


def codes_in(text: str) -> set[str]:
    return set(CODE.findall(text))


def send_with_codes(app, mailing_list, prefix="SAVE"):
    draft = create_draft(db.session, list_id=mailing_list.id, subject="Your code {{ code }}",
                         body="Hi {{ name }}, take 10% off with **{{ code }}**.",
                         codes_prefix=prefix)
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                          jobs=get_jobs())


def table_codes(kind: str = "delivery") -> dict[int, str]:
    db.session.expire_all()
    return dict(db.session.execute(select(Code.source_id, Code.code)
                                   .where(Code.source_kind == kind)).all())


def test_each_copy_carries_the_code_its_claim_minted_in_subject_and_body(
        app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 6)
    broadcast = send_with_codes(app, weekly)
    run_worker_burst()

    assert statuses(broadcast.id) == {"sent": 6}
    minted = table_codes()
    by_email = dict(db.session.execute(
        select(Subscriber.email, Delivery.id).join(Delivery, Delivery.subscriber_id == Subscriber.id)
    ).all())
    assert len(minted) == 6 and len(set(minted.values())) == 6
    for received in smtp_server.messages:
        message = received.message
        [email] = received.rcpt_tos
        in_subject = codes_in(message["Subject"])
        in_body = codes_in(message.get_body(("plain",)).get_content())
        in_html = codes_in(message.get_body(("html",)).get_content())
        assert in_subject == in_body == in_html == {minted[by_email[email]]}
        assert minted[by_email[email]].startswith("SAVE-")
    rows = db.session.scalars(select(Code)).all()
    assert {(c.broadcast_id, c.prefix, c.redeemed_at) for c in rows} == {(broadcast.id, "SAVE", None)}


def test_a_copy_refused_for_now_and_claimed_again_keeps_its_code(app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 1)
    bodies: list[bytes] = []
    smtp_server.script.on_data = lambda envelope: bodies.append(envelope.content)
    smtp_server.script.data_replies.append("451 4.3.0 Try again later")
    broadcast = send_with_codes(app, weekly)
    run_worker_burst()

    assert statuses(broadcast.id) == {"sent": 1}
    [delivery] = db.session.scalars(select(Delivery)).all()
    assert delivery.attempts == 2  # refused once, claimed again, sent
    [code] = table_codes().values()
    # Both attempts carried the one code minted by the first claim.
    assert len(bodies) == 2
    assert [codes_in(body.decode()) for body in bodies] == [{code}, {code}]


# ---------------------------------------------------------------- automations

def a_list(name="Weekly") -> int:
    mailing_list = MailingList(name=name)
    db.session.add(mailing_list)
    db.session.commit()
    return mailing_list.id


def welcome(app, list_id, *, record_only=False, codes=None, more=()):
    step = {"delay": "PT0S", "subject": "Welcome", "body": "Glad you came."}
    if codes is not None:
        step.update(codes=codes, subject="Welcome, your code {{ code }}", body="Use {{ code }}.")
    data = automations.parse_input({"name": "Welcome", "record_only": record_only,
                                    "trigger": {"type": "joined_list", "list_id": list_id},
                                    "steps": [step, *more]})
    automation = automations.create_automation(db.session, data, default_from=app.config["MAIL_FROM"])
    return automations.enable(db.session, automation.id)


def join(list_id, email, name="Ada"):
    subscriber, _ = subscribers.save_subscriber(db.session, email=email, name=name,
                                                list_ids=[list_id], welcome=True)
    return subscriber.id


def test_an_automation_step_mints_a_code_per_person_and_sends_it(app, smtp_server, run_worker_burst):
    list_id = a_list()
    automation = welcome(app, list_id, codes={"prefix": "HELLO"})
    ada = join(list_id, "ada@example.com")
    run_worker_burst()

    [received] = smtp_server.wait_for(1)
    [code] = db.session.scalars(select(Code)).all()
    assert (code.source_kind, code.subscriber_id, code.automation_id) == (
        "automation_message", ada, automation.id)
    assert codes_in(received.message["Subject"]) == {code.code}
    assert code.code.startswith("HELLO-")


def test_a_record_only_automation_mints_and_logs_without_sending(app, smtp_server, run_worker_burst):
    list_id = a_list()
    # Its second step mints nothing: as before codes, nothing of it is written but the entry.
    automation = welcome(app, list_id, record_only=True, codes={"prefix": "REF"},
                         more=[{"delay": "PT0S", "subject": "Nothing to log", "body": "-"}])
    ada = join(list_id, "ada@example.com")
    bob = join(list_id, "bob@example.com", "Bob")
    run_worker_burst()

    assert smtp_server.messages == []
    db.session.expire_all()
    messages = db.session.execute(
        select(AutomationMessage.id, AutomationMessage.subscriber_id, AutomationMessage.status,
               AutomationMessage.reason).where(AutomationMessage.automation_id == automation.id)
    ).all()
    assert {(m.subscriber_id, m.status, m.reason) for m in messages} == {
        (ada, "skipped", RECORDED_ONLY), (bob, "skipped", RECORDED_ONLY)}
    minted = table_codes("automation_message")
    assert set(minted) == {m.id for m in messages}
    assert all(code.startswith("REF-") for code in minted.values())
    assert db.session.scalar(select(func.count()).select_from(Code)) == 2



def test_a_test_send_shows_a_sample_code_and_mints_none(app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 1)
    draft = create_draft(db.session, list_id=weekly.id, subject="Your code {{ code }}",
                         body="Use {{ code }}", codes_prefix="SAVE")
    send_test(db.session, draft.id, "me@example.com", default_from=app.config["MAIL_FROM"],
              jobs=get_jobs())
    run_worker_burst()
    [received] = smtp_server.wait_for(1)
    assert received.message["Subject"] == "[Test] Your code SAVE-XXXXXXXX (sample code)"
    assert "SAVE-XXXXXXXX (sample code)" in received.message.get_body(("plain",)).get_content()
    assert table_codes() == {}
