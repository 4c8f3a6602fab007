"""The broadcast pages: list, new draft, editor with autosave and live preview, duplicate."""

from __future__ import annotations

import re

import pytest

from broadside.campaigns.broadcasts import drafts
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Broadcast, MailingList
from broadside.core.site_settings import update_settings
from broadside.mail.rendering import CompiledRevision, freeze_content
from tests.helpers import OWNER_EMAIL, csrf_token_from
from webapp.broadcasts.views import PREVIEW_CSP
from webapp.extensions import db
from webapp.security import CONTENT_SECURITY_POLICY

HOSTILE = "<script>alert('x')</script>"


@pytest.fixture
def news(app) -> MailingList:
    mailing_list = MailingList(name="Monthly news")
    db.session.add(mailing_list)
    db.session.commit()
    return mailing_list


@pytest.fixture
def draft(news) -> Broadcast:
    return drafts.create_draft(db.session, list_id=news.id, subject="Hello {{ name }}",
                               body="# Welcome\n\nHi {{ name or 'friend' }}!")


def form_data(page_html: str, **fields) -> dict:
    return {"csrf_token": csrf_token_from(page_html), **fields}


def sent(broadcast: Broadcast) -> Broadcast:
    """A broadcast frozen by the real send path (not enqueued: no worker in these tests)."""
    return send_broadcast(db.session, broadcast.id, default_from="Acme <news@example.com>",
                          jobs=None)


def test_new_draft_from_the_list_page_opens_the_editor(logged_in_client, news):
    index = logged_in_client.get("/broadcasts/")
    assert index.status_code == 200
    assert '<label for="audience">Send to</label>' in index.text
    response = logged_in_client.post(
        "/broadcasts/new", data=form_data(index.text, audience=f"list:{news.id}"))
    assert response.status_code == 303
    broadcast = db.session.query(Broadcast).one()
    assert response.headers["Location"].endswith(f"/broadcasts/{broadcast.id}/edit")
    assert broadcast.status == "draft" and broadcast.list_id == news.id


def test_new_draft_without_a_list_says_why_and_writes_nothing(logged_in_client, news):
    index = logged_in_client.get("/broadcasts/")
    response = logged_in_client.post("/broadcasts/new", data=form_data(index.text, audience=""))
    assert response.status_code == 422
    assert "Choose a list or a segment to send to." in response.text
    assert db.session.query(Broadcast).count() == 0


def test_editor_has_labelled_fields_a_sandboxed_preview_and_works_without_js(
        logged_in_client, draft):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    assert page.status_code == 200
    for field_id, label in (("audience", "Send to"), ("subject", "Subject"),
                            ("preheader", "Preheader")):
        assert f'<label for="{field_id}">{label}</label>' in page.text
        assert f'id="{field_id}"' in page.text
    # The body's label names it whatever the mode (the switch says how it is written).
    assert '<label for="body" id="body-label">Body</label>' in page.text
    assert '<legend>Write in</legend>' in page.text
    # Without JavaScript the form posts to the save endpoint; htmx adds the autosave.
    assert f'action="/broadcasts/{draft.id}/edit"' in page.text
    assert f'hx-post="/broadcasts/{draft.id}/autosave"' in page.text
    assert 'hx-trigger="input changed delay:600ms"' in page.text
    iframe = re.search(r"<iframe[^>]*>", page.text).group(0)
    assert " sandbox " in iframe and 'title="Email preview"' in iframe
    assert f'src="/broadcasts/{draft.id}/preview?v=' in iframe
    assert "Hello Alex" in page.text  # the sample recipient's subject, above the frame
    # The strict policy, plus one nonce for the rich-text editor's own <style> element (the
    # same nonce the page hands the editor), never 'unsafe-inline'.
    nonce = re.search(r'data-style-nonce="([A-Za-z0-9_-]{20,})"', page.text).group(1)
    assert page.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY.replace(
        "style-src 'self'", f"style-src 'self' 'nonce-{nonce}'")
    assert "unsafe-inline" not in page.headers["Content-Security-Policy"]
    assert 'style="' not in page.text and "<script>" not in page.text


def test_save_button_stores_the_draft(logged_in_client, draft, news):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    response = logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=form_data(
        page.text, audience=f"list:{news.id}", subject="November", preheader="Short",
        body="New body"))
    assert response.status_code == 303
    db.session.refresh(draft)
    assert (draft.subject, draft.preheader, draft.body) == ("November", "Short", "New body")
    assert "Draft saved." in logged_in_client.get(response.headers["Location"]).text


