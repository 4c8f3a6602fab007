"""Settings -> Transactional templates without a browser, on SQLite and PostgreSQL: a refused
form keeps what was typed with the refusal under its field, saving freezes a revision only when
something changed, the preview fills the sample data (and refuses data that is not a JSON
object) without writing anything, a test send goes out on the template's identity's stream
pointing at its revision, a deleted template's sends stay listed, and no malformed request
answers 500."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import func, select

from broadside.campaigns.transactional.recent import recent_sends
from broadside.core.models import (
    TransactionalMessage,
    TransactionalTemplate,
    TransactionalTemplateRevision,
)
from broadside.delivery.queues import TRANSACTIONAL, stream_of
from tests.helpers import OWNER_EMAIL, csrf_token_from, make_identity
from webapp.broadcasts.views import PREVIEW_CSP
from webapp.extensions import db

RESET = {"name": "Password reset", "subject": "Reset your password, {{ name }}",
         "body": "Hello {{ name }},\n\nyour link: {{ data.link }}", "essential": "y"}
HTMX = {"HX-Request": "true"}


def count(model) -> int:
    db.session.expire_all()
    return db.session.scalar(select(func.count()).select_from(model))


def created(client, **fields) -> int:
    page = client.get("/settings/transactional/new")
    answer = client.post("/settings/transactional/new",
                         data={"csrf_token": csrf_token_from(page.text), **RESET, **fields})
    assert answer.status_code == 303, answer.text
    return int(answer.headers["Location"].rsplit("/", 1)[1])


def error_under(html: str, field: str) -> str:
    found = re.search(rf'<p class="error" id="{field}-error">(.*?)</p>', html, re.S)
    assert found, f"no error under {field}"
    return found.group(1)


def test_the_empty_list_says_what_templates_are_for_and_settings_links_to_it(logged_in_client):
    page = logged_in_client.get("/settings/transactional/")
    assert page.status_code == 200
    assert 'id="no-templates"' in page.text and "Transactional API" in page.text
    assert "password reset" in page.text and 'id="no-sends"' in page.text
    assert 'href="/settings/transactional/"' in logged_in_client.get("/settings/").text


def test_a_refusal_keeps_what_was_typed_under_its_field_and_a_save_freezes_only_a_change(
        logged_in_client):
    page = logged_in_client.get("/settings/transactional/new")
    token = csrf_token_from(page.text)
    refused = logged_in_client.post("/settings/transactional/new", data={
        "csrf_token": token, **RESET, "name": "   "})
    assert refused.status_code == 422
    assert "Give the template a name." in error_under(refused.text, "name")
    assert 'value="Reset your password, {{ name }}"' in refused.text
    assert "your link: {{ data.link }}" in refused.text
    assert '<input aria-describedby="essential-help" checked id="essential"' in refused.text
    broken = logged_in_client.post("/settings/transactional/new", data={
        "csrf_token": token, **RESET, "body": "Hello {{ name "})
    assert broken.status_code == 422 and "line 1" in error_under(broken.text, "body")
    assert count(TransactionalTemplate) == 0

    template_id = created(logged_in_client)
    taken = logged_in_client.post("/settings/transactional/new", data={"csrf_token": token, **RESET})
    assert taken.status_code == 422 and "already exists" in error_under(taken.text, "name")

    shown = logged_in_client.get(f"/settings/transactional/{template_id}")
    assert shown.status_code == 200
    assert "Revision 1, saved at" in shown.text and "1 revision in all" in shown.text
    again = logged_in_client.post(f"/settings/transactional/{template_id}",
                                  data={"csrf_token": token, **RESET})
    assert again.status_code == 303 and count(TransactionalTemplateRevision) == 1
    edited = logged_in_client.post(f"/settings/transactional/{template_id}", data={
        "csrf_token": token, **RESET, "subject": "Your new password", "essential": ""})
    assert edited.status_code == 303 and count(TransactionalTemplateRevision) == 2
    page = logged_in_client.get(f"/settings/transactional/{template_id}").text
    assert "Revision 2, saved at" in page and "2 revisions in all" in page
    assert 'value="Your new password"' in page
    template = db.session.get(TransactionalTemplate, template_id)
    assert template.subject == "Your new password" and not template.essential

    listing = logged_in_client.get("/settings/transactional/").text
    assert f'href="/settings/transactional/{template_id}">Password reset</a>' in listing
    assert "Default identity" in listing or "default" in listing.lower()


def test_the_identity_is_a_choice_of_live_identities_default_first(logged_in_client, app):
    relay = make_identity("Relay", "smtp://127.0.0.1:9", 0, email="relay@example.com")
    page = logged_in_client.get("/settings/transactional/new")
    options = re.findall(r'<option[^>]*value="([^"]*)"', page.text)
    assert options == ["", str(relay.id)]
    token = csrf_token_from(page.text)
    for wrong in ("abc", "99999", "-1", "1" * 40):
        refused = logged_in_client.post("/settings/transactional/new", data={
            "csrf_token": token, **RESET, "identity": wrong})
        assert refused.status_code == 422, wrong
        assert "identity" in error_under(refused.text, "identity")
    template_id = created(logged_in_client, identity=str(relay.id))
    assert db.session.get(TransactionalTemplate, template_id).identity_id == relay.id
    assert "Relay" in logged_in_client.get("/settings/transactional/").text
    # Its test goes on the identity's own stream, from its address.
    sent = logged_in_client.post(f"/settings/transactional/{template_id}/test", headers=HTMX,
                                 data={"csrf_token": token, "to_email": OWNER_EMAIL})
    assert "Test queued" in sent.text
    message = db.session.scalar(select(TransactionalMessage))
    assert message.identity_id == relay.id
    assert message.headers == {"From-Name": "Relay", "From-Email": "relay@example.com"}
    jobs = app.extensions["broadside_jobs"]
    assert jobs.queue(TRANSACTIONAL, stream_of(relay.id)).count == 1
    assert jobs.queue(TRANSACTIONAL).count == 0


def test_the_preview_fills_the_sample_data_and_writes_nothing(logged_in_client):
    template_id = created(logged_in_client)
    data = json.dumps({"link": "https://example.com/reset/abc123"})
    page = logged_in_client.get(f"/settings/transactional/{template_id}")
    token = csrf_token_from(page.text)
    pane = logged_in_client.post(f"/settings/transactional/{template_id}/preview",
                                 data={"csrf_token": token, "data": data}, headers=HTMX)
    assert pane.status_code == 200
    assert "your link: https://example.com/reset/abc123" in pane.text  # the plain text
    assert "Reset your password, Alex" in pane.text
    frame = re.search(r'<iframe[^>]*src="([^"]+)"', pane.text).group(1).replace("&amp;", "&")
    email = logged_in_client.get(frame)
    assert email.status_code == 200 and "https://example.com/reset/abc123" in email.text
    assert email.headers["Content-Security-Policy"] == PREVIEW_CSP
    # A password reset is nobody's subscription: no unsubscribe link, and no opt-in's words.
    assert "subscribe" not in email.text.lower()
    # Without JavaScript the answer is the whole page, with the data kept in its box.
    page = logged_in_client.post(f"/settings/transactional/{template_id}/preview",
                                 data={"csrf_token": token, "data": data})
    assert page.status_code == 200 and "your link: https://example.com/reset/abc123" in page.text
    assert "Sample data (JSON)" in page.text and "abc123&#34;}</textarea>" in page.text
    assert logged_in_client.post(f"/settings/transactional/{template_id}/preview",
                                 data={"data": data}).status_code == 400  # no CSRF token
    assert count(TransactionalTemplateRevision) == 1 and count(TransactionalMessage) == 0


@pytest.mark.parametrize(("typed", "said"), [
    ("[1, 2]", "must be a JSON object"),
    ('"text"', "must be a JSON object"),
    ("{", "not valid JSON"),
    ('{"a": NaN}', "not valid JSON"),
    ('{"a": "\\u0000"}', "NUL"),
    ('{"a": "' + "x" * 10_001 + '"}', "at most 10,000"),
    ('{"a": "' + "é" * 400 + '"}', "too long to preview"),
])
def test_sample_data_that_is_not_an_object_is_refused_clearly(logged_in_client, typed, said):
    template_id = created(logged_in_client)
    page = logged_in_client.get(f"/settings/transactional/{template_id}")
    token = csrf_token_from(page.text)
    for headers in (HTMX, {}):
        answer = logged_in_client.post(f"/settings/transactional/{template_id}/preview",
                                       data={"csrf_token": token, "data": typed}, headers=headers)
        assert answer.status_code == 200 and said in answer.text, headers
        assert 'id="sample-error"' in answer.text and "<iframe" not in answer.text
    frame = logged_in_client.get(f"/settings/transactional/{template_id}/preview/email",
                                 query_string={"data": typed[:3000]})
    assert frame.status_code == 200 and "cannot be shown" in frame.text
    sent = logged_in_client.post(f"/settings/transactional/{template_id}/test", headers=HTMX, data={
        "csrf_token": token, "to_email": OWNER_EMAIL, "data": typed})
    if said == "too long to preview":  # a test carries its data in the body: it goes
        assert "Test queued" in sent.text and count(TransactionalMessage) == 1
        return
    assert sent.status_code == 200 and "Test not sent" in sent.text and said in sent.text
    assert count(TransactionalMessage) == 0


def test_a_merge_field_that_fails_with_the_data_is_said_in_the_preview(logged_in_client):
    template_id = created(logged_in_client, body="Total: {{ data.amount / 2 }}")
    page = logged_in_client.get(f"/settings/transactional/{template_id}")
    pane = logged_in_client.post(f"/settings/transactional/{template_id}/preview", headers=HTMX,
                                 data={"csrf_token": csrf_token_from(page.text),
                                       "data": '{"amount": "ten"}'})
    assert pane.status_code == 200 and 'id="preview-problem"' in pane.text
    assert "could not be filled in" in pane.text


def test_a_test_send_goes_out_on_the_templates_identity_from_its_revision(
        logged_in_client, smtp_server, run_worker_burst):
    template_id = created(logged_in_client)
    page = logged_in_client.get(f"/settings/transactional/{template_id}")
    sent = logged_in_client.post(f"/settings/transactional/{template_id}/test", headers=HTMX, data={
        "csrf_token": csrf_token_from(page.text), "to_email": "Tester@Example.com",
        "data": '{"link": "https://example.com/r/xyz"}'})
    assert sent.status_code == 200 and "Test queued for tester@example.com" in sent.text
    assert 'hx-get="/broadcasts/tests/' in sent.text  # the broadcast test's polling line
    message = db.session.scalar(select(TransactionalMessage))
    revision = db.session.scalar(select(TransactionalTemplateRevision))
    assert message.kind == "test" and message.template_revision_id == revision.id
    assert message.subject == "[Test] Reset your password, Alex"
    assert "https://example.com/r/xyz" in message.text and message.identity_id is None

    assert run_worker_burst() == 0
    [received] = smtp_server.wait_for(1)
    assert received.rcpt_tos == ["tester@example.com"]
    assert b"https://example.com/r/xyz" in received.data
    line = logged_in_client.get(f"/broadcasts/tests/{message.id}", headers=HTMX)
    assert "Test sent to tester@example.com" in line.text
    for url in (f"/settings/transactional/{template_id}", "/settings/transactional/"):
        table = logged_in_client.get(url).text
        assert "tester@example.com" in table and ">sent</span>" in table

    refused = logged_in_client.post(f"/settings/transactional/{template_id}/test", headers=HTMX, data={
        "csrf_token": csrf_token_from(page.text), "to_email": "not an address"})
    assert refused.status_code == 200 and "Test not sent" in refused.text
    plain = logged_in_client.post(f"/settings/transactional/{template_id}/test", data={
        "csrf_token": csrf_token_from(page.text), "to_email": OWNER_EMAIL})
    assert plain.status_code == 303 and plain.headers["Location"].endswith("#try")


def test_a_deleted_template_is_gone_but_its_sends_stay_listed(logged_in_client, run_worker_burst):
    template_id = created(logged_in_client)
    page = logged_in_client.get(f"/settings/transactional/{template_id}")
    token = csrf_token_from(page.text)
    logged_in_client.post(f"/settings/transactional/{template_id}/test",
                          data={"csrf_token": token, "to_email": OWNER_EMAIL})
    gone = logged_in_client.post(f"/settings/transactional/{template_id}/delete",
                                 data={"csrf_token": token}, follow_redirects=True)
    assert gone.status_code == 200 and "The template is deleted" in gone.text
    assert "Password reset <span class=\"muted\">(deleted template)</span>" in gone.text
    assert f'href="/settings/transactional/{template_id}"' not in gone.text
    assert db.session.get(TransactionalTemplate, template_id).deleted_at is not None
    for url in ("", "/preview/email"):
        assert logged_in_client.get(f"/settings/transactional/{template_id}{url}").status_code == 404
    for url in ("", "/preview", "/test", "/delete"):
        answer = logged_in_client.post(f"/settings/transactional/{template_id}{url}",
                                       data={"csrf_token": token, **RESET, "to_email": OWNER_EMAIL})
        assert answer.status_code == 404, url
    assert count(TransactionalMessage) == 1


def test_malformed_requests_are_refused_never_500(logged_in_client):
    template_id = created(logged_in_client)
    token = csrf_token_from(logged_in_client.get("/settings/transactional/new").text)
    base = "/settings/transactional"
    assert logged_in_client.post(f"{base}/new", data=RESET).status_code == 400  # no CSRF token
    assert logged_in_client.post(f"{base}/{template_id}/delete").status_code == 400
    missing = logged_in_client.post(f"{base}/new", data={"csrf_token": token})
    assert missing.status_code == 422 and error_under(missing.text, "name")
    too_long = logged_in_client.post(f"{base}/new", data={
        "csrf_token": token, **RESET, "name": "n" * 101, "subject": "s" * 301})
    assert too_long.status_code == 422 and "at most 100" in error_under(too_long.text, "name")
    repeated = logged_in_client.post(f"{base}/{template_id}", data={
        "csrf_token": token, **RESET, "name": ["a", "b"], "essential": ["x", "y"]})
    assert repeated.status_code == 303
    nul = logged_in_client.post(f"{base}/new", data={"csrf_token": token, **RESET, "body": "a\x00b"})
    assert nul.status_code == 422
    for url in (f"{base}/99999", f"{base}/99999/preview/email",
                f"{base}/99999999999999999999", f"{base}/abc"):
        assert logged_in_client.get(url).status_code == 404, url
    for url in (f"{base}/99999", f"{base}/99999/preview", f"{base}/99999/test", f"{base}/99999/delete"):
        assert logged_in_client.post(url, data={"csrf_token": token, **RESET}).status_code == 404
    nested = logged_in_client.post(f"{base}/{template_id}/preview",
                                   data={"csrf_token": token, "data": "[" * 5000})
    assert nested.status_code == 200 and 'id="sample-error"' in nested.text
    wrong = logged_in_client.get(f"{base}/{template_id}/preview/email", query_string={"data": "{" * 3000})
    assert wrong.status_code == 200
    assert count(TransactionalTemplate) == 1


def test_recent_sends_are_the_newest_twenty_across_templates(app, logged_in_client):
    first, second = created(logged_in_client), created(logged_in_client, name="Receipt")
    revisions = dict(db.session.execute(select(TransactionalTemplateRevision.template_id,
                                               TransactionalTemplateRevision.id)).all())
    db.session.add(TransactionalMessage(kind="test", to_email="nobody@example.com", subject="s"))
    for i in range(25):
        db.session.add(TransactionalMessage(
            kind="template", to_email=f"r{i}@example.com", subject="s",
            template_revision_id=revisions[first if i % 2 else second],
            status="failed" if i == 24 else "pending", reason="550 no such user" if i == 24 else None))
    db.session.commit()
    newest = recent_sends(db.session)
    assert [s.to_email for s in newest] == [f"r{i}@example.com" for i in range(24, 4, -1)]
    assert newest[0].state == "failed" and newest[1].state == "queued"
    mine = recent_sends(db.session, template_id=first)
    assert {s.template_id for s in mine} == {first} and len(mine) == 12
    page = logged_in_client.get(f"/settings/transactional/{second}").text
    assert "r24@example.com" in page and "550 no such user" in page and "r23@example.com" not in page
