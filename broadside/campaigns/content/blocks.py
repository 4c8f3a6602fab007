"""Reusable blocks (a header, a sign-off, a sponsor box), named in a body by reference and
expanded each time the body is read to be frozen (`bodies.body_of`).

The reference is a line `[[block: Sign-off]]`. Why this syntax: merge fields use Jinja's
`{{ … }}` and `{% … %}`, so anything brace-shaped would be parsed (and refused) as a merge
field; double square brackets are plain text to Jinja, to Markdown (no link without `(…)` or
a definition after it), to the rich-text editor (which keeps text and only wraps it in a
`<div>`) and to HTML (nothing to escape), so the reference survives every way of writing a body
and switching between them. Block names are letters, digits, spaces and `- _ . '`, so nothing
in a name is ever escaped by an editor.

Formats: a block is written in Markdown or HTML, and expanded into a body of either:
- a Markdown block into a Markdown body, or an HTML block into an HTML body: as written;
- a Markdown block into an HTML body: the block rendered to HTML (merge fields kept);
- an HTML block into a Markdown body: the Markdown renderer escapes raw HTML, so the body is
  rendered to HTML first (its merge fields kept) and the block put in after; the frozen
  revision then says its body is HTML, which is what it is.

Invariants: a reference to a block that does not exist is a ValidationError naming it (the
preview, the send page's checks and Send say it; never an empty space); a block does not name
another block (refused when saved), so expansion is one pass; a block named by a draft, a
scheduled broadcast, a live automation's step or a transactional template cannot be deleted.
"""

from __future__ import annotations

import html
import re
import secrets
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _, ngettext
from broadside.core.models import (
    Automation,
    AutomationStep,
    Broadcast,
    ContentBlock,
    TransactionalTemplate,
)
from broadside.core.models.content import MAX_BLOCK_NAME
from broadside.core.timeutil import utcnow
from broadside.mail.merge_fields import Placeholders, check_merge_fields, split_merge_fields
from broadside.mail.plain_text import html_to_text
from broadside.mail.rendering import BODY_FORMATS, markdown_to_safe_html

MAX_BLOCK_BODY = 100_000
# `[[block: Name]]`; in an HTML body a space may arrive as &nbsp; (the rich-text editor).
REFERENCE = re.compile(r"\[\[\s*block\s*:\s*([^\[\]<>\n]{1,200}?)\s*\]\]", re.IGNORECASE)
_NAME = re.compile(r"[\w][\w .'\-]*", re.UNICODE)
# A reference alone in a paragraph of an HTML body: the paragraph becomes the block.
_WRAPPED = re.compile(r"<(p|div)>\s*(\[\[[^\[\]<>\n]{1,220}\]\])\s*(?:<br>\s*)?</\1>",
                      re.IGNORECASE)
_ALONE_ON_LINE = re.compile(r"^[ \t]*(\[\[[^\[\]\n]{1,220}\]\])[ \t]*$", re.MULTILINE)


def reference(name: str) -> str:
    """How a body names the block called `name`."""
    return f"[[block: {name}]]"


def _key(name: str) -> str:
    """A name as references are matched: entities read, spaces folded, case ignored."""
    return " ".join(html.unescape(name).replace("\xa0", " ").split()).casefold()


def referenced_names(body: str) -> list[str]:
    """The names a body refers to, in order, each once (as written)."""
    seen: dict[str, str] = {}
    for match in REFERENCE.finditer(body or ""):
        seen.setdefault(_key(match.group(1)), " ".join(html.unescape(match.group(1)).split()))
    return list(seen.values())


# ---------------------------------------------------------------- expansion

def markdown_as_html(markdown: str) -> str:
    """Markdown to sanitised HTML with its merge fields kept as written (Markdown would
    otherwise escape their quotes and wrap `{% if %}` lines in paragraphs)."""
    check_merge_fields(markdown, "body")
    nonce = secrets.token_hex(5)
    while nonce in markdown:
        nonce = secrets.token_hex(5)
    placeholders = Placeholders(nonce)
    rendered = markdown_to_safe_html(split_merge_fields(markdown, placeholders))
    block_token = placeholders.pattern.pattern.replace("[vb]", "b")
    rendered = re.sub(rf"<p>\s*((?:{block_token}\s*)+)</p>", r"\1", rendered)
    return placeholders.pattern.sub(lambda m: placeholders.fields[m.group(0)], rendered)


@dataclass(frozen=True)
class Expanded:
    body: str
    body_format: str
    text_body: str | None


def _missing(name: str) -> ValidationError:
    return ValidationError(
        _("The body names the block “%(name)s”, and there is no block of that name. Create it "
          "(Templates → Blocks), or take %(reference)s out of the body.", name=name,
          reference=reference(name)), field="body")


