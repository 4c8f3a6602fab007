"""The automations pages on SQLite and PostgreSQL, driven as a browser without JavaScript
would: the editor (save, 422 with every typed value kept, add and remove step), enable,
disable, delete, the live counts, the step preview and test send."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from broadside.campaigns.automations import entering
from broadside.campaigns.automations import service as automations
from broadside.core.models import (
    Automation,
    AutomationRevision,
    AutomationStep,
    MailingList,
    Subscriber,
    Subscription,
    TransactionalMessage,
)
from tests.helpers import csrf_token_from
from webapp.extensions import db

# Every email prints a postal address: automations need Settings' to be enabled and to send.
pytestmark = pytest.mark.usefixtures("postal_address")

HX = {"HX-Request": "true"}


def a_list(name="Weekly") -> int:
    mailing_list = MailingList(name=name)
    db.session.add(mailing_list)
    db.session.commit()
    return mailing_list.id


def editor_post(client, path, **fields):
    token = csrf_token_from(client.get(path).get_data(as_text=True))
    data = {"csrf_token": token, "action": "save", "name": "Welcome", "trigger_type": "joined_list",
            "priority": "0", "step-1-delay": "PT0S", "step-1-subject": "Hello {{ name }}",
            "step-1-body": "Glad you came.", **fields}
    return client.post(path, data={k: v for k, v in data.items() if v is not None})


def test_a_new_automation_is_saved_disabled_and_listed_with_its_steps(logged_in_client):
    list_id = a_list()
    response = editor_post(logged_in_client, "/automations/new", list_id=str(list_id),
                           **{"step-2-delay": "P3D", "step-2-subject": "Three days in",
                              "step-2-body": "Tips"})
    assert response.status_code == 303
    automation = db.session.scalars(select(Automation)).one()
    assert (automation.name, automation.status, automation.list_id) == ("Welcome", "disabled", list_id)
    page = logged_in_client.get("/automations/").get_data(as_text=True)
    assert "When someone joins" in page and "Weekly" in page
    assert "Three days in" in page and "3 days after the previous step" in page
    assert "hx-trigger=\"every 2s\"" not in page  # nothing in flight: no polling


def test_a_mistake_answers_422_with_the_message_and_every_typed_value_kept(logged_in_client):
    list_id = a_list()
    response = editor_post(logged_in_client, "/automations/new", list_id=str(list_id),
                           **{"step-1-delay": "P1M", "step-1-body": "My careful words"})
    page = response.get_data(as_text=True)
    assert response.status_code == 422
    assert "years or months" in page
    assert "My careful words" in page and 'value="P1M"' in page and 'value="Welcome"' in page
    # A refused delay is told under its number and unit, not only at the top of the page.
    assert 'id="step-1-delay-error"' in page and 'aria-invalid="true"' in page
    assert db.session.scalar(select(func.count()).select_from(Automation)) == 0
    for fields, said in (({"list_id": ""}, "Choose the list"),
                         ({"list_id": "4242"}, "no list with id 4242"),
                         ({"list_id": str(list_id), "step-1-subject": ""}, "Give the subject of step 1"),
                         ({"list_id": str(list_id), "priority": "high"}, "priority must be"),
                         ({"trigger_type": "segment", "segment_id": "99999999999"}, "segment"),
                         ({"list_id": str(list_id), "step-1-body": "{{ name"}, "Step 1")):
        response = editor_post(logged_in_client, "/automations/new", **fields)
        assert response.status_code == 422 and said in response.get_data(as_text=True), said
    # The step the refusal names is marked beside its fields, not only at the top of the page.
    page = response.get_data(as_text=True)
    assert 'id="step-1-error"' in page and 'class="step card-inner step-refused"' in page


def test_add_and_remove_step_re_render_without_saving(logged_in_client):
    list_id = a_list()
    added = editor_post(logged_in_client, "/automations/new", list_id=str(list_id), action="add")
    page = added.get_data(as_text=True)
    assert added.status_code == 200 and 'name="step-2-subject"' in page and "Hello {{ name }}" in page
    removed = editor_post(logged_in_client, "/automations/new", list_id=str(list_id), action="remove-1",
                          **{"step-2-delay": "P1D", "step-2-subject": "Second", "step-2-body": "b"})
    page = removed.get_data(as_text=True)
    assert 'value="Second"' in page and "Hello {{ name }}" not in page
    assert db.session.scalar(select(func.count()).select_from(Automation)) == 0


def test_editing_freezes_a_new_revision_and_a_live_automation_says_so(app, logged_in_client):
    list_id = a_list()
    editor_post(logged_in_client, "/automations/new", list_id=str(list_id))
    automation = db.session.scalars(select(Automation)).one()
    automations.enable(db.session, automation.id)
    path = f"/automations/{automation.id}/edit"
    page = logged_in_client.get(path).get_data(as_text=True)
    assert "freezes a new revision" in page and 'value="Hello {{ name }}"' in page
    step = db.session.scalars(select(AutomationStep)).one()
    first = step.revision_id
    response = editor_post(logged_in_client, path, list_id=str(list_id), **{"step-1-subject": "Hi again",
                                                                           "step-1-id": str(step.id)})
    assert response.status_code == 303
    db.session.expire_all()
    assert step.revision_id != first
    assert db.session.get(AutomationRevision, step.revision_id).subject == "Hi again"


def test_enable_disable_delete_and_live_counts(app, logged_in_client):
    list_id = a_list()
    editor_post(logged_in_client, "/automations/new", list_id=str(list_id))
    automation = db.session.scalars(select(Automation)).one()
    index = logged_in_client.get("/automations/").get_data(as_text=True)
    token = csrf_token_from(index)
    response = logged_in_client.post(f"/automations/{automation.id}/enable", data={"csrf_token": token})
    assert response.status_code == 302
    db.session.expire_all()
    assert automation.status == "enabled"
    person = Subscriber(email="ada@example.com", name="Ada")
    db.session.add(person)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=person.id, list_id=list_id, status="active"))
    entering.enter_joined(db.session, list_id, [person.id], source="joined")
    db.session.commit()
    fragment = logged_in_client.get(f"/automations/{automation.id}/counts", headers=HX).get_data(as_text=True)
    assert 'hx-trigger="every 2s"' in fragment and "1</dd>" in fragment  # due: 1, polling
    logged_in_client.post(f"/automations/{automation.id}/disable", data={"csrf_token": token})
    db.session.expire_all()
    assert automation.status == "disabled"
    confirm = logged_in_client.get(f"/automations/{automation.id}/delete").get_data(as_text=True)
    assert "1 message is waiting" in confirm
    logged_in_client.post(f"/automations/{automation.id}/delete",
                          data={"csrf_token": csrf_token_from(confirm)})
    db.session.expire_all()
    assert automation.status == "deleted"
    # Deleted (say, from another tab): 286 stops the page's polling; htmx polls on through a 404.
    fragment = logged_in_client.get(f"/automations/{automation.id}/counts", headers=HX)
    assert fragment.status_code == 286 and "every 2s" not in fragment.get_data(as_text=True)
    assert logged_in_client.get(f"/automations/{automation.id}/counts").status_code == 404
    assert "every 2s" not in logged_in_client.get("/automations/").get_data(as_text=True)


def test_a_step_preview_and_test_send(app, logged_in_client):
    list_id = a_list()
    editor_post(logged_in_client, "/automations/new", list_id=str(list_id))
    automation = db.session.scalars(select(Automation)).one()
    step = db.session.scalars(select(AutomationStep)).one()
    preview = logged_in_client.get(f"/automations/{automation.id}/steps/{step.id}/preview")
    assert preview.status_code == 200 and "Glad you came." in preview.get_data(as_text=True)
    assert "default-src 'none'" in preview.headers["Content-Security-Policy"]
    page = logged_in_client.get(f"/automations/{automation.id}/edit").get_data(as_text=True)
    token = csrf_token_from(page)
    sent = logged_in_client.post(f"/automations/{automation.id}/steps/{step.id}/test",
                                 data={"csrf_token": token, "to_email": "me@example.com"}, headers=HX)
    assert sent.status_code == 200 and "Test queued for me@example.com" in sent.get_data(as_text=True)
    message = db.session.scalars(select(TransactionalMessage)).one()
    assert message.subject.startswith("[Test] Hello") and message.to_email == "me@example.com"
    # The step's own line follows the message, like a broadcast's (no worker here: it waits).
    assert f'<p id="test-status-{step.id}" class="test-status" role="status">' in sent.text
    assert f'hx-get="/broadcasts/tests/{message.id}?was=pending-0"' in sent.text
    bad = logged_in_client.post(f"/automations/{automation.id}/steps/{step.id}/test",
                                data={"csrf_token": token, "to_email": "not an address"}, headers=HX)
    # 200: htmx swaps no 4xx answer, so a 422 left the status line empty in the browser.
    assert bad.status_code == 200 and "Test not sent" in bad.get_data(as_text=True)
    assert logged_in_client.get(f"/automations/{automation.id}/steps/999999/preview").status_code == 404
    assert logged_in_client.get("/automations/99999999999/edit").status_code == 404


def welcome_on(app, list_id: int, name="Welcome") -> Automation:
    data = automations.parse_input({"name": name, "trigger": {"type": "joined_list", "list_id": list_id},
                                    "steps": [{"delay": "PT0S", "subject": "Welcome aboard", "body": "x"},
                                              {"delay": "P3D", "subject": "Later", "body": "y"}]})
    return automations.enable(db.session, automations.create_automation(
        db.session, data, default_from=app.config["MAIL_FROM"]).id)


def test_the_add_subscriber_forms_welcome_by_default_and_the_page_shows_the_messages(app, logged_in_client):
    from broadside.core.models import AutomationEntry

    list_id, other = a_list(), a_list("Other")
    welcome_on(app, list_id)
    welcome_on(app, other, name="Other welcome")
    page = logged_in_client.get("/subscribers/new").get_data(as_text=True)
    [box] = re.findall(r'<input[^>]*name="welcome"[^>]*>', page)
    assert "checked" in box  # ticked by default
    token = csrf_token_from(page)
    logged_in_client.post("/subscribers/new", data={"csrf_token": token, "email": "ada@example.com",
                                                    "lists": str(list_id), "welcome": "y"})
    logged_in_client.post("/subscribers/new", data={"csrf_token": token, "email": "bob@example.com",
                                                    "lists": str(list_id)})  # box unticked
    ada = db.session.scalar(select(Subscriber.id).where(Subscriber.email == "ada@example.com"))
    bob = db.session.scalar(select(Subscriber.id).where(Subscriber.email == "bob@example.com"))
    entered = set(db.session.scalars(select(AutomationEntry.subscriber_id)))
    assert ada in entered and bob not in entered
    shown = logged_in_client.get(f"/subscribers/{ada}")
    html = shown.get_data(as_text=True)
    assert "Automated messages" in html and "Welcome aboard" in html and "Later" in html
    rows = html.split('id="automated"')[1].split("</section>")[0].split("<tr>")
    [first] = [r for r in rows if "Welcome aboard" in r]
    [later] = [r for r in rows if "Later" in r]
    assert ">due</span>" in first and ">waiting</span>" in later and "due " in later  # 3 days away
    # Added to another list from their page, with that list's welcome.
    logged_in_client.post(f"/subscribers/{ada}/lists", data={"csrf_token": csrf_token_from(html),
                                                           "list_id": str(other), "welcome": "y"})
    assert db.session.scalar(select(func.count()).select_from(AutomationEntry)
                             .where(AutomationEntry.subscriber_id == ada)) == 2


def test_the_import_form_welcomes_only_when_ticked_and_only_the_people_it_adds(app, logged_in_client):
    import io

    from broadside.core.models import AutomationEntry

    list_id = a_list()
    welcome_on(app, list_id)
    known = Subscriber(email="known@example.com")
    db.session.add(known)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=known.id, list_id=list_id, status="active"))
    db.session.commit()
    page = logged_in_client.get("/subscribers/import").get_data(as_text=True)
    assert "Send the welcome series to the people this import adds" in page
    token = csrf_token_from(page)

    def upload(rows, **extra):
        return logged_in_client.post("/subscribers/import", data={
            "csrf_token": token, "list_id": str(list_id), "consent": "opted_in", **extra,
            "file": (io.BytesIO(("email\n" + "\n".join(rows)).encode()), "people.csv")},
            content_type="multipart/form-data")

    upload(["quiet@example.com"])  # not ticked
    upload(["new@example.com", "known@example.com"], welcome="y")
    entered = set(db.session.scalars(select(Subscriber.email).join(
        AutomationEntry, AutomationEntry.subscriber_id == Subscriber.id)))
    assert entered == {"new@example.com"}


def test_the_dashboard_shows_what_is_due_in_the_next_24_hours(app, logged_in_client):
    list_id = a_list()
    automation = welcome_on(app, list_id)
    person = Subscriber(email="ada@example.com")
    db.session.add(person)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=person.id, list_id=list_id, status="active"))
    entering.enter_joined(db.session, list_id, [person.id], source="joined")
    db.session.commit()
    page = logged_in_client.get("/").get_data(as_text=True)
    panel = page.split('id="automations-due"')[1].split("</section>")[0]
    assert "Welcome" in panel and ">1<" in panel  # the first step; the second is 3 days away
    automations.disable(db.session, automation.id)
    panel = logged_in_client.get("/").get_data(as_text=True).split('id="automations-due"')[1]
    assert "held: disabled" in panel.split("</section>")[0]


def test_the_counts_stop_polling_once_no_message_is_due_or_sending(app, logged_in_client):
    from broadside.campaigns.automations import ledger
    from broadside.core.models import AutomationMessage

    list_id = a_list()
    automation = welcome_on(app, list_id)
    person = Subscriber(email="ada@example.com")
    db.session.add(person)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=person.id, list_id=list_id, status="active"))
    entering.enter_joined(db.session, list_id, [person.id], source="joined")
    db.session.commit()
    path = f"/automations/{automation.id}/counts"
    assert 'hx-trigger="every 2s"' in logged_in_client.get(path, headers=HX).get_data(as_text=True)
    ledger.skip_pending(db.session, AutomationMessage.__table__.c.automation_id == automation.id,
                        "settled for the test")
    db.session.commit()
    settled = logged_in_client.get(path, headers=HX)
    html = settled.get_data(as_text=True)
    assert settled.status_code == 200 and "hx-trigger" not in html and "hx-get" not in html
    assert re.search(r'<dt>skipped</dt><dd><a href="[^"]+/messages\?[^"]+" id="skipped-[0-9]+">1<', html)
    assert 'hx-trigger="every 2s"' not in logged_in_client.get("/automations/").get_data(as_text=True)


def test_malformed_editor_input_is_refused_or_ignored_never_a_500(logged_in_client):
    list_id = a_list()
    for fields in ({"step-1-id": "²"}, {"step-1-id": "9" * 40}, {"action": "remove-²"},
                   {"action": "remove-99"}, {"action": "x" * 5000}, {"step-²-subject": "x"},
                   {"list_id": "9" * 40}, {"list_id": "٣"}, {"priority": "٣"},
                   {"priority": "9" * 40}, {"trigger_type": "segment", "segment_id": "²"},
                   {"trigger_type": "segment", "segment_id": "1", "every_hours": "1e3"},
                   {"trigger_type": "nonsense"}, {"name": "a\x00b"}, {"step-1-delay": "P" + "9" * 500 + "D"}):
        response = editor_post(logged_in_client, "/automations/new",
                               **{"list_id": str(list_id), **fields})
        assert response.status_code in (200, 303, 422), (fields, response.status_code)
    # Only ASCII digits are numbers: "٣" is refused, not read as 3.
    response = editor_post(logged_in_client, "/automations/new", list_id=str(list_id),
                           name="Arabic digits", priority="٣")
    assert response.status_code == 422 and "priority must be" in response.get_data(as_text=True)


def test_saving_an_unchanged_step_from_the_page_freezes_no_new_revision(app, logged_in_client):
    import html as html_lib

    list_id = a_list()
    data = automations.parse_input({
        "name": "From the API", "trigger": {"type": "joined_list", "list_id": list_id},
        "steps": [{"delay": "PT0S", "subject": "Hi", "body": "\nFirst\nsecond"}]})
    automation = automations.create_automation(db.session, data, default_from=app.config["MAIL_FROM"])
    path = f"/automations/{automation.id}/edit"
    page = logged_in_client.get(path).get_data(as_text=True)
    typed = html_lib.unescape(re.search(r"<textarea[^>]*>(.*?)</textarea>", page, re.S).group(1))
    typed = typed[1:] if typed.startswith("\n") else typed  # an HTML parser drops the first newline
    as_browsers_post = typed.replace("\n", "\r\n")
    response = editor_post(logged_in_client, path, name="From the API", list_id=str(list_id),
                           **{"step-1-subject": "Hi", "step-1-body": as_browsers_post})
    assert response.status_code == 303
    assert db.session.scalar(select(func.count()).select_from(AutomationRevision)) == 1
    db.session.expire_all()
    assert db.session.scalars(select(AutomationStep)).one().body == "\nFirst\nsecond"


def test_the_last_step_can_be_removed_so_a_record_only_automation_needs_none(logged_in_client):
    list_id = a_list()
    removed = editor_post(logged_in_client, "/automations/new", list_id=str(list_id), action="remove-1")
    page = removed.get_data(as_text=True)
    assert removed.status_code == 200 and 'name="step-1-subject"' not in page and 'id="no-steps"' in page
    no_step = {"step-1-delay": None, "step-1-subject": None, "step-1-body": None}
    saved = editor_post(logged_in_client, "/automations/new", list_id=str(list_id),
                        name="Counted only", record_only="1", **no_step)
    assert saved.status_code == 303
    automation = db.session.scalars(select(Automation)).one()
    assert automation.record_only and automations.steps_of(db.session, automation.id) == []
