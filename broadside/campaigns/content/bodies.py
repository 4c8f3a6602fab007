"""The body of a broadcast, an automation step or a transactional template, as the renderer
takes it: every freeze (Send, a draft's preview, a test send, a step's or template's save) reads
it here, so all of them read the same thing.

Block references (`[[block: Name]]`, broadside/campaigns/content/blocks.py) are expanded here,
before anything freezes: a draft's preview, test send, the send page's checks and Send see the
blocks as they are now, and the frozen revision keeps the expanded body, so a block edited
after the send changes nothing that was sent (invariant 8). A missing block is a
ValidationError naming it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypedDict

from sqlalchemy.orm import Session

from broadside.campaigns.content.blocks import expand
from broadside.core.errors import ValidationError


class WrittenSource(Protocol):
    """A broadcast, an automation step or a transactional template."""

    body: str
    body_format: str
    text_body: str | None
    attachment_ids: list[int] | None


class FreezeArguments(TypedDict):
    body_markdown: str
    body_format: str
    text_body: str | None


@dataclass(frozen=True)
class WrittenBody:
    body: str  # as written, in `body_format`
    body_format: str  # "markdown" or "html"
    text_body: str | None  # the plain-text part as written; None: made from the body
    attachment_ids: tuple[int, ...]

    def freeze_arguments(self) -> FreezeArguments:
        """The keyword arguments `freeze_content` takes for the body."""
        return {"body_markdown": self.body, "body_format": self.body_format,
                "text_body": self.text_body}


def body_of(session: Session, source: WrittenSource) -> WrittenBody:
    """What freezing `source` now reads: its body with its blocks in."""
    expanded = expand(session, source.body or "", source.body_format or "markdown",
                      source.text_body)
    return WrittenBody(body=expanded.body, body_format=expanded.body_format,
                       text_body=expanded.text_body,
                       attachment_ids=tuple(source.attachment_ids or ()))


def checked_body_of(session: Session, source: WrittenSource) -> WrittenBody:
    """`body_of` for the merge checks: the body as written when a block it names is missing
    (Send's own checks and every freeze say so, naming the block), so the report of the
    fields still reads the rest."""
    try:
        return body_of(session, source)
    except ValidationError:
        return WrittenBody(body=source.body or "", body_format=source.body_format or "markdown",
                           text_body=source.text_body,
                           attachment_ids=tuple(source.attachment_ids or ()))