def test_save_with_bad_input_writes_nothing_and_says_why(logged_in_client, draft, news):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    response = logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=form_data(
        page.text, audience=f"list:{news.id}", subject="x" * 301, preheader="", body="changed"))
    assert response.status_code == 422
    assert "The subject is too long" in response.text
    assert 'value="' + "x" * 301 in response.text  # what was typed is kept on the page
    db.session.refresh(draft)
    assert draft.body == "# Welcome\n\nHi {{ name or 'friend' }}!"


def test_autosave_stores_the_draft_and_returns_the_new_preview(logged_in_client, draft, news):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    response = logged_in_client.post(
        f"/broadcasts/{draft.id}/autosave", headers={"HX-Request": "true"},
        data=form_data(page.text, audience=f"list:{news.id}", subject="Autosaved {{ name }}",
                       preheader="", body="Typed text"))
    assert response.status_code == 200
    assert response.text.lstrip().startswith('<div id="preview-pane">')
    assert "Autosaved Alex" in response.text
    assert 'id="save-status"' in response.text and 'hx-swap-oob="true"' in response.text
    db.session.refresh(draft)
    assert (draft.subject, draft.body) == ("Autosaved {{ name }}", "Typed text")
    frame = logged_in_client.get(f"/broadcasts/{draft.id}/preview")
    assert "Typed text" in frame.text


def test_autosave_that_is_refused_keeps_the_preview_and_says_why(logged_in_client, draft, news):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    response = logged_in_client.post(
        f"/broadcasts/{draft.id}/autosave", headers={"HX-Request": "true"},
        data=form_data(page.text, audience=f"list:{news.id}", subject="two\nlines", preheader="",
                       body="lost"))
    assert response.status_code == 422
    assert response.headers["HX-Retarget"] == "#save-status"
    assert "Not saved: The subject must be one line." in response.text
    db.session.refresh(draft)
    assert draft.body != "lost"


def test_bad_merge_syntax_is_saved_but_the_preview_explains(logged_in_client, draft, news):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    response = logged_in_client.post(
        f"/broadcasts/{draft.id}/autosave", headers={"HX-Request": "true"},
        data=form_data(page.text, audience=f"list:{news.id}", subject="Fine", preheader="",
                       body="Line one\n\nHello {{ name "))
    assert response.status_code == 200
    assert "merge-field error on line 3" in response.text
    frame = logged_in_client.get(f"/broadcasts/{draft.id}/preview")
    assert frame.status_code == 200
    assert "merge-field error on line 3" in frame.text
    assert frame.headers["Content-Security-Policy"] == PREVIEW_CSP


def test_preview_frame_is_the_workers_email_with_its_own_csp(logged_in_client, draft):
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main St", time_zone="UTC")
    frame = logged_in_client.get(f"/broadcasts/{draft.id}/preview")
    assert frame.status_code == 200
    assert frame.headers["Content-Security-Policy"] == PREVIEW_CSP
    assert frame.headers["X-Frame-Options"] == "SAMEORIGIN"
    assert frame.headers["Cache-Control"] == "no-store"
    frozen = freeze_content(subject=draft.subject, preheader=draft.preheader,
                            body_markdown=draft.body, from_name="Acme",
                            from_email="news@acme.example", postal_address="1 Main St")
    expected = CompiledRevision(subject=draft.subject, html_template=frozen.html_template,
                                text_template=frozen.text_template).render(
        email=OWNER_EMAIL, name="Alex", attributes={}, unsubscribe_url="#")
    assert frame.text == expected.html
    assert "Hi Alex!" in frame.text and "1 Main St" in frame.text


def test_script_in_a_subject_is_shown_as_text_on_every_broadcast_page(
        logged_in_client, news):
    hostile = drafts.create_draft(db.session, list_id=news.id, subject=HOSTILE, body=HOSTILE)
    other = drafts.create_draft(db.session, list_id=news.id, subject=HOSTILE)
    sent(other)
    escaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"
    pages = ["/broadcasts/", f"/broadcasts/{hostile.id}/edit", f"/broadcasts/{other.id}", "/"]
    for url in pages:
        response = logged_in_client.get(url)
        assert response.status_code == 200, url
        assert "<script>alert" not in response.text, url
        assert escaped in response.text, url
    frame = logged_in_client.get(f"/broadcasts/{hostile.id}/preview")
    assert "<script>alert" not in frame.text


