"""The test-send forms' "Fill merge fields from" field (a broadcast's and each automation
step's, `templates/broadcasts/_test_fill.html`): its suggestions, the audience's newest few,
read only when a template asks; and the htmx answer to a test send, which carries the field
again out of band so a refusal about it shows under it.

Whose details are used is the domain's (`broadside.campaigns.broadcasts.merge_person`)."""

from __future__ import annotations

from typing import Any

from flask import render_template

from broadside.campaigns.broadcasts import merge_person
from broadside.core.errors import DomainError
from broadside.delivery.transactional import QueuedTest
from webapp.extensions import db


def suggestions(list_id: int | None, segment_id: int | None) -> list[merge_person.MergePerson]:
    return merge_person.newest(db.session, list_id=list_id, segment_id=segment_id,
                               limit=merge_person.SUGGESTIONS)


def template_helpers() -> dict[str, Any]:
    """`test_fill_people(list_id, segment_id)` for the templates (an app context processor)."""
    return {"test_fill_people": suggestions}


def answer(*, error: DomainError | None, address: str, test: QueuedTest | None,
           person: merge_person.MergePerson | None, status_id: str, fill_id: str,
           fill_typed: str, list_id: int | None, segment_id: int | None) -> str:
    """The htmx answer to a test send: its status line (saying whose details filled it),
    and the field out of band, with the refusal under it when it is about that field (then
    the status line stays empty rather than saying it twice)."""
    about_fill = error is not None and error.field == merge_person.FIELD
    status = render_template(
        "broadcasts/_test_status.html", error=None if about_fill or error is None else error.message,
        address="" if about_fill else address, test=test, status_id=status_id,
        filled=person.words if person else None)
    field = render_template(
        "broadcasts/_test_fill.html", fill_id=fill_id, fill_oob=True, fill_typed=fill_typed,
        fill_people=suggestions(list_id, segment_id),
        fill_error=error.message if about_fill and error is not None else None)
    return status + field
