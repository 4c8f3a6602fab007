"""Automation messages that were not sent, through the real worker and SMTP server, on SQLite
and PostgreSQL: the automations page's failed and skipped counts link to a page of them (who,
which step, when, why), paged by keyset; the System page's recent errors include them and a
sign-up confirmation's failure, each linking where the owner acts."""

from __future__ import annotations

import html
import re

import pytest
from sqlalchemy import select, update

from broadside.audience.subscribers import service as subscribers
from broadside.campaigns.automations import service as automations
from broadside.campaigns.automations.message_page import message_page
from broadside.core.models import AutomationStep, MailingList, Subscriber, Subscription
from broadside.core.site_settings import update_settings
from broadside.delivery.transactional import queue_transactional
from webapp.extensions import db, get_jobs

pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")

REFUSED = [f"gone{i}@example.com" for i in range(3)]


def text_of(page: str) -> str:
    page = re.sub(r"</(p|li|div|td|tr|h\d)>|<br>", " ", page)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", page)))


@pytest.fixture
def settled(app, smtp_server, run_worker_burst) -> dict[str, int]:
    """A welcome to five people: three refused by the server, one who left before it went
    out, one sent."""
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main St", time_zone="UTC")
    news = MailingList(name="News")
    db.session.add(news)
    db.session.commit()
    data = automations.parse_input({"name": "Welcome", "trigger": {"type": "joined_list",
                                                                    "list_id": news.id},
                                    "steps": [{"delay": "PT0S", "subject": "Hello", "body": "Hi"}]})
    automation = automations.enable(db.session, automations.create_automation(
        db.session, data, default_from=app.config["MAIL_FROM"]).id)
    people = {}
    for email in [*REFUSED, "left@example.com", "ok@example.com"]:
        person, _ = subscribers.save_subscriber(db.session, email=email, name="", list_ids=[news.id],
                                                welcome=True)
        people[email] = person.id
    db.session.execute(update(Subscription).where(Subscription.subscriber_id == people["left@example.com"])
                       .values(status="unsubscribed"))
    db.session.commit()
    smtp_server.script.rcpt_replies = {email: ["550 5.1.1 No such user"] for email in REFUSED}
    run_worker_burst()
    step = db.session.scalars(select(AutomationStep)).one()
    return {"automation": automation.id, "step": step.id, "left": people["left@example.com"]}


def test_failed_and_skipped_counts_link_to_the_messages_with_their_reasons(logged_in_client, settled):
    step = settled["step"]
    index = logged_in_client.get("/automations/").get_data(as_text=True)
    failed = re.search(rf'<a href="([^"]+)" id="failed-{step}">3<', index)
    skipped = re.search(rf'<a href="([^"]+)" id="skipped-{step}">1<', index)
    assert failed and skipped, "the counts do not link to their messages"

    page = logged_in_client.get(html.unescape(failed.group(1)))
    said = text_of(page.get_data(as_text=True))
    assert page.status_code == 200 and "Failed messages of “Welcome”" in said
    for email in REFUSED:
        assert email in said
    assert "Step 1 Hello" in said
    assert said.count("Refused for this address (550 5.1.1 No such user)") == 3
    assert "ok@example.com" not in said and "left@example.com" not in said

    page = logged_in_client.get(html.unescape(skipped.group(1))).get_data(as_text=True)
    said = text_of(page)
    assert "left@example.com" in said and "Not sent: they had unsubscribed." in said
    assert f'href="/subscribers/{settled["left"]}"' in page  # the person, to look at or fix


def test_the_messages_page_goes_by_keyset_and_refuses_a_wrong_filter(logged_in_client, settled):
    automation = settled["automation"]
    first = message_page(db.session, automation, status="failed", per_page=2)
    assert len(first.rows) == 2 and first.newer is None and first.older is not None
    second = message_page(db.session, automation, status="failed", before=first.older, per_page=2)
    assert len(second.rows) == 1 and second.older is None and second.newer is not None
    seen = [r.email for r in first.rows + second.rows]
    assert sorted(seen) == sorted(REFUSED)  # each exactly once, newest first
    assert [r.id for r in first.rows + second.rows] == sorted(
        (r.id for r in first.rows + second.rows), reverse=True)
    back = message_page(db.session, automation, status="failed", after=second.newer, per_page=2)
    assert [r.id for r in back.rows] == [r.id for r in first.rows] and back.newer is None
    # Through the page: the older page's link, and a filter that is no state.
    page = logged_in_client.get(f"/automations/{automation}/messages?status=failed&before={first.rows[0].id}")
    assert text_of(page.get_data(as_text=True)).count("550 5.1.1") == 2
    page = logged_in_client.get(f"/automations/{automation}/messages?status=bogus&step=x&before=y")
    assert page.status_code == 422 and "Show one of: failed, skipped, unknown" in page.get_data(as_text=True)
    huge = "99999999999999999999"  # bounded like an id: ignored, never a 500
    page = logged_in_client.get(f"/automations/{automation}/messages?before={huge}&after={huge}&step={huge}")
    assert page.status_code == 200 and text_of(page.get_data(as_text=True)).count("550 5.1.1") == 3
    assert logged_in_client.get("/automations/999999/messages").status_code == 404


def test_the_system_page_lists_automation_and_confirmation_failures_with_where_to_act(
        app, logged_in_client, settled, smtp_server, run_worker_burst):
    person = db.session.scalar(select(Subscriber).where(Subscriber.email == "ok@example.com"))
    queue_transactional(db.session, get_jobs(), kind="confirmation", to_email="ok@example.com",
                        subject="Please confirm", html="<p>x</p>", text="x", subscriber_id=person.id)
    smtp_server.script.rcpt_replies = {"ok@example.com": ["550 5.1.1 Mailbox unavailable"]}
    run_worker_burst()
    page = logged_in_client.get("/system/").get_data(as_text=True)
    table = page.split('id="error-table"')[1].split("</table>")[0]
    said = text_of(table)
    assert "Automation “Welcome”, step 1: Hello" in said and "gone0@example.com" in said
    assert f'href="/automations/{settled["automation"]}/messages?status=failed"' in table
    assert "Sign-up confirmation: Please confirm" in said
    assert f'href="/subscribers/{person.id}"' in table
