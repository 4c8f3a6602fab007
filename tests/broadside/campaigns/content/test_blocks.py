"""Reusable blocks: named by `[[block: Name]]`, expanded where every freeze reads a body, in
the body's format; a missing one said by name; a used one not deleted; a sent revision keeps
the copy it was frozen with."""

from __future__ import annotations

import pytest

from broadside.campaigns.broadcasts import drafts
from broadside.campaigns.broadcasts.launch import blocking_problems
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.campaigns.content import blocks
from broadside.campaigns.content.bodies import body_of
from broadside.core.errors import Conflict, ValidationError
from broadside.core.models import Broadcast, MailingList, Revision
from broadside.core.site_settings import get_settings
from broadside.mail.rendering import compiled_revision
from webapp.extensions import db

SIGN_OFF = "With thanks,\\\n**The {{ 'team' }}**"


@pytest.fixture
def news(app) -> MailingList:
    mailing_list = MailingList(name="News")
    db.session.add(mailing_list)
    get_settings(db.session).postal_address = "1 Main Street"
    db.session.commit()
    return mailing_list


def draft(news: MailingList, body: str, body_format: str = "markdown") -> Broadcast:
    broadcast = drafts.create_draft(db.session, list_id=news.id, subject="Hi", body=body)
    broadcast.body_format = body_format
    db.session.commit()
    return broadcast


def test_markdown_block_in_a_markdown_body_becomes_its_own_paragraphs(news):
    blocks.create_block(db.session, name="Sign-off", body=SIGN_OFF)
    broadcast = draft(news, "Hello {{ name }}.\n[[block: Sign-off]]\nBye")
    written = body_of(db.session, broadcast)
    assert written.body_format == "markdown"
    assert written.body == "Hello {{ name }}.\n\n" + SIGN_OFF + "\n\nBye"


def test_a_reference_is_matched_whatever_its_case_and_spacing(news):
    blocks.create_block(db.session, name="Sponsor box", body="Thanks to **Acme**.")
    broadcast = draft(news, "<div>[[Block:&nbsp;sponsor  BOX ]]</div><p>x</p>", "html")
    written = body_of(db.session, broadcast)
    assert written.body == "<p>Thanks to <strong>Acme</strong>.</p>\n<p>x</p>"


def test_markdown_block_in_an_html_body_is_rendered_keeping_its_merge_fields(news):
    blocks.create_block(db.session, name="Hello", body='Hi {{ name | default("friend") }}!')
    broadcast = draft(news, "<p>[[block: Hello]]</p><table><tr><td>t</td></tr></table>", "html")
    written = body_of(db.session, broadcast)
    assert written.body.startswith('<p>Hi {{ name | default("friend") }}!</p>')
    assert "<p><p>" not in written.body


def test_html_block_in_a_markdown_body_renders_the_body_first_and_says_it_is_html(news):
    blocks.create_block(db.session, name="Sponsor", body_format="html",
                        body='<table role="presentation"><tr><td>Our sponsor</td></tr></table>')
    broadcast = draft(news, "# Issue 3\n\nHi {{ name or 'you' }}\n\n[[block: Sponsor]]\n")
    written = body_of(db.session, broadcast)
    assert written.body_format == "html"
    assert "<h1>Issue 3</h1>" in written.body
    assert "Hi {{ name or 'you' }}" in written.body
    assert '<table role="presentation"><tr><td>Our sponsor</td></tr></table>' in written.body
    assert "[[" not in written.body
    # and it freezes and renders like any HTML body
    preview = drafts.preview_email(db.session, broadcast.id, sample_email="a@example.com",
                                   default_from="A <a@example.com>")
    assert preview.problem is None and "Our sponsor" in preview.rendered.html
    assert "Hi Alex" in preview.rendered.html


def test_a_missing_block_is_a_problem_before_send_never_an_empty_space(news):
    broadcast = draft(news, "Hello\n\n[[block: Footer note]]")
    with pytest.raises(ValidationError, match="“Footer note”, and there is no block"):
        body_of(db.session, broadcast)
    problems = blocking_problems(db.session, broadcast)
    assert any("Footer note" in problem for problem in problems)
    preview = drafts.preview_email(db.session, broadcast.id, sample_email="a@example.com",
                                   default_from="A <a@example.com>")
    assert preview.rendered is None and "Footer note" in preview.problem
    with pytest.raises(ValidationError):
        send_broadcast(db.session, broadcast.id, default_from="A <a@example.com>", jobs=None)
    assert db.session.get(Broadcast, broadcast.id).status == "draft"


