"""Templates and blocks through the pages: the built-ins, "save as template" from a draft or a
sent broadcast, "new from template" on the broadcasts page (its design changes carried into
the draft's preview and frozen revision), a template's design validated as Settings', blocks
created, edited and kept while used."""

from __future__ import annotations

import pytest

from broadside.campaigns.broadcasts import drafts
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Broadcast, ContentBlock, MailingList, MessageTemplate, Revision
from broadside.core.site_settings import get_settings
from tests.helpers import csrf_token_from
from webapp.extensions import db

FROM = "Acme <news@example.com>"


@pytest.fixture
def news(app) -> MailingList:
    mailing_list = MailingList(name="News")
    db.session.add(mailing_list)
    get_settings(db.session).postal_address = "1 Main Street"
    db.session.commit()
    return mailing_list


def post(client, page_url: str, url: str, **fields):
    page = client.get(page_url)
    return client.post(url, data={"csrf_token": csrf_token_from(page.text), **fields})


def test_the_three_built_ins_are_listed_and_preview_as_emails(logged_in_client):
    page = logged_in_client.get("/templates/")
    assert page.status_code == 200
    for name in ("Newsletter with sections", "Announcement", "Plain letter"):
        assert name in page.text
    newsletter = logged_in_client.get("/templates/builtin:newsletter/preview")
    assert newsletter.status_code == 200
    assert "The main story</h2>" in newsletter.text and "Hi Alex," in newsletter.text
    announcement = logged_in_client.get("/templates/builtin:announcement/preview")
    assert 'role="presentation"' in announcement.text and "<th" in announcement.text
    assert "default-src 'none'" in announcement.headers["Content-Security-Policy"]
    assert logged_in_client.get("/templates/builtin:nothing/preview").status_code == 404


def test_a_built_in_cannot_be_deleted_or_edited(logged_in_client):
    page = logged_in_client.get("/templates/")
    assert "/templates/newsletter/delete" not in page.text
    token = csrf_token_from(page.text)
    for url in ("/templates/newsletter/delete", "/templates/builtin:newsletter/delete",
                "/templates/newsletter/edit"):
        assert logged_in_client.post(url, data={"csrf_token": token}).status_code in (404, 405)


def test_new_from_template_copies_its_words_and_format(logged_in_client, news):
    response = post(logged_in_client, "/broadcasts/", "/broadcasts/new",
                    audience=f"list:{news.id}", template="builtin:announcement")
    assert response.status_code == 303
    broadcast = db.session.query(Broadcast).one()
    assert broadcast.subject == "Announcing: the one-line news"
    assert broadcast.body_format == "html" and broadcast.editor == "html"
    assert "<table" in broadcast.body and broadcast.design_overrides is None


def test_new_from_an_unknown_template_says_so_and_makes_nothing(logged_in_client, news):
    response = post(logged_in_client, "/broadcasts/", "/broadcasts/new",
                    audience=f"list:{news.id}", template="99")
    assert response.status_code == 422 and "There is no such template." in response.text
    assert db.session.query(Broadcast).count() == 0


def test_save_as_template_then_start_from_it_carries_the_design(logged_in_client, news):
    draft = drafts.create_draft(db.session, list_id=news.id, subject="Spring {{ name }}",
                                preheader="Fresh", body="# Spring\n\nHello")
    draft.design_overrides = {"colour": "#aa3300", "width": 720, "template": "Old"}
    db.session.commit()
    response = post(logged_in_client, f"/broadcasts/{draft.id}/edit",
                    f"/templates/from-broadcast/{draft.id}", name="Spring issue",
                    description="For the seasons")
    assert response.status_code == 303
    template = db.session.query(MessageTemplate).one()
    assert (template.name, template.subject, template.preheader, template.body) == (
        "Spring issue", "Spring {{ name }}", "Fresh", "# Spring\n\nHello")
    assert template.design_overrides == {"colour": "#aa3300", "width": 720}  # no old source

    post(logged_in_client, "/broadcasts/", "/broadcasts/new", audience=f"list:{news.id}",
         template=str(template.id))
    started = db.session.query(Broadcast).order_by(Broadcast.id.desc()).first()
    assert started.id != draft.id and started.body == "# Spring\n\nHello"
    assert started.design_overrides == {"colour": "#aa3300", "width": 720,
                                        "template_id": template.id, "template": "Spring issue"}
    editor = logged_in_client.get(f"/broadcasts/{started.id}/edit")
    assert "from the template <strong>“Spring issue”</strong>" in editor.text
    preview = logged_in_client.get(f"/broadcasts/{started.id}/preview")
    assert "border-top: 4px solid #aa3300" in preview.text and "max-width: 720px" in preview.text

    # Frozen at Send with the changes; the template edited afterwards changes nothing sent.
    send_broadcast(db.session, started.id, default_from=FROM, jobs=None)
    revision = db.session.query(Revision).filter_by(broadcast_id=started.id).one()
    assert "#aa3300" in revision.html_template and "max-width: 720px" in revision.html_template


