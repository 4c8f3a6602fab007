"""Transactional templates: what the owner edits, and the frozen revision a message is sent from.

A template is a name, a subject and a Markdown body with merge fields (`{{ email }}`,
`{{ name }}`, `{{ attributes.city }}` of a known subscriber, and `{{ data.anything }}` from
the API request), the identity it goes out through and whether it is *essential* (may reach
someone who left the newsletters: a password reset; never a suppressed address).

Invariant 8: a message is always rendered from a `TransactionalTemplateRevision`, never from
the template. `current_revision` freezes the template with the sender, postal address and
design in force at that moment and returns the newest revision when it carries exactly that
(no new row), else writes a new one; so a change of the template, of Settings -> Design or of
its identity reaches the next message, and every message keeps the revision it was sent from.
A template is never deleted, only marked so: its revisions, and the messages that point at
them, stay; its name is free again (a partial UNIQUE index over the live ones).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from babel.numbers import format_decimal
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.drafts import MAX_BODY, MAX_SUBJECT
from broadside.campaigns.broadcasts.service import sender_of
from broadside.campaigns.content.bodies import WrittenBody, body_of
from broadside.core.db import rowcount
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _, current_locale
from broadside.core.models import TransactionalTemplate, TransactionalTemplateRevision
from broadside.core.models.transactional import MAX_TEMPLATE_NAME
from broadside.core.timeutil import utcnow
from broadside.delivery.identities.service import MAX_ID, check_choice
from broadside.mail.attachment_use import checked_ids
from broadside.mail.body_formats import (
    DEFAULT_FORMAT,
    check_format,
    editor_for,
    written_as,
    written_format,
)
from broadside.mail.design import sending_design
from broadside.mail.rendering import EmailDesign, FrozenContent, freeze_content
from broadside.mail.text_part import clean_text_body

FIELDS = ("name", "subject", "body", "format", "text", "identity_id", "essential", "attachments")
REQUIRED = ("name", "subject", "body")
FROZEN = ("subject", "body_markdown", "body_format", "attachment_ids", "html_template",
          "text_template", "from_name", "from_email", "postal_address", "identity_id",
          "essential")


@dataclass(frozen=True)
class TemplateInput:
    name: str
    subject: str
    body: str
    identity_id: int | None = None
    essential: bool = False
    attachment_ids: tuple[int, ...] = ()
    body_format: str = "markdown"
    editor: str | None = None  # the compose mode; None: the one it was written in, if it fits
    text_body: str | None = None  # the plain-text part as written; None: made from the body


def parse_template(session: Session, data: Mapping[str, Any], *, editor: str | None = None
                   ) -> TemplateInput:
    """A template's fields from the API's JSON or the page's form (already a dict of the
    right types: the form turns its checkbox into a bool and its select into an int or None;
    its compose mode is `editor`). POST and PUT take the same body; a field left out takes its
    default. Every refusal names its field."""
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ValidationError(f"Unknown field {unknown[0]!r}: a template has name, subject, "
                              "body, format, text, identity_id, essential and attachments.",
                              field=unknown[0])
    if editor is not None:  # the page: its compose mode says the format
        body_format, editor = written_format(editor=editor)
    else:
        body_format = check_format(data.get("format", DEFAULT_FORMAT))
    for name in REQUIRED:
        value = data.get(name)
        if not isinstance(value, str):
            raise ValidationError(_("The template's %(field)s must be text.", field=name),
                                  field=name)
    name = data["name"].strip()
    if not name:
        raise ValidationError(_("Give the template a name."), field="name")
    if len(name) > MAX_TEMPLATE_NAME or any(ch in name for ch in "\r\n\t"):
        raise ValidationError(_("A template's name is one line of at most %(limit)s characters.",
                                limit=MAX_TEMPLATE_NAME), field="name")
    subject = data["subject"].strip()
    if not subject:
        raise ValidationError(_("Give the template a subject."), field="subject")
    if len(subject) > MAX_SUBJECT:
        raise ValidationError(_("The subject is at most %(limit)s characters.", limit=MAX_SUBJECT),
                              field="subject")
    body = data["body"]
    if not body.strip():
        raise ValidationError(_("Write the template's body."), field="body")
    if len(body) > MAX_BODY:
        raise ValidationError(_("The body is at most %(limit)s characters.",
                                limit=format_decimal(MAX_BODY, locale=current_locale())),
                              field="body")
    essential = data.get("essential", False)
    if not isinstance(essential, bool):
        raise ValidationError("essential must be true or false.", field="essential")
    try:
        identity_id = check_choice(session, data.get("identity_id"))
    except ValidationError as exc:
        raise ValidationError(exc.message, field="identity_id") from None
    attachments = checked_ids(session, data.get("attachments", []))
    return TemplateInput(name=name, subject=subject, body=written_as(body, body_format),
                         identity_id=identity_id, essential=essential, body_format=body_format,
                         editor=editor, attachment_ids=tuple(attachments),
                         text_body=clean_text_body(data.get("text")))


def list_templates(session: Session) -> list[TransactionalTemplate]:
    """The live templates, by name."""
    return list(session.scalars(select(TransactionalTemplate)
                                .where(TransactionalTemplate.deleted_at.is_(None))
                                .order_by(TransactionalTemplate.name, TransactionalTemplate.id)))


def get_template(session: Session, template_id: int) -> TransactionalTemplate:
    template = session.get(TransactionalTemplate, template_id)
    if template is None or template.deleted_at is not None:
        raise NotFound(_("There is no transactional template %(id)s.", id=template_id))
    return template


def find_template(session: Session, ref: object) -> TransactionalTemplate:
    """A live template by its id (a number) or its name (text), as `POST /api/transactional`
    names it."""
    if isinstance(ref, int) and not isinstance(ref, bool):
        if not 1 <= ref <= MAX_ID:  # beyond a 32-bit id PostgreSQL raises instead of finding none
            raise NotFound(f"There is no transactional template {ref}.", field="template")
        return get_template(session, ref)
    if isinstance(ref, str) and ref.strip():
        found = session.scalar(select(TransactionalTemplate).where(
            TransactionalTemplate.name == ref.strip(), TransactionalTemplate.deleted_at.is_(None)))
        if found is None:
            raise NotFound(f"There is no transactional template named {ref.strip()!r}.",
                           field="template")
        return found
    raise ValidationError("template must be a template's name or id.", field="template")


def newest_revision(session: Session, template_id: int) -> TransactionalTemplateRevision | None:
    return session.scalar(select(TransactionalTemplateRevision)
                          .where(TransactionalTemplateRevision.template_id == template_id)
                          .order_by(TransactionalTemplateRevision.id.desc()).limit(1))


@functools.lru_cache(maxsize=64)
def _frozen(subject: str, written: WrittenBody, from_name: str, from_email: str, postal: str,
            design: EmailDesign) -> FrozenContent:
    """The layout frozen from these values, computed once per process: the same values
    always freeze to the same text (invariant 8), and `current_revision` freezes on every API
    request to compare (about 40 ms of Markdown, sanitising and CSS inlining each time)."""
    return freeze_content(subject=subject, preheader="", **written.freeze_arguments(),
                          from_name=from_name,
                          from_email=from_email, postal_address=postal, design=design,
                          newsletter=False)


def frozen_revision(session: Session, template: TransactionalTemplate,
                    default_from: str) -> TransactionalTemplateRevision:
    """The template frozen with the sender, postal address and design in force now: a new
    revision, not added to the session. ValidationError (a merge-field mistake, naming the
    line) with the field it is in."""
    from_name, from_email, postal = sender_of(session, template.identity_id, default_from)
    try:
        written = body_of(session, template)
        frozen = _frozen(template.subject, written, from_name, from_email, postal,
                         sending_design(session, from_name))
    except ValidationError as exc:
        field = ("text" if "plain-text part" in exc.message else
                 "subject" if "subject" in exc.message.lower() else "body")
        raise ValidationError(exc.message, field=field) from None
    return TransactionalTemplateRevision(
        template_id=template.id, subject=template.subject, preheader="",
        body_markdown=written.body, body_format=written.body_format,
        attachment_ids=list(written.attachment_ids) or None, html_template=frozen.html_template,
        text_template=frozen.text_template, from_name=from_name, from_email=from_email,
        postal_address=postal, identity_id=template.identity_id, essential=template.essential)


def current_revision(session: Session, template: TransactionalTemplate,
                     default_from: str) -> TransactionalTemplateRevision:
    """The revision a message sent now is rendered from (invariant 8): the newest, when it
    carries exactly what freezing the template now would; else a new one, flushed, in the
    caller's transaction."""
    new = frozen_revision(session, template, default_from)
    newest = newest_revision(session, template.id)
    if newest is not None and all(getattr(new, f) == getattr(newest, f) for f in FROZEN):
        return newest
    session.add(new)
    session.flush()
    return new


