"""Merge-field mistakes on the pages: the editor's autosave answers with the warnings beside
the preview (and a link from the save status), and the send page shows them above the Send
button; broken syntax takes the Send button away and says where the mistake is. SQLite only:
nothing here depends on the engine (the counting query is tested on both in
test_merge_report.py)."""

from __future__ import annotations

import re

import pytest

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import Broadcast, MailingList, Subscriber, Subscription
from broadside.core.site_settings import update_settings
from tests.helpers import csrf_token_from
from webapp.extensions import db

HTMX = {"HX-Request": "true"}


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    return request.param


@pytest.fixture
def news(app) -> MailingList:
    """Four recipients; one has no city."""
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main St", time_zone="UTC")
    news = MailingList(name="News")
    db.session.add(news)
    db.session.flush()
    for index, city in enumerate(["Lisbon", "Porto", "Faro", None]):
        person = Subscriber(email=f"p{index}@example.com", name=f"P{index}",
                            attributes={"city": city} if city else {})
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=news.id, status="active"))
    db.session.commit()
    return news


@pytest.fixture
def draft(news) -> Broadcast:
    return drafts.create_draft(db.session, list_id=news.id, subject="News", body="Hello.")


def autosave(client, draft, news, **fields):
    page = client.get(f"/broadcasts/{draft.id}/edit")
    values = {"csrf_token": csrf_token_from(page.text), "audience": f"list:{news.id}",
              "subject": "News", "preheader": "", "body": "Hello.", **fields}
    return client.post(f"/broadcasts/{draft.id}/autosave", headers=HTMX, data=values)


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def test_autosave_answers_with_the_unknown_field_its_suggestion_and_who_lacks_a_value(
        logged_in_client, draft, news):
    response = autosave(logged_in_client, draft, news,
                        body="Dear {{ nmae }},\n\nNews from {{ attributes.city }}.")
    assert response.status_code == 200
    assert 'id="preview-pane"' in response.text
    words = text_of(response.text)
    assert ("2 merge fields to check In the body, line 1, column 9: {{ nmae }} is not a merge "
            "field, so it will be empty for everyone. Did you mean {{ name }}?") in words
    assert ("1 of 4 recipients has no city; they will see it empty in the body. Add a "
            'fallback: {{ attributes.city or &#34;there&#34; }}') in words
    # The save status (swapped out of band, by the Save button) points at them.
    status = re.search(r'<p id="save-status"[^>]*hx-swap-oob="true"[^>]*>.*?</p>', response.text,
                       re.S).group(0)
    assert 'href="#merge-check"' in status and "2 merge fields to check." in status
    # The draft was saved all the same: nothing typed is lost.
    db.session.refresh(draft)
    assert "{{ nmae }}" in draft.body
    # The editor shows the same on a fresh load.
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    assert 'id="merge-check"' in page.text and "Did you mean" in page.text


def test_autosave_of_broken_syntax_says_the_line_and_column_of_the_mistake(
        logged_in_client, draft, news):
    response = autosave(logged_in_client, draft, news,
                        body="Hi {{ name,\n\n{% if attributes.vip %}VIP{% endif %}")
    assert response.status_code == 200
    problem = re.search(r'<div[^>]*id="preview-problem"[^>]*>(.*?)</div>', response.text,
                        re.S).group(1)
    assert "The body has a merge-field error on line 1, column 4" in problem
    assert "unexpected" not in problem.lower()
    assert 'href="#preview-problem"' in response.text
    response = autosave(logged_in_client, draft, news, subject="Hi {{ name")
    assert "The subject has a merge-field error on line 1, column 4" in response.text


def test_the_send_page_warns_above_the_send_button_and_still_offers_it(
        logged_in_client, draft, news):
    drafts.update_draft(db.session, draft.id, list_id=news.id, subject="For {{ nmae }}",
                        preheader="", body="From {{ attributes.city }}")
    page = logged_in_client.get(f"/broadcasts/{draft.id}/send")
    assert page.status_code == 200
    warnings = page.text.index('id="merge-check"')
    assert warnings < page.text.index('id="send-now"')
    words = text_of(page.text)
    assert ("In the subject, column 8: {{ nmae }} is not a merge field, so it will be empty "
            "for everyone. Did you mean {{ name }}?") in words
    assert "1 of 4 recipients has no city" in words
    assert "Send now to 4 subscribers" in words


def test_the_send_page_takes_send_away_while_the_syntax_is_broken(logged_in_client, draft, news):
    drafts.update_draft(db.session, draft.id, list_id=news.id, subject="News", preheader="",
                        body="Hi {{ name,\n\n{% if attributes.vip %}VIP{% endif %}")
    page = logged_in_client.get(f"/broadcasts/{draft.id}/send")
    assert page.status_code == 200
    assert 'id="send-now"' not in page.text and 'id="schedule-button"' not in page.text
    assert "The body has a merge-field error on line 1, column 4" in page.text
    # A Send posted anyway (an old tab) is refused with the same words, and nothing is sent.
    response = logged_in_client.post(f"/broadcasts/{draft.id}/send",
                                      data={"csrf_token": csrf_token_from(page.text)})
    assert response.status_code == 422
    assert "merge-field error on line 1, column 4" in response.text
    db.session.refresh(draft)
    assert draft.status == "draft"
