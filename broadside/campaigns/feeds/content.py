"""What a feed's email says: the automation's step 1 around the new item(s).

The owner writes step 1 as any step (subject, preheader, body with {{ merge fields }} for
each reader); three feed placeholders are filled in when the item's (or the digest's)
broadcast is made, before anything is frozen:

- `[[title]]` in the subject or preheader: the item's title (in a digest, the newest item's);
- `[[count]]`: how many items the email carries (1 for one per item);
- `[[items]]` in the body: where the items go, each as its title linked to the item, its date
  and its content (sanitised when read: `broadside.campaigns.feeds.items`); a body without
  `[[items]]` has them after it. An empty body is just the items.

A Markdown body is turned into HTML first (`html_markdown.markdown_to_html`, its merge fields
kept), since an item's content is HTML. What an item brings is text, never a merge field or a
block: its `{`, `}` and `[` are written as HTML character references, so `{{ name }}` in a
post's title prints as written and `[[block: X]]` in its content expands nothing.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from broadside.mail.html_markdown import markdown_to_html
from broadside.mail.merge_fields import jinja_literal

MAX_SUBJECT = 300
MAX_DIGEST_WHOLE = 25  # items shown whole in one digest; any more are listed by title
DEFAULT_SUBJECT = "[[title]]"


@dataclass(frozen=True)
class ItemText:
    title: str
    link: str
    summary_html: str
    published_at: datetime | None


@dataclass(frozen=True)
class Composed:
    subject: str
    preheader: str
    body: str  # HTML, with the step's merge fields as written


def inert(text: str) -> str:
    """Text from a feed, made unable to start a merge field or a block in an HTML body."""
    return text.replace("{", "&#123;").replace("}", "&#125;").replace("[", "&#91;")


def _line(template: str, title: str, count: int, limit: int) -> str:
    """The subject or preheader: placeholders filled, the title taken literally (each "{" in
    it a constant expression the merge renderer prints as "{"), all within `limit`."""
    pieces = " ".join(template.replace("[[count]]", str(count)).split()).split("[[title]]")
    slots = len(pieces) - 1
    if not slots:
        return pieces[0][:limit]
    room = max(0, limit - sum(len(p) for p in pieces)) // slots
    shown = title
    while shown and len(jinja_literal(shown if shown == title else shown + "…")) > room:
        shown = shown[:-1]
    literal = jinja_literal(shown if shown == title or not shown else shown + "…")
    return literal.join(pieces)


def _item_html(item: ItemText, whole: bool) -> str:
    title = inert(html.escape(item.title or item.link or "…"))
    link = inert(html.escape(item.link, quote=True))
    heading = f'<a href="{link}">{title}</a>' if item.link else title
    parts = [f"<h2>{heading}</h2>"]
    if item.published_at is not None:
        parts.append(f"<p><small>{item.published_at:%Y-%m-%d}</small></p>")
    if whole and item.summary_html:
        parts.append(inert(item.summary_html))
    return "\n".join(parts)


def items_html(items: Sequence[ItemText]) -> str:
    blocks = [_item_html(item, index < MAX_DIGEST_WHOLE) for index, item in enumerate(items)]
    return "\n<hr>\n".join(blocks)


def compose(*, subject: str, preheader: str, body: str, body_format: str,
            items: Sequence[ItemText]) -> Composed:
    """The broadcast's subject, preheader and HTML body for `items` (oldest first; the
    newest's title fills `[[title]]`)."""
    newest = items[-1]
    title = newest.title or newest.link
    written = (markdown_to_html(body) if body_format == "markdown" else body).strip()
    shown = items_html(items)
    if "[[items]]" in written:
        written = written.replace("<p>[[items]]</p>", shown).replace("[[items]]", shown)
    else:
        written = f"{written}\n{shown}" if written else shown
    return Composed(subject=_line(subject or DEFAULT_SUBJECT, title, len(items), MAX_SUBJECT),
                    preheader=_line(preheader, title, len(items), MAX_SUBJECT),
                    body=written)