def _name_taken(name: str) -> Conflict:
    return Conflict(_("A transactional template named %(name)s already exists.", name=repr(name)),
                    field="name")


def create_template(session: Session, data: TemplateInput, *,
                    default_from: str) -> TransactionalTemplate:
    """A new template and its first revision, committed together."""
    template = TransactionalTemplate(name=data.name, subject=data.subject, body=data.body,
                                     identity_id=data.identity_id, essential=data.essential,
                                     attachment_ids=list(data.attachment_ids) or None,
                                     body_format=data.body_format,
                                     editor=data.editor or editor_for(data.body_format),
                                     text_body=data.text_body)
    try:
        session.add(template)
        session.flush()
        current_revision(session, template, default_from)
        session.commit()
    except IntegrityError:
        session.rollback()
        raise _name_taken(data.name) from None
    except ValidationError:
        session.rollback()
        raise
    return template


def update_template(session: Session, template_id: int, data: TemplateInput, *,
                    default_from: str) -> TransactionalTemplate:
    """Replace a live template's fields (one UPDATE guarded on its not being deleted) and
    freeze a new revision when what it sends changed, committed together."""
    editor = data.editor or editor_for(data.body_format)
    try:
        changed = rowcount(session.execute(
            update(TransactionalTemplate)
            .where(TransactionalTemplate.id == template_id,
                   TransactionalTemplate.deleted_at.is_(None))
            .values(name=data.name, subject=data.subject, body=data.body,
                    body_format=data.body_format, editor=editor,
                    identity_id=data.identity_id, essential=data.essential,
                    attachment_ids=list(data.attachment_ids) or None,
                    text_body=data.text_body, updated_at=utcnow())
            .execution_options(synchronize_session=False)))
    except IntegrityError:
        session.rollback()
        raise _name_taken(data.name) from None
    if not changed:
        session.rollback()
        raise NotFound(_("There is no transactional template %(id)s.", id=template_id))
    template = session.get(TransactionalTemplate, template_id)
    assert template is not None
    session.refresh(template)
    try:
        current_revision(session, template, default_from)
    except ValidationError:
        session.rollback()
        raise
    session.commit()
    return template


def delete_template(session: Session, template_id: int) -> None:
    """Mark a live template deleted (its revisions and messages stay); NotFound if it is
    not live."""
    deleted = rowcount(session.execute(
        update(TransactionalTemplate)
        .where(TransactionalTemplate.id == template_id,
               TransactionalTemplate.deleted_at.is_(None))
        .values(deleted_at=utcnow())
        .execution_options(synchronize_session=False)))
    if not deleted:
        session.rollback()
        raise NotFound(_("There is no transactional template %(id)s.", id=template_id))
    session.commit()


def template_json(template: TransactionalTemplate) -> dict[str, Any]:
    """A template as the API shows it."""
    return {"id": template.id, "name": template.name, "subject": template.subject,
            "body": template.body, "format": template.body_format, "text": template.text_body,
            "identity_id": template.identity_id,
            "essential": template.essential,
            "attachments": list(template.attachment_ids or []),
            "created_at": template.created_at.isoformat() + "Z",
            "updated_at": template.updated_at.isoformat() + "Z"}
