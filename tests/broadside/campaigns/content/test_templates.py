"""Templates: the built-ins render cleanly as they ship, a template's design changes are
validated as Settings' design is, and a broadcast's design is Settings' with its changes over
it (a stored value that no longer validates is ignored, never a failed send)."""

from __future__ import annotations

import pytest

from broadside.campaigns.broadcasts import drafts
from broadside.campaigns.content import design, templates
from broadside.campaigns.content.builtin import BUILT_INS
from broadside.core.errors import Conflict, ValidationError
from broadside.core.models import MailingList, MessageTemplate
from broadside.mail.design import DEFAULT_WIDTH, current_design
from broadside.mail.rendering import CompiledRevision, freeze_content
from webapp.extensions import db


@pytest.mark.parametrize("built_in", BUILT_INS, ids=lambda b: b.key)
@pytest.mark.parametrize("name", ["Robin", ""])
def test_each_built_in_freezes_and_reads_well_with_or_without_a_name(app, built_in, name):
    frozen = freeze_content(subject=built_in.subject, preheader=built_in.preheader,
                            body_markdown=built_in.body, body_format=built_in.body_format,
                            from_name="Acme", from_email="news@acme.example",
                            postal_address="1 Main Street")
    email = CompiledRevision(subject=built_in.subject, html_template=frozen.html_template,
                             text_template=frozen.text_template).render(
        email="r@example.com", name=name, attributes={}, unsubscribe_url="https://u.example/1")
    assert "{{" not in email.html and "{{" not in email.text and "{{" not in email.subject
    greeting = {"newsletter": "Hi ", "announcement": "Hi ", "letter": "Dear "}[built_in.key]
    assert (greeting + (name or {"letter": "friend"}.get(built_in.key, "there"))) in email.text
    if built_in.key == "announcement":
        assert 'role="presentation"' in email.html and "<th " in email.html
    if built_in.key == "newsletter":
        assert email.text.count("\n-----") + email.text.count("\n=====") >= 3  # its sections


def test_design_changes_are_validated_as_settings_design_is(app):
    assert design.clean_overrides({"colour": "", "width": None}) is None
    assert design.clean_overrides({"colour": "AA3300", "width": "640px", "font": "serif",
                                   "footer_text": " a\r\n\r\n\r\nb "}) == {
        "colour": "#aa3300", "width": 640, "font": "serif", "footer_text": "a\n\nb"}
    for values, field, words in (({"colour": "red"}, "colour", "not a colour we can use"),
                                 ({"width": "2000"}, "width", "from 480 to 800"),
                                 ({"font": "comic"}, "font", "one of the fonts"),
                                 ({"footer_text": "x" * 1001}, "footer_text", "too long")):
        with pytest.raises(ValidationError, match=words) as caught:
            design.clean_overrides(values)
        assert caught.value.field == field


def test_stored_changes_that_no_longer_validate_are_ignored(app):
    settings = current_design(db.session)
    merged = design.with_overrides(settings, {"colour": "#aa3300", "width": 9999, "font": "gone",
                                              "template": "Old"})
    assert merged.colour == "#aa3300" and merged.width == DEFAULT_WIDTH
    assert merged.font == settings.font


def test_a_built_in_cannot_change_and_an_owners_name_is_unique(app):
    mailing_list = MailingList(name="News")
    db.session.add(mailing_list)
    db.session.commit()
    draft = drafts.create_draft(db.session, list_id=mailing_list.id, subject="S", body="<p>B</p>")
    draft.body_format, draft.editor = "html", "rich"
    db.session.commit()
    saved = templates.save_as_template(db.session, draft.id, name="Mine")
    assert (saved.body_format, saved.editor) == ("html", "rich")
    with pytest.raises(ValidationError, match="already a template named"):
        templates.save_as_template(db.session, draft.id, name="Announcement")
    with pytest.raises(Conflict, match="built-in templates cannot be changed"):
        templates.delete_template(db.session, "letter")  # type: ignore[arg-type]
    assert templates.find_template(db.session, "letter").built_in
    assert templates.find_template(db.session, str(saved.id)).name == "Mine"
    assert db.session.query(MessageTemplate).count() == 1
