"""The broadcast preview pane: its views (desktop, phone, Apple Mail and Gmail dark, plain
text) as links that work without JavaScript, "Preview as" a subscriber, the client checks, and
the plain-text part the owner may write (webapp/broadcasts/preview_views.py)."""

from __future__ import annotations

import re

import pytest

from broadside.campaigns.broadcasts import drafts
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Broadcast, MailingList, Revision, Subscriber, Subscription
from tests.helpers import csrf_token_from
from webapp.extensions import db


@pytest.fixture
def news(app) -> MailingList:
    mailing_list = MailingList(name="Monthly news")
    db.session.add(mailing_list)
    db.session.commit()
    return mailing_list


@pytest.fixture
def draft(news) -> Broadcast:
    return drafts.create_draft(db.session, list_id=news.id, subject="Hello {{ name }}",
                               body="# Welcome\n\nHi {{ name or 'friend' }} from "
                                    "{{ attributes.city }}! [Shop](http://acme.example/shop)")


@pytest.fixture
def ana(news) -> Subscriber:
    person = Subscriber(email="ana.lima@example.com", name="Ana Lima",
                        attributes={"city": "Porto"})
    db.session.add(person)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=person.id, list_id=news.id, status="active"))
    db.session.commit()
    return person


def pane_views(html: str) -> dict[str, str]:
    return dict(re.findall(
        r'<a href="\?([^"]*)#preview-heading" class="preview-view"[^>]*>(\w[^<]*)</a>', html))


def test_the_views_are_links_that_work_without_javascript(logged_in_client, draft):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    assert set(pane_views(page.text).values()) == {"Desktop", "Phone", "Apple Mail dark",
                                                   "Gmail dark", "Plain text"}
    assert re.search(r'view=desktop#preview-heading"[^>]*aria-current="true"', page.text)
    phone = logged_in_client.get(f"/broadcasts/{draft.id}/edit?view=phone")
    assert re.search(r'view=phone#preview-heading"[^>]*aria-current="true"', phone.text)
    assert 'class="preview-frame preview-frame-phone"' in phone.text
    assert f'src="/broadcasts/{draft.id}/preview?v=' in phone.text and "view=phone" in phone.text
    text = logged_in_client.get(f"/broadcasts/{draft.id}/edit?view=text")
    shown = re.search(r'<pre class="preview-text" id="preview-text"[^>]*>(.*?)</pre>', text.text,
                      re.S).group(1)
    assert shown.startswith("Welcome\n=======\n\nHi Alex from !")
    assert "Unsubscribe: #" in shown
    assert "<iframe" not in text.text.split('id="preview-pane"')[1]
    # An unknown view is the desktop one.
    assert 'class="preview-frame" id="preview-frame"' in logged_in_client.get(
        f"/broadcasts/{draft.id}/edit?view=nonsense").text


def test_the_pane_alone_for_htmx_in_each_view(logged_in_client, draft):
    pane = logged_in_client.get(f"/broadcasts/{draft.id}/preview-pane?view=gmail-dark",
                                headers={"HX-Request": "true"})
    assert pane.status_code == 200
    assert pane.text.lstrip().startswith('<div id="preview-pane">')
    assert "An approximation of Gmail" in pane.text
    assert 'name="preview_view" value="gmail-dark" form="compose-form"' in pane.text


def test_the_dark_documents_are_the_email_transformed_and_text_has_none(logged_in_client, draft):
    light = logged_in_client.get(f"/broadcasts/{draft.id}/preview").text
    apple = logged_in_client.get(f"/broadcasts/{draft.id}/preview?view=apple-dark")
    gmail = logged_in_client.get(f"/broadcasts/{draft.id}/preview?view=gmail-dark")
    assert apple.headers["Content-Security-Policy"] == gmail.headers["Content-Security-Policy"]
    assert "prefers-color-scheme: dark" in light
    assert "<style>:root { color-scheme: dark; }" in apple.text
    assert "prefers-color-scheme" not in gmail.text and "#121212" in gmail.text
    assert logged_in_client.get(f"/broadcasts/{draft.id}/preview?view=text").status_code == 404


def test_the_client_checks_are_said_in_the_pane(logged_in_client, draft):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    checks = re.search(r'<div class="client-checks" id="client-checks">(.*?)</div>', page.text,
                       re.S).group(1)
    assert "1 link does not use https" in checks and "http://acme.example/shop" in checks
    drafts.update_draft(db.session, draft.id, list_id=draft.list_id, subject="Hi",
                        preheader="", body="[Shop](https://acme.example/shop)")
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    assert 'class="client-checks client-checks-ok"' in page.text


def test_preview_as_a_subscriber_fills_their_merge_fields(logged_in_client, draft, ana):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit?as=Ana.Lima@example.com")
    assert 'id="preview-to">Ana Lima &lt;ana.lima@example.com&gt;' in page.text
    assert 'id="preview-subject">Hello Ana Lima<' in page.text
    assert 'name="preview_as" value="Ana.Lima@example.com" form="compose-form"' in page.text
    frame = logged_in_client.get(f"/broadcasts/{draft.id}/preview?as=ana.lima@example.com")
    assert "Hi Ana Lima from Porto!" in frame.text
    # The views keep the person.
    assert "as=Ana.Lima%40example.com" in page.text