def blocks_named(session: Session, names: list[str]) -> dict[str, ContentBlock]:
    """The blocks `names` refer to, by matching key; a missing one raises its message."""
    if not names:
        return {}
    found = {_key(block.name): block for block in session.scalars(select(ContentBlock))
             if _key(block.name) in {_key(n) for n in names}}
    for name in names:
        if _key(name) not in found:
            raise _missing(name)
    return found


def expand(session: Session, body: str, body_format: str, text_body: str | None) -> Expanded:
    """`body` (and the owner's plain-text part) with every block reference replaced by the
    block, converted to the body's format (see the module's docstring)."""
    names = referenced_names(body) + referenced_names(text_body or "")
    if not names:
        return Expanded(body, body_format, text_body)
    blocks = blocks_named(session, names)

    def html_of(block: ContentBlock) -> str:
        return block.body if block.body_format == "html" else markdown_as_html(block.body)

    def wrapped(match: re.Match[str]) -> str:
        inner = REFERENCE.fullmatch(match.group(2))
        block = blocks.get(_key(inner.group(1))) if inner else None
        return html_of(block) if block is not None else match.group(0)

    def bare(match: re.Match[str]) -> str:
        block = blocks.get(_key(match.group(1)))
        return html_of(block) if block is not None else match.group(0)

    in_body = {_key(n) for n in referenced_names(body)}
    if body_format == "markdown" and any(block.body_format == "html"
                                         for key, block in blocks.items() if key in in_body):
        body, body_format = markdown_as_html(_markdown_blocks_in(body, blocks)), "html"
    if body_format == "html":
        body = REFERENCE.sub(bare, _WRAPPED.sub(wrapped, body))
    else:
        body = _markdown_blocks_in(body, blocks)
    if text_body is not None:
        def as_text(match: re.Match[str]) -> str:
            block = blocks.get(_key(match.group(1)))
            if block is None:
                return match.group(0)
            return (html_to_text(block.body) if block.body_format == "html"
                    else block.body.strip("\n"))
        text_body = REFERENCE.sub(as_text, text_body)
    return Expanded(body, body_format, text_body)


def _markdown_blocks_in(body: str, blocks: dict[str, ContentBlock]) -> str:
    """A Markdown body with its Markdown blocks in: a reference alone on its line becomes the
    block's paragraphs (blank lines around, so it never joins the paragraph above)."""
    def alone(match: re.Match[str]) -> str:
        inner = REFERENCE.fullmatch(match.group(1))
        block = blocks.get(_key(inner.group(1))) if inner else None
        if block is None or block.body_format != "markdown":
            return match.group(0)
        return "\n" + block.body.strip("\n") + "\n"

    def inline(match: re.Match[str]) -> str:
        block = blocks.get(_key(match.group(1)))
        if block is None or block.body_format != "markdown":
            return match.group(0)
        return block.body.strip()
    return REFERENCE.sub(inline, _ALONE_ON_LINE.sub(alone, body))


# ---------------------------------------------------------------- the owner's blocks

def clean_name(value: object) -> str:
    name = " ".join(str(value or "").split())
    if not name:
        raise ValidationError(_("Give the block a name."), field="name")
    if len(name) > MAX_BLOCK_NAME:
        raise ValidationError(_("A block's name is at most %(limit)s characters.",
                                limit=MAX_BLOCK_NAME), field="name")
    if not _NAME.fullmatch(name):
        raise ValidationError(_("A block's name is letters, digits, spaces and - _ . ' (so a "
                                "reference to it reads the same in every editor)."), field="name")
    return name


def _clean_body(body: object, body_format: object) -> tuple[str, str]:
    if body_format not in BODY_FORMATS:
        raise ValidationError(_("A block is written in Markdown or HTML."), field="body_format")
    if not isinstance(body, str) or not body.strip():
        raise ValidationError(_("Write the block's content."), field="body")
    if len(body) > MAX_BLOCK_BODY:
        raise ValidationError(_("The block is too long (%(length)s of %(limit)s characters).",
                                length=len(body), limit=MAX_BLOCK_BODY), field="body")
    if REFERENCE.search(body):
        raise ValidationError(_("A block cannot name another block: write its content here."),
                              field="body")
    check_merge_fields(body, "block")
    return body, str(body_format)


def list_blocks(session: Session) -> list[ContentBlock]:
    return list(session.scalars(select(ContentBlock).order_by(ContentBlock.name)))


def get_block(session: Session, block_id: int) -> ContentBlock:
    block = session.get(ContentBlock, block_id)
    if block is None:
        raise NotFound(_("There is no such block."))
    return block


