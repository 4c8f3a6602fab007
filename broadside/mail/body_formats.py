"""How a body is written: its format (what the renderer reads) and the compose mode the owner
last chose (what the editor opens in), checked the one way the pages and the API use.

    editor "markdown" -> body_format "markdown"
    editor "rich"     -> body_format "html" (the rich-text editor saves HTML)
    editor "html"     -> body_format "html" (the owner's own HTML)

An HTML body is stored as `written_as` leaves it: inside each merge field (`{{ name }}`,
`{% if attributes.vip %}`) the HTML entities an editor writes (`&quot;`, `&gt;`, `&nbsp;`) are
read back to the characters the owner typed, and inline formatting laid over a field (a bold
`name`) is taken off it. So the merge checks, the merge report and the renderer all read one
text, the text the owner meant; a field that straddles a block (a paragraph's end) is left as
it is, and the checks name it.
"""

from __future__ import annotations

import html
import re
from typing import Any

from broadside.core.errors import ValidationError
from broadside.mail.rendering import BODY_FORMATS

EDITORS = {"markdown": "markdown", "rich": "html", "html": "html"}
DEFAULT_FORMAT = "markdown"

# A merge field, never across another field's opener or closer; at most 2,000 characters, so
# a stray `{{` cannot reach across a whole body.
_FIELD = re.compile(r"\{\{(?:(?!\{\{|\{%|\}\}|%\}).){0,2000}?\}\}|"
                    r"\{%(?:(?!\{\{|\{%|\}\}|%\}).){0,2000}?%\}", re.S)
_INLINE_TAG = re.compile(r"</?(?:strong|b|em|i|u|s|del|span|font|code|small|big|sub|sup)\b"
                         r"[^<>]*>", re.I)
_ANY_TAG = re.compile(r"<[^<>]*>")


def check_format(value: Any, field: str = "format") -> str:
    """`value` as a body format; a ValidationError naming `field` otherwise."""
    if value not in BODY_FORMATS:
        raise ValidationError(f"'{field}' must be \"markdown\" or \"html\" (how the body is "
                              "written).", field=field)
    return str(value)


def check_editor(value: Any, field: str = "editor") -> str:
    if value not in EDITORS:
        raise ValidationError("Choose how to write the body: Markdown, Rich text or HTML.",
                              field=field)
    return str(value)


def format_of(editor: str) -> str:
    """The body format a compose mode saves."""
    return EDITORS[check_editor(editor)]


def editor_for(body_format: str) -> str:
    """The compose mode to open a body in when only its format was given (the API): Markdown in
    Markdown; HTML in the HTML mode, never straight in the rich-text editor, which would drop
    what it cannot hold (tables, styles) on its next save unasked."""
    return "markdown" if body_format == "markdown" else "html"


def _tidy_field(match: re.Match[str]) -> str:
    field = match.group(0)
    if "<" not in field and "&" not in field and "\xa0" not in field:
        return field
    inner = _INLINE_TAG.sub("", field)
    if _ANY_TAG.search(inner):
        return field  # a field across a block or a line break: the checks name it
    return html.unescape(inner).replace("\xa0", " ")


def written_as(body: str, body_format: str) -> str:
    """The body as stored: a Markdown body as it is; an HTML body with its merge fields as
    typed (see the module)."""
    if body_format == "html" and "{" in body:
        return _FIELD.sub(_tidy_field, body)
    return body


def written_format(*, body_format: str | None = None, editor: str | None = None,
                   current_format: str | None = None, current_editor: str | None = None
                   ) -> tuple[str, str]:
    """(body_format, editor) to store: a compose mode given (the pages) decides the format; a
    format given alone (the API) keeps the mode it was written in when that mode saves it;
    neither: as it was (a new body: Markdown)."""
    if editor is not None:
        mode = check_editor(editor)
        if body_format is not None and check_format(body_format) != EDITORS[mode]:
            raise ValidationError(f"'format' {body_format!r} is not what the {mode} editor "
                                  "saves.", field="format")
        return EDITORS[mode], mode
    if body_format is not None:
        chosen = check_format(body_format)
        return chosen, editor_for(chosen)
    fmt = str(current_format if current_format in BODY_FORMATS else DEFAULT_FORMAT)
    if current_editor in EDITORS and EDITORS[str(current_editor)] == fmt:
        return fmt, str(current_editor)
    return fmt, editor_for(fmt)
