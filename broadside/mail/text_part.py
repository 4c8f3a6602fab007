"""The plain-text part an owner sees before writing their own: the text the renderer makes from
the body (broadside.mail.rendering.freeze_layout, without the footer it adds to either), with
the merge fields as the owner wrote them, so "Write my own" can start from it.

An owner's own text (`text_body` on a broadcast, a step or a template; None: automatic) is
cleaned here too: line endings made one, and text of nothing but spaces means automatic.
"""

from __future__ import annotations

import secrets

from broadside.core.errors import ValidationError
from broadside.mail.merge_fields import Placeholders, check_merge_fields, split_merge_fields
from broadside.mail.plain_text import html_to_text
from broadside.mail.rendering import body_to_safe_html

MAX_TEXT_BODY = 200_000  # characters, as a body


def automatic_text(body: str, body_format: str = "markdown") -> str:
    """The plain text made from `body` (in `body_format`), merge fields as written. A body
    whose merge fields do not parse gives its text without them placed (the preview says
    why)."""
    placeholders = Placeholders(secrets.token_hex(5))
    try:
        check_merge_fields(body, "body")
        source = split_merge_fields(body, placeholders)
    except ValidationError:
        source = body
    text = html_to_text(body_to_safe_html(source, body_format), placeholders.pattern).strip()
    for token, field in placeholders.fields.items():
        text = text.replace(token, field)
    return text


def clean_text_body(value: object, where: str = "The plain-text part") -> str | None:
    """An owner's plain-text part as stored: None (automatic) when absent or blank. Anything
    but text or None is refused, the message starting with `where`."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{where} must be text, or null for the one made from the body.",
                              field="text")
    text = value.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        return None
    if len(text) > MAX_TEXT_BODY:
        raise ValidationError(f"{where} is too long (at most {MAX_TEXT_BODY:,} characters).",
                              field="text")
    return text