def _taken(session: Session, name: str, but: int | None = None) -> None:
    for other in session.scalars(select(ContentBlock)):
        if other.id != but and _key(other.name) == _key(name):
            raise ValidationError(_("There is already a block named “%(name)s”.",
                                    name=other.name), field="name")


def create_block(session: Session, *, name: object, body: object,
                 body_format: object = "markdown") -> ContentBlock:
    clean = clean_name(name)
    text, fmt = _clean_body(body, body_format)
    _taken(session, clean)
    block = ContentBlock(name=clean, body=text, body_format=fmt)
    session.add(block)
    try:
        session.commit()
    except IntegrityError:  # the same name saved meanwhile
        session.rollback()
        raise ValidationError(_("There is already a block named “%(name)s”.", name=clean),
                              field="name") from None
    return block


def update_block(session: Session, block_id: int, *, name: object, body: object,
                 body_format: object) -> ContentBlock:
    """Change a block. Drafts naming it show the change at their next preview or send; sent
    revisions keep the copy they were frozen with. A rename is refused while a body names the
    block by its old name (it would become a missing block there)."""
    block = get_block(session, block_id)
    clean = clean_name(name)
    text, fmt = _clean_body(body, body_format)
    if _key(clean) != _key(block.name):
        _taken(session, clean, but=block.id)
        users = where_used(session, block)
        if users:
            raise Conflict(_("“%(name)s” is named in %(uses)s; renaming it would leave those "
                             "references pointing at nothing. Keep the name, or change the "
                             "references first.", name=block.name, uses=_said(users)),
                           field="name")
    block.name, block.body, block.body_format, block.updated_at = clean, text, fmt, utcnow()
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise ValidationError(_("There is already a block named “%(name)s”.", name=clean),
                              field="name") from None
    return block


@dataclass(frozen=True)
class Use:
    """Somewhere a block is named: what kind of thing, its id, and how to say it."""

    kind: str  # "broadcast", "automation", "transactional"
    id: int
    label: str


def _names(body: str | None, text: str | None, key: str) -> bool:
    return any(_key(n) == key for n in referenced_names(body or "") +
               referenced_names(text or ""))


def where_used(session: Session, block: ContentBlock) -> list[Use]:
    """The drafts, scheduled broadcasts, live automations and transactional templates whose
    bodies name `block` (what deleting it would break). Bodies are searched by the name's
    words first in SQL, then matched exactly."""
    key = _key(block.name)
    like = "%" + block.name.split()[0].replace("%", "").replace("_", "") + "%"
    uses: list[Use] = []
    for b in session.scalars(select(Broadcast).where(
            Broadcast.status.in_(("draft", "scheduled")),
            Broadcast.body.ilike(like) | Broadcast.text_body.ilike(like))):
        if _names(b.body, b.text_body, key):
            subject = b.subject or _("no subject")
            uses.append(Use("broadcast", b.id, _("the draft “%(subject)s”", subject=subject)
                            if b.status == "draft" else
                            _("the scheduled “%(subject)s”", subject=subject)))
    for step, automation in session.execute(
            select(AutomationStep, Automation).join(Automation,
                                                    Automation.id == AutomationStep.automation_id)
            .where(Automation.status != "deleted", AutomationStep.removed_at.is_(None),
                   AutomationStep.body.ilike(like) | AutomationStep.text_body.ilike(like))):
        if _names(step.body, step.text_body, key):
            uses.append(Use("automation", automation.id,
                            _("step %(step)s of the automation “%(name)s”",
                              step=step.position, name=automation.name)))
    for t in session.scalars(select(TransactionalTemplate).where(
            TransactionalTemplate.deleted_at.is_(None),
            TransactionalTemplate.body.ilike(like) | TransactionalTemplate.text_body.ilike(like))):
        if _names(t.body, t.text_body, key):
            uses.append(Use("transactional", t.id,
                            _("the transactional template “%(name)s”", name=t.name)))
    return uses


def _said(uses: list[Use]) -> str:
    shown = [use.label for use in uses[:3]]
    if len(uses) > 3:
        return ngettext("%(names)s and %(num)s more", "%(names)s and %(num)s more",
                        len(uses) - 3, names=", ".join(shown))
    return ", ".join(shown)


def delete_block(session: Session, block_id: int) -> str:
    """Delete a block no draft, scheduled broadcast, live automation or transactional template
    names (Conflict saying where it is used otherwise). Returns its name. Sent revisions hold
    their own copy, so they do not count."""
    block = get_block(session, block_id)
    users = where_used(session, block)
    if users:
        raise Conflict(_("“%(name)s” is used by %(uses)s. Take the reference out of them first; "
                         "sent broadcasts keep their own copy and do not count.",
                         name=block.name, uses=_said(users)))
    name = block.name
    session.delete(block)
    session.commit()
    return name
