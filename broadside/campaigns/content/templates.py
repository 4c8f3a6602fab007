"""Templates: starting points for a broadcast. The built-in three (code, `builtin.py`) and the
owner's own (rows of `message_templates`), read through one shape, `Template`.

- "Save as template" copies a broadcast, draft or sent, as written: subject, preheader, body,
  its format and compose mode, its design changes.
- "New from template" copies a template into a new draft the same way; the draft's design
  changes say which template they came from (`design.source_of`). Nothing links the two
  afterwards: editing the template changes no draft (blocks are the way to share content that
  follows its edits).
- Built-ins cannot be renamed, changed or deleted. An owner's template can be renamed, its
  design changed (validated as Settings -> Design), or deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.campaigns.content.builtin import BUILT_INS, BY_KEY, BuiltIn
from broadside.campaigns.content.design import DESIGN_KEYS, clean_overrides, design_changes
from broadside.core.db import rowcount
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _
from broadside.core.models import Broadcast, MessageTemplate
from broadside.core.models.content import MAX_DESCRIPTION, MAX_TEMPLATE_NAME
from broadside.core.timeutil import utcnow

BUILT_IN_PREFIX = "builtin:"


@dataclass(frozen=True)
class Template:
    """A template as the pages and the API show it, built-in or the owner's."""

    ref: str  # "builtin:newsletter" or the owner's template's id, as text (a form's value)
    id: int | str  # the API's id: the built-in's key, or the row's number
    name: str
    description: str
    subject: str
    preheader: str
    body: str
    body_format: str
    editor: str
    design_overrides: dict[str, Any] | None
    built_in: bool
    created_at: datetime | None = None
    updated_at: datetime | None = None


def _of_builtin(b: BuiltIn) -> Template:
    return Template(ref=BUILT_IN_PREFIX + b.key, id=b.key, name=_(b.name),
                    description=_(b.description), subject=b.subject, preheader=b.preheader,
                    body=b.body, body_format=b.body_format, editor=b.editor,
                    design_overrides=None, built_in=True)


def _of_row(row: MessageTemplate) -> Template:
    return Template(ref=str(row.id), id=row.id, name=row.name, description=row.description,
                    subject=row.subject, preheader=row.preheader, body=row.body,
                    body_format=row.body_format, editor=row.editor,
                    design_overrides=row.design_overrides, built_in=False,
                    created_at=row.created_at, updated_at=row.updated_at)


def all_templates(session: Session) -> list[Template]:
    """The built-ins first, then the owner's by name."""
    rows = session.scalars(select(MessageTemplate).order_by(MessageTemplate.name))
    return [_of_builtin(b) for b in BUILT_INS] + [_of_row(row) for row in rows]


def find_template(session: Session, ref: object) -> Template:
    """A template by its form value ("builtin:letter", "7"), its API id (7, "letter")."""
    if isinstance(ref, str):
        key = ref.removeprefix(BUILT_IN_PREFIX)
        if key in BY_KEY:
            return _of_builtin(BY_KEY[key])
        if ref.isascii() and ref.isdigit() and len(ref) <= 10:
            ref = int(ref)
    # Beyond a 32-bit id PostgreSQL raises instead of finding none.
    if isinstance(ref, int) and not isinstance(ref, bool) and 1 <= ref <= 2**31 - 1:
        row = session.get(MessageTemplate, ref)
        if row is not None:
            return _of_row(row)
    raise NotFound(_("There is no such template."))


def _row(session: Session, template_id: int) -> MessageTemplate:
    if str(template_id) in {b.key for b in BUILT_INS}:
        raise Conflict(_("The built-in templates cannot be changed or deleted. Start a broadcast "
                         "from one and save it as a template of your own."))
    row = session.get(MessageTemplate, template_id)
    if row is None:
        raise NotFound(_("There is no such template."))
    return row


