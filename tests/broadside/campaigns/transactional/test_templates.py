"""Transactional templates: saved with a frozen revision, a new one only when what they send
changes (a template edit, or Settings -> Design), names unique among the live ones, input
refused field by field."""

from __future__ import annotations

import pytest

from broadside.campaigns.transactional.templates import (
    create_template,
    current_revision,
    delete_template,
    find_template,
    newest_revision,
    parse_template,
    update_template,
)
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.models import TransactionalTemplateRevision
from broadside.core.site_settings import get_settings

FROM = "Broadside <news@example.com>"
RESET = {"name": "Password reset", "subject": "Your reset link",
         "body": "Hello {{ name }}, your link: {{ data.link }}", "essential": True}


def _revisions(db_session) -> int:
    return db_session.query(TransactionalTemplateRevision).count()


def test_a_template_is_frozen_once_and_again_only_when_what_it_sends_changes(db_session):
    template = create_template(db_session, parse_template(db_session, RESET), default_from=FROM)
    first = newest_revision(db_session, template.id)
    assert first is not None and first.essential and "{{ data.link }}" in first.text_template
    assert "Unsubscribe" not in first.text_template  # a reset is nobody's subscription
    assert current_revision(db_session, template, FROM).id == first.id
    db_session.commit()
    update_template(db_session, template.id, parse_template(db_session, RESET), default_from=FROM)
    assert _revisions(db_session) == 1  # saved unchanged: nothing new to freeze
    get_settings(db_session).brand_colour = "#aa3300"
    db_session.commit()
    assert current_revision(db_session, template, FROM).id != first.id  # the design changed
    db_session.commit()
    edited = {**RESET, "subject": "Reset your password"}
    update_template(db_session, template.id, parse_template(db_session, edited), default_from=FROM)
    newest = newest_revision(db_session, template.id)
    assert newest is not None and newest.subject == "Reset your password"
    assert db_session.get(TransactionalTemplateRevision, first.id).subject == "Your reset link"


def test_names_are_unique_among_live_templates_and_a_deleted_one_frees_its_name(db_session):
    template = create_template(db_session, parse_template(db_session, RESET), default_from=FROM)
    with pytest.raises(Conflict) as taken:
        create_template(db_session, parse_template(db_session, RESET), default_from=FROM)
    assert taken.value.field == "name"
    assert find_template(db_session, "Password reset").id == template.id
    assert find_template(db_session, template.id).id == template.id
    delete_template(db_session, template.id)
    with pytest.raises(NotFound):
        find_template(db_session, "Password reset")
    with pytest.raises(NotFound):
        delete_template(db_session, template.id)
    again = create_template(db_session, parse_template(db_session, RESET), default_from=FROM)
    assert again.id != template.id
    assert newest_revision(db_session, template.id) is not None  # its revisions stay


@pytest.mark.parametrize(("data", "field"), [
    ({**RESET, "name": "  "}, "name"),
    ({**RESET, "name": "a\nb"}, "name"),
    ({**RESET, "subject": 3}, "subject"),
    ({**RESET, "body": ""}, "body"),
    ({**RESET, "essential": "yes"}, "essential"),
    ({**RESET, "identity_id": 99999}, "identity_id"),
    ({**RESET, "colour": "red"}, "colour"),
])
def test_each_refusal_names_its_field(db_session, data, field):
    with pytest.raises(ValidationError) as refused:
        parse_template(db_session, data)
    assert refused.value.field == field


def test_a_broken_merge_field_is_refused_at_save_naming_where(db_session):
    broken = {**RESET, "body": "Hello {{ name "}
    with pytest.raises(ValidationError) as refused:
        create_template(db_session, parse_template(db_session, broken), default_from=FROM)
    assert refused.value.field == "body"
    assert _revisions(db_session) == 0