def test_reset_to_settings_design(logged_in_client, news):
    draft = drafts.create_draft(db.session, list_id=news.id, subject="S", body="B")
    draft.design_overrides = {"colour": "#aa3300", "template": "X", "template_id": 5}
    db.session.commit()
    response = post(logged_in_client, f"/broadcasts/{draft.id}/edit",
                    f"/templates/broadcast/{draft.id}/design")
    assert response.status_code == 303
    db.session.refresh(draft)
    assert draft.design_overrides is None
    assert "#aa3300" not in logged_in_client.get(f"/broadcasts/{draft.id}/preview").text


def test_save_as_template_from_a_sent_broadcast_and_a_taken_name_keeps_what_was_typed(
        logged_in_client, news):
    draft = drafts.create_draft(db.session, list_id=news.id, subject="Sent one", body="Body")
    send_broadcast(db.session, draft.id, default_from=FROM, jobs=None)
    page = logged_in_client.get(f"/broadcasts/{draft.id}")
    assert "Save as template" in page.text
    assert post(logged_in_client, f"/broadcasts/{draft.id}", f"/templates/from-broadcast/{draft.id}",
                name="Kept").status_code == 303
    again = post(logged_in_client, f"/broadcasts/{draft.id}",
                 f"/templates/from-broadcast/{draft.id}", name="Kept", description="typed")
    assert again.status_code == 422 and "There is already a template named “Kept”." in again.text
    assert 'value="typed"' in again.text
    clash = post(logged_in_client, f"/broadcasts/{draft.id}",
                 f"/templates/from-broadcast/{draft.id}", name="plain LETTER")
    assert clash.status_code == 422
    assert db.session.query(MessageTemplate).count() == 1


def test_a_templates_design_is_validated_as_settings_design_is(logged_in_client, news):
    template = MessageTemplate(name="Mine", body="Hi")
    db.session.add(template)
    db.session.commit()
    url = f"/templates/{template.id}/edit"
    bad = post(logged_in_client, url, url, name="Mine", colour="red", width="", font="",
               footer_text="")
    assert bad.status_code == 422 and "is not a colour we can use" in bad.text
    assert 'value="red"' in bad.text
    narrow = post(logged_in_client, url, url, name="Mine", colour="", width="100", font="",
                  footer_text="")
    assert narrow.status_code == 422 and "from 480 to 800" in narrow.text
    good = post(logged_in_client, url, url, name="Mine, renamed", colour="AA3300", width="640",
                font="serif", footer_text="  Our own footer ")
    assert good.status_code == 303
    db.session.refresh(template)
    assert template.name == "Mine, renamed"
    assert template.design_overrides == {"colour": "#aa3300", "width": 640, "font": "serif",
                                         "footer_text": "Our own footer"}
    preview = logged_in_client.get(f"/templates/{template.id}/preview")
    assert "Georgia" in preview.text and "Our own footer" in preview.text

    deleted = post(logged_in_client, "/templates/", f"/templates/{template.id}/delete")
    assert deleted.status_code == 303 and db.session.query(MessageTemplate).count() == 0


def test_blocks_page_creates_edits_and_keeps_a_used_block(logged_in_client, news):
    bad = post(logged_in_client, "/templates/blocks/", "/templates/blocks/", name="Sign{off}",
               body="Typed words", body_format="markdown")
    assert bad.status_code == 422 and "letters, digits" in bad.text and "Typed words" in bad.text
    assert post(logged_in_client, "/templates/blocks/", "/templates/blocks/", name="Sign-off",
                body="Yours, Ann", body_format="markdown").status_code == 303
    block = db.session.query(ContentBlock).one()
    draft = drafts.create_draft(db.session, list_id=news.id, subject="March",
                                body="Hi\n\n[[block: Sign-off]]")
    assert "Yours, Ann" in logged_in_client.get(f"/broadcasts/{draft.id}/preview").text
    page = logged_in_client.get("/templates/blocks/")
    assert "[[block: Sign-off]]" in page.text and "Used by the draft “March”" in page.text

    url = f"/templates/blocks/{block.id}"
    assert post(logged_in_client, url, url, name="Sign-off", body="Cheers, Bob",
                body_format="markdown").status_code == 303
    assert "Cheers, Bob" in logged_in_client.get(f"/broadcasts/{draft.id}/preview").text

    refused = post(logged_in_client, url, f"{url}/delete")
    assert refused.status_code == 303
    shown = logged_in_client.get(refused.headers["Location"])
    assert "is used by the draft “March”" in shown.text
    assert db.session.query(ContentBlock).count() == 1

    drafts.delete_draft(db.session, draft.id)
    assert post(logged_in_client, url, f"{url}/delete").status_code == 303
    assert db.session.query(ContentBlock).count() == 0


def test_the_editor_offers_insert_block_and_save_as_template(logged_in_client, news):
    db.session.add(ContentBlock(name="Sponsor box", body="Thanks", body_format="markdown"))
    db.session.commit()
    draft = drafts.create_draft(db.session, list_id=news.id, subject="S", body="B")
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    assert '<option value="[[block: Sponsor box]]">Sponsor box</option>' in page.text
    assert 'id="insert-block"' in page.text and "Save as template" in page.text
    assert "Design: as in Settings" in page.text
    index = logged_in_client.get("/broadcasts/")
    assert '<label for="template">Start from</label>' in index.text
    assert '<option value="builtin:letter">Plain letter</option>' in index.text
    chosen = logged_in_client.get("/broadcasts/?template=builtin:letter")
    assert '<option selected value="builtin:letter">' in chosen.text