def _clean_name(session: Session, name: object, but: int | None = None) -> str:
    clean = " ".join(str(name or "").split())
    if not clean:
        raise ValidationError(_("Give the template a name."), field="name")
    if len(clean) > MAX_TEMPLATE_NAME:
        raise ValidationError(_("A template's name is at most %(limit)s characters.",
                                limit=MAX_TEMPLATE_NAME), field="name")
    if clean.casefold() in {b.name.casefold() for b in BUILT_INS} or session.scalar(
            select(MessageTemplate.id).where(MessageTemplate.name == clean,
                                             MessageTemplate.id != (but or 0))):
        raise ValidationError(_("There is already a template named “%(name)s”.", name=clean),
                              field="name")
    return clean


def _clean_description(value: object) -> str:
    text = " ".join(str(value or "").split())
    if len(text) > MAX_DESCRIPTION:
        raise ValidationError(_("The description is at most %(limit)s characters.",
                                limit=MAX_DESCRIPTION), field="description")
    return text


def _commit_named(session: Session, name: str) -> None:
    try:
        session.commit()
    except IntegrityError:  # the same name saved meanwhile
        session.rollback()
        raise ValidationError(_("There is already a template named “%(name)s”.", name=name),
                              field="name") from None


def save_as_template(session: Session, broadcast_id: int, *, name: object,
                     description: object = "", created_by: int | None = None) -> MessageTemplate:
    """A new template copied from a broadcast, draft or sent (as written, with its design
    changes but not where they came from)."""
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is None:
        raise NotFound(_("There is no such broadcast."))
    clean = _clean_name(session, name)
    changes = design_changes(broadcast.design_overrides)
    row = MessageTemplate(name=clean, description=_clean_description(description),
                          subject=broadcast.subject, preheader=broadcast.preheader,
                          body=broadcast.body, body_format=broadcast.body_format or "markdown",
                          editor=broadcast.editor or "markdown",
                          design_overrides=changes or None, created_by=created_by)
    session.add(row)
    _commit_named(session, clean)
    return row


def draft_values(template: Template) -> dict[str, Any]:
    """What a new draft takes from `template` (the Broadcast's columns)."""
    changes = design_changes(template.design_overrides)
    overrides = ({**changes, "template_id": template.id, "template": template.name}
                 if changes else None)
    return {"subject": template.subject, "preheader": template.preheader,
            "body": template.body, "body_format": template.body_format,
            "editor": template.editor, "design_overrides": overrides}


def apply_template(session: Session, broadcast_id: int, ref: object) -> Broadcast:
    """Fill a draft from a template ("new from template": the draft was just made). One UPDATE
    guarded by the draft state, as every draft edit is (invariant 8)."""
    template = find_template(session, ref)
    result = session.execute(
        update(Broadcast).where(Broadcast.id == broadcast_id, Broadcast.status == "draft")
        .values(**draft_values(template), updated_at=utcnow()))
    if rowcount(result) == 0:
        session.rollback()
        raise Conflict(_("Only a draft can start from a template."))
    session.commit()
    broadcast = session.get(Broadcast, broadcast_id)
    assert broadcast is not None
    session.refresh(broadcast)
    return broadcast


def reset_design(session: Session, broadcast_id: int) -> None:
    """A draft takes Settings' design again (its template's changes dropped)."""
    result = session.execute(
        update(Broadcast).where(Broadcast.id == broadcast_id, Broadcast.status == "draft")
        .values(design_overrides=None, updated_at=utcnow()))
    if rowcount(result) == 0:
        session.rollback()
        raise Conflict(_("Only a draft's design can change."))
    session.commit()


def update_template(session: Session, template_id: int, *, name: object, description: object,
                    design: dict[str, object]) -> MessageTemplate:
    """Rename an owner's template, change its description and design (colour, width, font,
    footer text: each empty leaves Settings' value). Drafts started from it keep theirs."""
    row = _row(session, template_id)
    clean = _clean_name(session, name, but=row.id)
    row.name, row.description = clean, _clean_description(description)
    row.design_overrides = clean_overrides({k: design.get(k) for k in DESIGN_KEYS})
    row.updated_at = utcnow()
    _commit_named(session, clean)
    return row


def delete_template(session: Session, template_id: int) -> str:
    """Delete an owner's template (drafts started from it are copies: they stay as they are).
    Returns its name."""
    row = _row(session, template_id)
    name = row.name
    session.delete(row)
    session.commit()
    return name
