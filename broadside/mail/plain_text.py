"""The plain-text part, as a person would type it: sanitised HTML -> text.

A link reads `text (URL)` (or the URL alone when its text is the URL), never Markdown's
`[text](URL)`; a heading stands on its own line, underlined (`=` under a first-level one,
`-` under a second; not one holding a merge field, whose length differs per person); a list
item starts with `- ` or `1. ` (nested ones indented under their item); a quote's lines start
with `> `; code keeps its lines, indented by four spaces; a rule is a line of dashes; an image
is `[alt: URL]`, so the reader knows what was there.

The input is the body as broadside.mail.rendering freezes it (Markdown made HTML, sanitised
by nh3: well-formed, only the allowed tags), merge fields still opaque placeholder tokens of
letters and digits, which pass through as words (a link's address keeps its own). Made once
per revision (at Send), never per recipient.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

_VOID = {"br", "hr", "img"}
_BLOCKS = {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote",
           "pre", "hr", "table", "thead", "tbody", "tr"}
_UNDERLINES = {"h1": "=", "h2": "-"}
_SPACES = re.compile(r"[ \t\r\n\f]+")
_RUNS_OF_SPACES = re.compile(r" {2,}")
RULE = "-" * 20


@dataclass
class _Node:
    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[_Node | str] = field(default_factory=list)


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = _Node("body")
        self.open = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = _Node(tag, {name: value or "" for name, value in attrs})
        self.open[-1].children.append(node)
        if tag not in _VOID:
            self.open.append(node)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.open) - 1, 0, -1):  # tolerate a tag left open
            if self.open[depth].tag == tag:
                del self.open[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.open[-1].children.append(data)


def image_text(alt: str, url: str) -> str:
    return f"[{' '.join(alt.split()) or 'Image'}: {url}]"


def html_to_text(html: str, fields: re.Pattern[str] | None = None) -> str:
    """The text of sanitised HTML, blocks separated by a blank line. `fields`: the pattern of
    the merge fields' placeholder tokens (no heading holding one is underlined)."""
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return "\n\n".join(_Writer(fields).blocks(builder.root))


class _Writer:
    def __init__(self, fields: re.Pattern[str] | None) -> None:
        self.fields = fields

    def blocks(self, node: _Node) -> list[str]:
        return _blocks(node, self)

    def heading(self, tag: str, title: str) -> str:
        mark = _UNDERLINES.get(tag)
        if not mark or (self.fields is not None and self.fields.search(title)):
            return title
        return f"{title}\n{mark * len(title)}"


def _blocks(node: _Node, writer: _Writer) -> list[str]:
    """The blocks inside `node`: its runs of inline content, each a paragraph, and its block
    children, each as its kind is written."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        text = _paragraph("".join(run))
        run.clear()
        if text:
            out.append(text)

    for child in node.children:
        if isinstance(child, _Node) and child.tag in _BLOCKS:
            flush()
            out.extend(_block(child, writer))
        else:
            run.append(_inline(child))
    flush()
    return out


def _paragraph(text: str) -> str:
    """Whitespace as a browser shows it: runs of spaces one space, each line (a <br>) trimmed."""
    lines = [_RUNS_OF_SPACES.sub(" ", line).strip(" ") for line in text.split("\n")]
    return "\n".join(lines).strip("\n")


def _block(node: _Node, writer: _Writer) -> list[str]:
    tag = node.tag
    if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
        title = " ".join(" ".join(_blocks(node, writer)).split())
        return [writer.heading(tag, title)] if title else []
    if tag == "hr":
        return [RULE]
    if tag == "pre":
        code = _raw(node).strip("\n")
        return ["\n".join(f"    {line}" if line.strip() else "" for line in code.split("\n"))]
    if tag == "blockquote":
        inner = "\n\n".join(_blocks(node, writer))
        return ["\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))] if inner else []
    if tag in ("ul", "ol"):
        return _list(node, writer)
    if tag == "table":
        rows = [row for row in _rows(node) if row]
        return ["\n".join(rows)] if rows else []
    return _blocks(node, writer)  # p, div, li outside a list


def _list(node: _Node, writer: _Writer) -> list[str]:
    items = [child for child in node.children if isinstance(child, _Node) and child.tag == "li"]
    try:
        start = int(node.attrs.get("start", "1"))
    except ValueError:
        start = 1
    # A loose list (its items are paragraphs) keeps a blank line between items, as it was typed.
    loose = any(isinstance(c, _Node) and c.tag == "p" for item in items for c in item.children)
    written = []
    for number, item in enumerate(items, start):
        marker = f"{number}. " if node.tag == "ol" else "- "
        body = ("\n\n" if loose else "\n").join(_blocks(item, writer))
        indent = " " * len(marker)
        lines = body.split("\n")
        written.append(marker + lines[0] + "".join(f"\n{indent}{line}" if line else "\n"
                                                   for line in lines[1:]))
    return [("\n\n" if loose else "\n").join(written)] if written else []


def _rows(node: _Node) -> list[str]:
    rows: list[str] = []
    for child in node.children:
        if not isinstance(child, _Node):
            continue
        if child.tag == "tr":
            cells = [_paragraph(_inline(cell)).replace("\n", " ") for cell in child.children
                     if isinstance(cell, _Node) and cell.tag in ("td", "th")]
            rows.append(" | ".join(cells))
        else:  # thead, tbody
            rows.extend(_rows(child))
    return rows


def _inline(node: _Node | str) -> str:
    """Inline content as one line, but for its <br>s: the source's own line breaks are
    spaces, as a browser shows them."""
    if isinstance(node, str):
        return _SPACES.sub(" ", node)
    tag = node.tag
    if tag == "br":
        return "\n"
    if tag == "img":
        src = node.attrs.get("src", "")
        return f" {image_text(node.attrs.get('alt', ''), src)} " if src else ""
    text = _RUNS_OF_SPACES.sub(" ", "".join(_inline(child) for child in node.children))
    if tag == "a":
        return _link(text, node.attrs.get("href", ""))
    return text


def _link(text: str, href: str) -> str:
    """`text (URL)`; the address alone when the text is the address (or there is none)."""
    shown = href.removeprefix("mailto:")
    said = " ".join(text.split())
    if not href:
        return text
    if not said or said in (href, shown):
        return shown
    return f"{text} ({shown})"


def _raw(node: _Node) -> str:
    """A <pre>'s text as it was typed: every space and line break kept."""
    return "".join(child if isinstance(child, str) else _raw(child) for child in node.children)
