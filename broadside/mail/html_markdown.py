"""Moving a body between compose modes, and what a move would lose, said before it is made.

    Markdown -> HTML (rich text or the owner's HTML): the renderer's own Markdown, sanitised
        (`markdown_to_safe_html`): nothing is lost.
    HTML -> Markdown: the HTML sanitised as for email, then markdownify (MIT); `lost_in_markdown`
        converts the result back and compares what each side holds (tables, inline styles,
        underlining, alignment, ...), so the owner is told in words what would go.
    HTML -> rich text: the rich-text editor (Trix) keeps bold, italics, strikethrough, links,
        one heading level, quotes, code blocks, lists and images; `lost_in_rich` names the rest.
    Rich text -> HTML: the editor's HTML as it is.

Merge fields (`{{ attributes.first_name }}`, `{% if %}` lines) are cut out before either
converter sees them and put back after, so neither escapes an underscore inside one.
"""

from __future__ import annotations

import re
import secrets
from collections import Counter
from html.parser import HTMLParser

from markdownify import markdownify

from broadside.mail.rendering import html_to_safe_html, markdown_to_safe_html

_FIELD = re.compile(r"\{\{.{0,2000}?\}\}|\{%.{0,2000}?%\}|\{#.{0,2000}?#\}", re.S)

# Each thing a body can hold, in the owner's words: by tag, then by attribute.
_TAG_FEATURES = {
    "table": "tables", "u": "underlining", "del": "strikethrough", "s": "strikethrough",
    "sub": "subscript and superscript", "sup": "subscript and superscript",
    "center": "centred text", "font": "font changes", "small": "text sizes",
    "big": "text sizes", "dl": "definition lists", "figcaption": "image captions",
    "img": "images", "a": "links", "h1": "headings", "h2": "smaller headings",
    "h3": "smaller headings", "h4": "smaller headings", "h5": "smaller headings",
    "h6": "smaller headings", "ul": "lists", "ol": "lists", "blockquote": "quotes",
    "pre": "code blocks", "code": "code", "strong": "bold", "b": "bold", "em": "italics",
    "i": "italics", "hr": "dividing lines", "caption": "tables",
}
_ATTRIBUTE_FEATURES = {
    "style": "inline styles (colours, fonts, spacing)", "align": "alignment",
    "valign": "alignment", "bgcolor": "background colours", "lang": "language and direction",
    "dir": "language and direction",
}
# What the rich-text editor keeps of the above.
RICH_KEEPS = frozenset({"bold", "italics", "strikethrough", "links", "headings", "quotes",
                        "code blocks", "lists", "images", "image sizes"})
_BLOCK_FIELD_LINE = re.compile(r"^[ \t]*(\{%.*%\})[ \t]*$", re.M)


class _Features(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.counts: Counter[str] = Counter()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        feature = _TAG_FEATURES.get(tag)
        if feature:
            self.counts[feature] += 1
        for name, _value in attrs:
            if name in _ATTRIBUTE_FEATURES:
                self.counts[_ATTRIBUTE_FEATURES[name]] += 1
            elif name in ("width", "height"):
                self.counts["image sizes" if tag == "img" else "widths and heights"] += 1

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _features(html: str) -> tuple[Counter[str], str]:
    parser = _Features()
    parser.feed(html)
    parser.close()
    words = " ".join("".join(parser.text).split())
    return parser.counts, words


class _Fields:
    """Merge fields swapped for letters-and-digits tokens no converter touches."""

    def __init__(self, text: str) -> None:
        nonce = secrets.token_hex(4)
        while nonce in text:
            nonce = secrets.token_hex(4)
        self.fields: dict[str, str] = {}
        self._nonce = nonce
        self.text = _FIELD.sub(self._token, text)

    def _token(self, match: re.Match[str]) -> str:
        token = f"mf{self._nonce}n{len(self.fields)}z"
        self.fields[token] = match.group(0)
        return token

    def restore(self, text: str) -> str:
        for token, field in self.fields.items():
            text = text.replace(token, field)
        return text


def markdown_to_html(markdown: str) -> str:
    """A Markdown body as the HTML the rich-text and HTML modes start from."""
    fields = _Fields(markdown.replace("\r\n", "\n"))
    return fields.restore(markdown_to_safe_html(fields.text)).strip()


def html_to_markdown(html: str) -> str:
    """An HTML body (the editor's or the owner's) as Markdown; see `lost_in_markdown`."""

    fields = _Fields(html.replace("\r\n", "\n"))
    safe = html_to_safe_html(fields.text)
    # A line break before a block's end or another break is the editor's blank line.
    safe = re.sub(r"(<br\s*/?>\s*){2,}", "</p><p>", safe)
    markdown = markdownify(safe, heading_style="ATX", bullets="-", strong_em_symbol="*",
                           strip=["del", "s", "u", "font", "span", "small", "big", "center"])
    markdown = re.sub(r"[ \t]+\n", lambda m: "  \n" if m.group(0).startswith("  ") else "\n",
                      markdown)
    markdown = fields.restore(markdown)
    # A condition on its own line reads as its own paragraph (the renderer unwraps it).
    markdown = _BLOCK_FIELD_LINE.sub(lambda m: f"\n{m.group(1)}\n", markdown)
    markdown = re.sub(r"  \n(?=\s*\n)", "\n", markdown)
    return re.sub(r"\n{3,}", "\n\n", markdown).strip() + "\n"


def _lost(before: Counter[str], after: Counter[str], keeps: frozenset[str] | None = None
          ) -> list[str]:
    lost = {feature for feature, count in before.items()
            if (after[feature] < count if keeps is None else feature not in keeps)}
    return sorted(lost)


def lost_in_markdown(html: str, markdown: str | None = None) -> list[str]:
    """What converting `html` to Markdown would lose, in words ("tables", "underlining"): the
    Markdown converted back, and each side's features compared. Empty: nothing is lost."""
    fields = _Fields(html.replace("\r\n", "\n"))
    markdown = html_to_markdown(html) if markdown is None else markdown
    before, text_before = _features(html_to_safe_html(fields.text))
    after, text_after = _features(markdown_to_safe_html(_Fields(markdown).text))
    lost = _lost(before, after)
    if not lost and _letters(text_before) != _letters(text_after):
        lost.append("some of the text's layout")
    return lost


def _letters(text: str) -> str:
    # Merge-field tokens differ between the two sides (their nonces); the words around do not.
    return re.sub(r"mf[0-9a-f]{8}n\d+z", "", re.sub(r"\W", "", text))


def lost_in_rich(html: str) -> list[str]:
    """What opening `html` in the rich-text editor would lose (it keeps RICH_KEEPS)."""
    before, _ = _features(html_to_safe_html(_Fields(html).text))
    return _lost(before, Counter(), RICH_KEEPS)
