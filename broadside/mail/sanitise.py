"""What of an owner's body may go into an email: Markdown rendered with raw HTML escaped, or
the owner's own HTML (the rich-text editor's too), each sanitised by nh3 to what email is built
with. Run when content is frozen (broadside.mail.rendering), never per recipient: the libraries
are imported on first use, so a worker that only sends keeps them out of its memory."""

from __future__ import annotations

import functools
from typing import Any

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "i", "img", "li", "ol", "p", "pre", "s", "strong", "sub", "sup", "table",
    "tbody", "td", "th", "thead", "tr", "u", "ul",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title", "width", "height"},
    "ol": {"start"},
}


@functools.cache
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False})


def _keep_safe_urls(tag: str, attribute: str, value: str) -> str | None:
    # Called by nh3 for every kept attribute; it must not raise (nh3 would report it as
    # an unraisable exception). Images load from https only: http images leak the reader.
    if tag == "img" and attribute == "src" and not value.lower().startswith("https://"):
        return None
    return value


def markdown_to_safe_html(markdown: str) -> str:
    """Markdown to HTML that is safe to put in an email (and in a page)."""
    import nh3

    return nh3.clean(
        _markdown().render(markdown),
        tags=ALLOWED_TAGS,
        clean_content_tags={"script", "style"},
        attributes=ALLOWED_ATTRIBUTES,
        attribute_filter=_keep_safe_urls,
        url_schemes={"http", "https", "mailto"},
        url_relative="deny",
        strip_comments=True,
    )


BODY_FORMATS = ("markdown", "html")

# The owner's own HTML (or the rich-text editor's) keeps what email is built with: tables and
# their layout attributes, inline styles of the properties clients honour, `align`, `width`.
# Scripts, forms, frames, event handlers and every other attribute go.
EMAIL_HTML_TAGS = ALLOWED_TAGS | {
    "big", "caption", "center", "col", "colgroup", "dd", "div", "dl", "dt", "figcaption",
    "figure", "font", "small", "span", "tfoot",
}
_LAYOUT_ATTRIBUTES = {"style", "align", "valign", "width", "height", "bgcolor", "dir", "lang",
                      "title"}
EMAIL_HTML_ATTRIBUTES = {
    "*": _LAYOUT_ATTRIBUTES,
    "a": {"href"},
    "img": {"src", "alt", "border"},
    "ol": {"start", "type"},
    "table": {"border", "cellpadding", "cellspacing", "role"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan", "scope"},
    "col": {"span"},
    "colgroup": {"span"},
    "font": {"color", "face", "size"},
}
EMAIL_STYLE_PROPERTIES = {
    "background", "background-color", "border", "border-bottom", "border-collapse",
    "border-color", "border-left", "border-radius", "border-right", "border-spacing",
    "border-style", "border-top", "border-width", "color", "direction", "display", "font",
    "font-family", "font-size", "font-style", "font-weight", "height", "letter-spacing",
    "line-height", "list-style-type", "margin", "margin-bottom", "margin-left", "margin-right",
    "margin-top", "max-width", "min-width", "padding", "padding-bottom", "padding-left",
    "padding-right", "padding-top", "table-layout", "text-align", "text-decoration",
    "text-transform", "vertical-align", "white-space", "width", "word-break",
}


def html_to_safe_html(html: str) -> str:
    """The owner's HTML, sanitised for email (and for a page): see EMAIL_HTML_TAGS."""
    import nh3

    return nh3.clean(
        html,
        tags=EMAIL_HTML_TAGS,
        clean_content_tags={"script", "style", "form", "iframe", "object", "embed", "template",
                            "noscript", "title"},
        attributes=EMAIL_HTML_ATTRIBUTES,
        attribute_filter=_keep_safe_urls,
        filter_style_properties=EMAIL_STYLE_PROPERTIES,
        url_schemes={"http", "https", "mailto"},
        url_relative="deny",
        strip_comments=True,
    )


def body_to_safe_html(body: str, body_format: str = "markdown") -> str:
    """A body as written, in its format ("markdown" or "html"), to sanitised HTML."""
    if body_format == "html":
        return html_to_safe_html(body)
    if body_format != "markdown":
        raise ValueError(f"unknown body format {body_format!r}")
    return markdown_to_safe_html(body)
