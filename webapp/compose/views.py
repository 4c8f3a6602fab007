"""The body editor's mode switch asks here (static/editor.js): the body in another compose mode,
and what the move would lose, said in words before anything changes. Nothing is saved: the
page's own autosave or Save stores the converted body (see broadside/mail/html_markdown.py).

POST /compose/convert (form fields `body`, `from`, `to`: markdown, rich or html) ->
200 {"body", "lost": ["tables", ...], "warning": sentence or null}; 422 {"error"}.
"""

from __future__ import annotations

from babel.numbers import format_decimal
from flask import Blueprint, jsonify, request

from broadside.campaigns.broadcasts.drafts import MAX_BODY
from broadside.core import roles
from broadside.core.errors import ValidationError
from broadside.core.i18n import _, _l, current_locale
from broadside.mail.body_formats import check_editor
from broadside.mail.html_markdown import (
    html_to_markdown,
    lost_in_markdown,
    lost_in_rich,
    markdown_to_html,
)
from webapp.compose import ab_tests
from webapp.compose.languages import install
from webapp.permissions import defaults

bp = Blueprint("compose", __name__, url_prefix="/compose")
defaults(bp, read=roles.VIEW, change=roles.WRITE)
install(bp)  # language names for the versions of a message, on every page
ab_tests.install(bp)  # the A/B test's section, send plan and result (templates/broadcasts/_ab_test*)

NAMES = {"markdown": _l("Markdown"), "rich": _l("Rich text"), "html": _l("HTML")}

# What a body can hold (broadside.mail.html_markdown's names for them), in the owner's words.
FEATURES = {
    "tables": _l("tables"), "underlining": _l("underlining"),
    "strikethrough": _l("strikethrough"), "subscript and superscript": _l("subscript and superscript"),
    "centred text": _l("centred text"), "font changes": _l("font changes"),
    "text sizes": _l("text sizes"), "definition lists": _l("definition lists"),
    "image captions": _l("image captions"), "images": _l("images"), "links": _l("links"),
    "headings": _l("headings"), "smaller headings": _l("smaller headings"), "lists": _l("lists"),
    "quotes": _l("quotes"), "code blocks": _l("code blocks"), "code": _l("code"),
    "bold": _l("bold"), "italics": _l("italics"), "dividing lines": _l("dividing lines"),
    "image sizes": _l("image sizes"), "widths and heights": _l("widths and heights"),
    "inline styles (colours, fonts, spacing)": _l("inline styles (colours, fonts, spacing)"),
    "alignment": _l("alignment"), "background colours": _l("background colours"),
    "language and direction": _l("language and direction"),
    "some of the text's layout": _l("some of the text's layout"),
}


def number(value: int) -> str:
    return format_decimal(value, locale=current_locale())


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
    words = [str(FEATURES.get(feature, feature)) for feature in lost]
    listed = words[0] if len(words) == 1 else _("%(first)s and %(last)s",
                                                 first=", ".join(words[:-1]), last=words[-1])
    return _("%(mode)s cannot hold %(features)s: switching removes them from this body. "
             "Keep the current mode to keep them.", mode=NAMES[target], features=listed)


@bp.post("/convert")
def convert():
    try:
        source = check_editor(request.form.get("from"), "from")
        target = check_editor(request.form.get("to"), "to")
        body = request.form.get("body", "")
        if len(body) > MAX_BODY:
            raise ValidationError(_("The body is too long to convert (%(length)s of "
                                    "%(limit)s characters).", length=number(len(body)),
                                    limit=number(MAX_BODY)), field="body")
    except ValidationError as exc:
        return jsonify(error=exc.message, field=exc.field), 422
    result, lost = converted(body.replace("\r\n", "\n"), source, target)
    return jsonify(body=result, lost=lost, warning=warning(lost, target))