def test_editing_a_block_changes_drafts_but_not_a_sent_revision(news):
    block = blocks.create_block(db.session, name="Sign-off", body="Yours, Ann")
    sent = draft(news, "Issue one\n\n[[block: Sign-off]]")
    waiting = draft(news, "Issue two\n\n[[block: Sign-off]]")
    send_broadcast(db.session, sent.id, default_from="A <a@example.com>", jobs=None)
    blocks.update_block(db.session, block.id, name="Sign-off", body="Cheers, Bob",
                        body_format="markdown")

    revision = db.session.query(Revision).filter_by(broadcast_id=sent.id).one()
    assert "Yours, Ann" in revision.body_markdown and "[[" not in revision.body_markdown
    html = compiled_revision(revision.subject, revision.html_template,
                             revision.text_template).render(
        email="a@example.com", name="A", attributes={}, unsubscribe_url="#").html
    assert "Yours, Ann" in html and "Cheers, Bob" not in html
    sent_preview = drafts.preview_email(db.session, sent.id, sample_email="a@example.com",
                                        default_from="A <a@example.com>")
    assert "Yours, Ann" in sent_preview.rendered.html
    draft_preview = drafts.preview_email(db.session, waiting.id, sample_email="a@example.com",
                                         default_from="A <a@example.com>")
    assert "Cheers, Bob" in draft_preview.rendered.html


def test_a_block_used_by_a_draft_is_not_deleted_and_says_where(news):
    block = blocks.create_block(db.session, name="Header", body="**Acme news**")
    broadcast = draft(news, "[[block: Header]]\n\nText")
    broadcast.subject = "March issue"
    db.session.commit()
    with pytest.raises(Conflict, match="the draft “March issue”"):
        blocks.delete_block(db.session, block.id)
    with pytest.raises(Conflict, match="renaming it"):
        blocks.update_block(db.session, block.id, name="Masthead", body="x",
                            body_format="markdown")
    send_broadcast(db.session, broadcast.id, default_from="A <a@example.com>", jobs=None)
    assert blocks.delete_block(db.session, block.id) == "Header"  # sent: it has its own copy


@pytest.mark.parametrize(("name", "body", "message"), [
    ("", "x", "Give the block a name"),
    ("Sign{off}", "x", "letters, digits"),
    ("Ok", "  ", "Write the block's content"),
    ("Ok", "[[block: Other]]", "cannot name another block"),
    ("Ok", "{{ name ", "block"),
])
def test_a_bad_block_is_refused_with_a_message(news, name, body, message):
    with pytest.raises(ValidationError, match=message):
        blocks.create_block(db.session, name=name, body=body)
    assert blocks.list_blocks(db.session) == []


def test_two_blocks_cannot_share_a_name_in_any_case(news):
    blocks.create_block(db.session, name="Sign-off", body="x")
    with pytest.raises(ValidationError, match="already a block"):
        blocks.create_block(db.session, name="sign-OFF", body="y")


def test_a_transactional_template_follows_a_block_at_its_next_send(news):
    """Its revision is frozen from `body_of` when a message is sent (current_revision), so an
    edited block gives it a new revision, as a changed postal address does."""
    from broadside.campaigns.transactional import templates as transactional

    block = blocks.create_block(db.session, name="Footer", body="Questions? Reply.")
    template = transactional.create_template(db.session, transactional.parse_template(
        db.session, {"name": "Reset", "subject": "Link", "body": "Hi\n\n[[block: Footer]]"}),
        default_from="A <a@example.com>")
    first = transactional.current_revision(db.session, template, default_from="A <a@example.com>")
    assert "Questions? Reply." in first.body_markdown
    blocks.update_block(db.session, block.id, name="Footer", body="Write to us.",
                        body_format="markdown")
    second = transactional.current_revision(db.session, template, default_from="A <a@example.com>")
    assert second.id != first.id and "Write to us." in second.body_markdown
    db.session.refresh(first)
    assert "Questions? Reply." in first.body_markdown  # the first one's messages keep theirs
    with pytest.raises(Conflict, match="transactional template “Reset”"):
        blocks.delete_block(db.session, block.id)
