"""The body editor's mode switch asks here (static/editor.js): the body in another compose mode,
and what the move would lose, said in words before anything changes. Nothing is saved: the
page's own autosave or Save stores the converted body (see broadside/mail/html_markdown.py).

POST /compose/convert (form fields `body`, `from`, `to`: markdown, rich or html) ->
200 {"body", "lost": ["tables", ...], "warning": sentence or null}; 422 {"error"}.
"""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from broadside.campaigns.broadcasts.drafts import MAX_BODY
from broadside.core import roles
from broadside.core.errors import ValidationError
from broadside.mail.body_formats import check_editor
from broadside.mail.html_markdown import (
    html_to_markdown,
    lost_in_markdown,
    lost_in_rich,
    markdown_to_html,
)
from webapp.compose.languages import install
from webapp.permissions import defaults

bp = Blueprint("compose", __name__, url_prefix="/compose")
defaults(bp, read=roles.VIEW, change=roles.WRITE)
install(bp)  # language names for the versions of a message, on every page

NAMES = {"markdown": "Markdown", "rich": "Rich text", "html": "HTML"}


def converted(body: str, source: str, target: str) -> tuple[str, list[str]]:
    """(the body in `target`'s mode, what it loses on the way)."""
    if source == target:
        return body, []
    if source == "markdown":
        return markdown_to_html(body), []
    if target == "markdown":
        markdown = html_to_markdown(body)
        return markdown, lost_in_markdown(body, markdown)
    # Between rich text and HTML the HTML is kept; the rich-text editor drops what it lacks.
    return body, lost_in_rich(body) if target == "rich" else []


def warning(lost: list[str], target: str) -> str | None:
    if not lost:
        return None
    listed = ", ".join(lost[:-1]) + (" and " if len(lost) > 1 else "") + lost[-1]
    return (f"{NAMES[target]} cannot hold {listed}: switching removes them from this body. "
            "Keep the current mode to keep them.")


@bp.post("/convert")
def convert():
    try:
        source = check_editor(request.form.get("from"), "from")
        target = check_editor(request.form.get("to"), "to")
        body = request.form.get("body", "")
        if len(body) > MAX_BODY:
            raise ValidationError(f"The body is too long to convert ({len(body):,} of "
                                  f"{MAX_BODY:,} characters).", field="body")
    except ValidationError as exc:
        return jsonify(error=exc.message, field=exc.field), 422
    result, lost = converted(body.replace("\r\n", "\n"), source, target)
    return jsonify(body=result, lost=lost, warning=warning(lost, target))
