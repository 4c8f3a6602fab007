"""A feed's items as Broadside keeps them: `parse_feed` reads the fetched bytes with
feedparser (RSS 0.9x to 2.0, RSS 1.0/RDF, Atom), never letting it fetch anything itself.

Each item is keyed by the SHA-256 of its id (`<guid>`, Atom's `<id>`), else of its link: the
key of `feed_items`' UNIQUE(feed_id, key), so an item is recorded, and sent, once ever. An
item with neither is ignored (nothing would tell it apart from the next poll's copy). Its
title is plain text; its content (the full content where the feed gives one, else the
summary) is sanitised as the HTML mode sanitises an owner's HTML
(`broadside.mail.sanitise.html_to_safe_html`), cut to `MAX_CONTENT` characters first.
"""

from __future__ import annotations

import calendar
import hashlib
import html
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import feedparser  # type: ignore[import-untyped]

from broadside.campaigns.feeds.fetch import FeedProblem
from broadside.mail.sanitise import html_to_safe_html

MAX_TITLE = 300
MAX_LINK = 2000
MAX_CONTENT = 50_000
MAX_ITEMS = 200  # read from one answer (a feed lists its newest; the rest are old)
_TAG = re.compile(r"<[^>]*>")


@dataclass(frozen=True)
class Item:
    key: str
    title: str
    link: str
    summary_html: str
    published_at: datetime | None


def item_key(identifier: str) -> str:
    return hashlib.sha256(identifier.encode("utf-8")).hexdigest()


def _plain(text: str, limit: int) -> str:
    words = " ".join(html.unescape(_TAG.sub(" ", text or "")).split())
    return words if len(words) <= limit else words[: limit - 1] + "…"


def _link(entry: Any) -> str:
    link = str(entry.get("link") or "").strip()
    return link if link.lower().startswith(("http://", "https://")) and len(link) <= MAX_LINK \
        else ""


def _content(entry: Any) -> str:
    contents = entry.get("content") or []
    text = ""
    for part in contents:  # the HTML one when there are several
        if "html" in str(part.get("type", "")):
            text = str(part.get("value") or "")
            break
    if not text and contents:
        text = html.escape(str(contents[0].get("value") or ""))
    if not text:
        text = str(entry.get("summary") or "")
    return html_to_safe_html(text[:MAX_CONTENT]).strip()


def _when(entry: Any) -> datetime | None:
    parsed = entry.get("published_parsed") or entry.get("updated_parsed")
    if not parsed:
        return None
    try:
        return datetime.fromtimestamp(calendar.timegm(parsed), UTC).replace(tzinfo=None)
    except (OverflowError, ValueError, OSError):
        return None


def parse_feed(body: bytes) -> list[Item]:
    """The items of a feed, in the feed's order; FeedProblem when it is not a feed."""
    # Bytes, never a URL: feedparser fetches a URL it is given, past every bound of ours.
    parsed = feedparser.parse(body, sanitize_html=True, resolve_relative_uris=True)
    if not parsed.get("version") and not parsed.get("entries"):
        raise FeedProblem("The address answers, but not with an RSS or Atom feed (check that "
                          "it is the feed's address, not its web page's).")
    items: list[Item] = []
    seen: set[str] = set()
    for entry in parsed.get("entries", [])[:MAX_ITEMS]:
        identifier = str(entry.get("id") or "").strip() or _link(entry)
        if not identifier:
            continue
        key = item_key(identifier)
        if key in seen:
            continue
        seen.add(key)
        title = _plain(str(entry.get("title") or ""), MAX_TITLE)
        items.append(Item(key=key, title=title, link=_link(entry), summary_html=_content(entry),
                          published_at=_when(entry)))
    return items