def test_sent_broadcast_page_shows_counts_and_what_was_sent(logged_in_client, draft):
    broadcast = sent(draft)
    db.session.execute(
        Broadcast.__table__.update().where(Broadcast.id == broadcast.id)
        .values(total=7, sent_count=4, skipped_count=1, failed_count=1, pending_count=1))
    db.session.commit()
    db.session.query(Broadcast).filter_by(id=broadcast.id).update({"body": "edited later"})
    db.session.commit()
    page = logged_in_client.get(f"/broadcasts/{broadcast.id}")
    assert page.status_code == 200
    assert "Frozen when Send was pressed" in page.text
    for figure, label in (("7", "recipients"), ("4", "sent"), ("1", "skipped"), ("1", "failed")):
        assert f"<strong>{figure}</strong> {label}" in page.text
    frame = logged_in_client.get(f"/broadcasts/{broadcast.id}/preview")
    assert "Hi Alex!" in frame.text and "edited later" not in frame.text  # the frozen revision


def test_a_draft_page_is_its_editor(logged_in_client, draft):
    response = logged_in_client.get(f"/broadcasts/{draft.id}")
    assert response.status_code == 302
    assert response.headers["Location"].endswith(f"/broadcasts/{draft.id}/edit")


def test_a_sent_broadcast_cannot_be_edited(logged_in_client, draft, news):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    sent(draft)
    response = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    assert response.status_code == 302
    assert response.headers["Location"].endswith(f"/broadcasts/{draft.id}")
    saved = logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=form_data(
        page.text, audience=f"list:{news.id}", subject="Changed", preheader="", body="Changed"))
    assert saved.status_code == 302
    autosaved = logged_in_client.post(
        f"/broadcasts/{draft.id}/autosave", headers={"HX-Request": "true"},
        data=form_data(page.text, audience=f"list:{news.id}", subject="Changed", preheader="",
                       body="Changed"))
    assert autosaved.status_code == 409
    assert "duplicate it instead" in autosaved.text
    db.session.refresh(draft)
    assert draft.subject == "Hello {{ name }}"


def test_duplicate_makes_a_new_draft_from_any_broadcast(logged_in_client, draft):
    ab_test = {"variants": [{"subject": draft.subject, "preheader": "", "body": ""},
                            {"subject": "Another way to say it", "preheader": "", "body": ""}],
               "share": 20, "measure": "opens", "wait_hours": 4, "default": 0}
    draft.text_body, draft.view_in_browser, draft.tracking = "The plain words.", True, "per_person"
    draft.ab_test = ab_test
    db.session.get(MailingList, draft.list_id).per_person_tracking = True  # an A/B test needs it
    db.session.commit()
    sent(draft)
    page = logged_in_client.get("/broadcasts/")
    response = logged_in_client.post(f"/broadcasts/{draft.id}/duplicate",
                                     data=form_data(page.text))
    assert response.status_code == 302
    copy = db.session.query(Broadcast).filter(Broadcast.id != draft.id).one()
    assert response.headers["Location"].endswith(f"/broadcasts/{copy.id}/edit")
    assert (copy.status, copy.subject, copy.body, copy.list_id) == (
        "draft", draft.subject, draft.body, draft.list_id)
    # What the owner wrote and chose comes along; what Send recorded does not.
    assert (copy.text_body, copy.view_in_browser, copy.tracking, copy.ab_test) == (
        "The plain words.", True, "per_person", ab_test)
    assert copy.ab_seed is None and copy.ab_winner is None and copy.resend_of_id is None


def test_broadcast_pages_need_the_owner_and_unknown_ids_are_404(client, logged_in_client, draft):
    assert logged_in_client.get("/broadcasts/999").status_code == 404
    assert logged_in_client.get("/broadcasts/999/preview").status_code == 404
    logged_in_client.post("/logout", data={"csrf_token": csrf_token_from(
        logged_in_client.get("/broadcasts/").text)})
    for url in ("/broadcasts/", f"/broadcasts/{draft.id}/edit", f"/broadcasts/{draft.id}/preview"):
        response = client.get(url)
        assert response.status_code == 302 and "/login" in response.headers["Location"], url


def test_list_page_is_paginated_newest_first(logged_in_client, news):
    for number in range(3):
        drafts.create_draft(db.session, list_id=news.id, subject=f"Issue {number}")
    page = drafts.list_broadcasts(db.session, per_page=2)
    assert [row.broadcast.subject for row in page.rows] == ["Issue 2", "Issue 1"]
    assert page.has_next and page.rows[0].list_name == "Monthly news"
    assert "Issue 0" in logged_in_client.get("/broadcasts/").text