def test_preview_as_nobody_says_so_and_shows_the_sample(logged_in_client, draft):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit?as=nobody@example.com")
    assert "No subscriber has the address nobody@example.com" in page.text
    assert 'aria-invalid="true"' in page.text
    assert 'id="preview-subject">Hello Alex<' in page.text


def test_the_people_search_suggests_a_few_by_address(logged_in_client, draft, ana):
    for i in range(12):
        db.session.add(Subscriber(email=f"ana{i:02}@example.com", name=""))
    db.session.commit()
    found = logged_in_client.get(f"/broadcasts/{draft.id}/preview-people?as=ana",
                                 headers={"HX-Request": "true"})
    options = re.findall(r'<option value="([^"]+)">', found.text)
    assert len(options) == 8 and options[0] == "ana11@example.com"
    assert re.findall(r'<option value="([^"]+)">', logged_in_client.get(
        f"/broadcasts/{draft.id}/preview-people?as=ana.l").text) == ["ana.lima@example.com"]
    assert "<option" not in logged_in_client.get(
        f"/broadcasts/{draft.id}/preview-people?as=a").text  # one letter: nothing yet
    assert logged_in_client.get("/broadcasts/999/preview-people?as=ana").status_code == 404


def compose(page_html: str, news: MailingList, **fields) -> dict:
    return {"csrf_token": csrf_token_from(page_html), "audience": f"list:{news.id}",
            "subject": "Hello {{ name }}", "preheader": "", "body": "# Welcome\n\nHi!", **fields}


def test_the_text_field_shows_the_automatic_text_and_saves_the_owners(logged_in_client, draft,
                                                                        news):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    assert re.search(r'<pre class="text-automatic" id="text-automatic"[^>]*>Welcome\n=======\n\n'
                     r"Hi \{\{ name or &#39;friend&#39; \}\} from \{\{ attributes.city \}\}! "
                     r"Shop \(http://acme.example/shop\)</pre>", page.text)
    assert re.search(r'<input[^>]* checked[^>]*value="auto"', page.text)
    # "Write my own" starts from the automatic text (the textarea holds it, without JS too).
    assert 'data-from-automatic="true">\nWelcome\n=======' in page.text
    response = logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=compose(
        page.text, news, text_mode="own", text_body="Dear {{ name }},\r\nmy own words."))
    assert response.status_code == 303
    db.session.refresh(draft)
    assert draft.text_body == "Dear {{ name }},\nmy own words."
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit?view=text")
    assert re.search(r'<input[^>]* checked[^>]*value="own"', page.text)
    assert 'data-from-automatic="false">\nDear {{ name }},\nmy own words.</textarea>' in page.text
    assert re.search(r'id="preview-text"[^>]*>Dear Alex,\nmy own words.\n\n--\n', page.text)
    # Automatic again: the words typed are not kept as the part.
    logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=compose(
        page.text, news, text_mode="auto", text_body="Dear {{ name }}"))
    db.session.refresh(draft)
    assert draft.text_body is None
    # "Write my own" left empty is automatic too.
    logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=compose(
        page.text, news, text_mode="own", text_body="  "))
    db.session.refresh(draft)
    assert draft.text_body is None


def test_autosave_keeps_the_view_and_person_and_updates_the_automatic_text(
        logged_in_client, draft, news, ana):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    response = logged_in_client.post(
        f"/broadcasts/{draft.id}/autosave", headers={"HX-Request": "true"},
        data=compose(page.text, news, body="New **words** for {{ name }}", text_mode="auto",
                     text_body="", preview_view="text", preview_as="ana.lima@example.com"))
    assert response.status_code == 200
    assert re.search(r'id="preview-text"[^>]*>New words for Ana Lima', response.text)
    assert re.search(r'id="text-automatic"[^>]*hx-swap-oob="true">New words for \{\{ name \}\}<',
                     response.text)


def test_merge_fields_in_the_text_part_are_checked_and_frozen(logged_in_client, draft, news,
                                                              ana):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=compose(
        page.text, news, text_mode="own", text_body="Dear {{ attributes.shoe_size }}"))
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    assert "In the plain-text part" in page.text  # the merge report reads it
    logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=compose(
        page.text, news, text_mode="own", text_body="Dear {{ name "))
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    assert "The plain-text part has a merge-field error" in page.text
    logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=compose(
        page.text, news, text_mode="own", text_body="Dear {{ name }}, plain."))
    send_broadcast(db.session, draft.id, default_from="Acme <news@example.com>", jobs=None)
    revision = db.session.query(Revision).filter_by(broadcast_id=draft.id).one()
    assert revision.text_template.startswith("{% if view_url %}")
    assert "Dear " in revision.text_template and "plain." in revision.text_template


def test_the_api_sets_and_clears_the_text_part(client, api_headers, draft):
    def patch(value):
        return client.patch(f"/api/broadcasts/{draft.id}", json={"text": value},
                            headers=api_headers)
    assert patch("Hi {{ name }}").status_code == 200
    db.session.refresh(draft)
    assert draft.text_body == "Hi {{ name }}"
    assert patch(None).status_code == 200
    db.session.refresh(draft)
    assert draft.text_body is None
    refused = patch(5)
    assert refused.status_code == 422 and "'text'" in refused.text
