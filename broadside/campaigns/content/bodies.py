"""The body of a broadcast, an automation step or a transactional template, as the renderer
takes it: every freeze (Send, a draft's preview, a test send, a step's or template's save) reads
it here, so all of them read the same thing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.orm import Session


class WrittenSource(Protocol):
    """A broadcast, an automation step or a transactional template."""

    body: str
    body_format: str
    text_body: str | None
    attachment_ids: list[int] | None


@dataclass(frozen=True)
class WrittenBody:
    body: str  # as written, in `body_format`
    body_format: str  # "markdown" or "html"
    text_body: str | None  # the plain-text part as written; None: made from the body
    attachment_ids: tuple[int, ...]

    def freeze_arguments(self) -> dict[str, object]:
        """The keyword arguments `freeze_content` takes for the body."""
        return {"body_markdown": self.body, "body_format": self.body_format,
                "text_body": self.text_body}


def body_of(session: Session, source: WrittenSource) -> WrittenBody:
    """What freezing `source` now reads."""
    return WrittenBody(body=source.body or "", body_format=source.body_format or "markdown",
                       text_body=source.text_body,
                       attachment_ids=tuple(source.attachment_ids or ()))
