"""A recipient's email, tracked: its links through the signed redirector and a 1x1 image.

Called by the worker at each recipient's render (jobs/recheck.py, right after the frozen
revision is filled in for them), with the broadcast's mode as the send-time re-check read it
a moment before: `off` (or a broadcast turned off since the last recipient) returns the
message untouched, so no pixel and no rewritten link go out once tracking is off.

Which links: every http(s) link of the body and of the owner's design (footer, logo link).
Never: mailto: links, and the links Broadside itself fills in per recipient (the unsubscribe
link, the view-in-browser link, any `{{ variable }}` our layout puts in an href); those come
from our own placeholders, which an owner's link can never start with (the renderer requires
a scheme before any merge field), and in the rendered copy they start with BASE_URL, which is
never rewritten either.

A link's position is its place among the tracked links of the frozen template (`template_links`),
stored with the address as the owner wrote it when Send was pressed (`store_links`). A
recipient's rendered link is matched back to its template link by the template's literal parts
(a merge field matches anything), in document order, so a link left out by a condition does not
shift the others.

A link whose address holds a merge field (`https://acme.example/p?who={{ email }}`) is tracked
only with a per-person token, which names the copy anyway: its rendered address, merge fields
filled in, is signed into that token and never stored. Counts only (and anyone a per-person
broadcast counts in aggregate) leaves such a link as it is, pointing straight at its address:
a token naming no person cannot carry the reader's address, and filling it in at redirect time
would need the copy, which is what that token must not name. Those links get no row either
(`store_links`), and the send page names them before Send (`links_with_fields`).
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from html import escape, unescape

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.campaigns.analytics.modes import AGGREGATE, PER_PERSON
from broadside.campaigns.analytics.tokens import TrackingTokens, slot_of
from broadside.core.errors import ValidationError
from broadside.core.models import Broadcast, MailingList, TrackedLink
from broadside.mail.mime import RenderedEmail
from broadside.mail.rendering import PLAIN_DESIGN, freeze_layout

_HREF = re.compile(r'(<a\b[^>]*?\bhref=")([^"]*)(")', re.IGNORECASE)
_FIELD = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
_TEXT_URL = re.compile(r"https?://[^\s<>]+")
_TRAILING = ").,;:!?'\""  # what follows an address in text, as in "the guide (URL)."
_BODY_END = re.compile(r"</body>", re.IGNORECASE)


@dataclass(frozen=True)
class TemplateLink:
    position: int
    url: str  # as the owner wrote it (unescaped), merge fields unfilled
    pattern: re.Pattern[str]  # matches the escaped href of a rendered copy
    has_fields: bool  # its address holds a merge field: tracked per person only


def _tracked(href: str) -> bool:
    lowered = href.lstrip().lower()
    return lowered.startswith(("http://", "https://"))


def template_links(html_template: str) -> list[TemplateLink]:
    """The tracked links of a frozen revision's HTML, in document order."""
    links: list[TemplateLink] = []
    for match in _HREF.finditer(html_template):
        href = match.group(2)
        if not _tracked(href):  # mailto:, and our own `{{ unsubscribe_url }}`-style links
            continue
        parts = _FIELD.split(href)
        pattern = re.compile(".*?".join(re.escape(part) for part in parts), re.DOTALL)
        links.append(TemplateLink(len(links), unescape(href), pattern, len(parts) > 1))
    return links


def links_with_fields(html_template: str) -> list[str]:
    """The addresses (as the owner wrote them) that counts-only tracking leaves untracked."""
    return [link.url for link in template_links(html_template) if link.has_fields]


def draft_links_with_fields(broadcast: Broadcast) -> list[str]:
    """The send page's warning, before Send: the draft's links that counts only would leave
    untracked, read from the layout Send would freeze (nothing, while the draft does not
    freeze). The owner's links come from the body, so the plain design does; and the layout
    alone, without freeze_content's sample render, costs a quarter as much."""
    try:
        frozen = freeze_layout(subject=broadcast.subject, preheader=broadcast.preheader,
                               body_markdown=broadcast.body, from_name="", postal_address="",
                               design=PLAIN_DESIGN, link=("unsubscribe_url", ""))
    except ValidationError:
        return []  # the send page lists why it cannot be sent
    return links_with_fields(frozen.html_template)


# A version in another language has links of its own: the nth version's are stored from
# position n * VERSION_STRIDE on (broadside.campaigns.analytics.sending), so each counts apart.
VERSION_STRIDE = 1000


def store_links(session: Session, broadcast_id: int, html_template: str, mode: str | None,
                first_position: int = 0) -> int:
    """At Send, in its transaction: one row per link the mode tracks, its counters at zero
    (counts only: not those whose address holds a merge field)."""
    links = [link for link in template_links(html_template)
             if mode == PER_PERSON or not link.has_fields]
    session.add_all(TrackedLink(broadcast_id=broadcast_id, position=first_position + link.position,
                                url=link.url, clicks=0, bot_clicks=0) for link in links)
    return len(links)


def _text_links(text: str, swapped: dict[str, str]) -> str:
    """The plain text's addresses of tracked links (written "text (URL)", or the URL alone:
    broadside.mail.plain_text) swapped for the same tracked URLs as the HTML's."""
    if not swapped:
        return text

    def one(match: re.Match[str]) -> str:
        url, tail = match.group(0), ""
        while url not in swapped and url and url[-1] in _TRAILING:
            url, tail = url[:-1], url[-1] + tail
        return swapped[url] + tail if url in swapped else match.group(0)

    return _TEXT_URL.sub(one, text)


class Tracker:
    """One slice's tracker for one broadcast: the template's links read once, the lists'
    per-person switches read once each; per recipient, string work only."""

    def __init__(self, session: Session, broadcast_id: int, html_template: str, *,
                 secret_key: str, base_url: str, clock: Callable[[], float] = time.time,
                 first_position: int = 0) -> None:
        self.session = session
        self.broadcast_id = broadcast_id
        self.links = template_links(html_template)
        self.first_position = first_position  # a version's links: see VERSION_STRIDE
        self.tokens = TrackingTokens(secret_key)
        self.base_url = base_url.rstrip("/")
        self.own_prefix = self.base_url + "/"  # our own per-recipient links are never rewritten
        self.clock = clock
        self._lists: dict[int | None, tuple[bool, bool]] = {}  # list: (no tracking, per person)
        # An aggregate token names no person: every recipient in one slot gets the same pixel
        # and the same token for one link and address, so each is signed once per slot.
        self._shared: dict[tuple, str] = {}
        self._shared_slot: int | None = None
        self._matched: dict[tuple[str, int], tuple[int, str] | tuple[()]] = {}

    def for_version(self, html_template: str, first_position: int) -> Tracker:
        """This slice's tracker for another language's message of the broadcast: its own
        links, from its own first position; the tokens and the lists' switches shared."""
        other = copy.copy(self)
        other.links = template_links(html_template)
        other.first_position = first_position
        other._matched = {}
        other._shared, other._shared_slot = {}, None
        return other

    def _list_switches(self, list_id: int | None) -> tuple[bool, bool]:
        """The copy's list's own switches: (tracking off for its readers, per person)."""
        if list_id not in self._lists:
            row = None if list_id is None else self.session.execute(
                select(MailingList.no_tracking, MailingList.per_person_tracking)
                .where(MailingList.id == list_id)).first()
            self._lists[list_id] = (bool(row[0]), bool(row[1])) if row else (False, False)
        return self._lists[list_id]

    def apply(self, rendered: RenderedEmail, mode: str | None, *, delivery_id: int,
              list_id: int | None) -> RenderedEmail:
        """The recipient's email with tracking, or untouched when `mode` is off or the copy's
        list has tracking off (`MailingList.no_tracking`: no pixel, links as written)."""
        if mode not in (AGGREGATE, PER_PERSON):
            return rendered
        list_off, list_per_person = self._list_switches(list_id)
        if list_off:
            return rendered
        person = delivery_id if mode == PER_PERSON and list_per_person else None
        slot = slot_of(self.clock())
        html, swapped = self._links(rendered.html, slot, person)
        pixel = (f'<img src="{escape(self.open_url(slot, person))}" width="1" height="1" alt="" '
                 'style="display:block;width:1px;height:1px;border:0;">')
        html, found = _BODY_END.subn(lambda m: pixel + m.group(0), html, count=1)
        if not found:
            html += pixel
        return replace(rendered, html=html, text=_text_links(rendered.text, swapped))

    def open_url(self, slot: int, person: int | None) -> str:
        if person is None:
            return self._shared_url(("open", slot), lambda: self._open(slot, None))
        return self._open(slot, person)

    def click_url(self, position: int, url: str, slot: int, person: int | None) -> str:
        if person is None:
            return self._shared_url((position, url, slot),
                                    lambda: self._click(position, url, slot, None))
        return self._click(position, url, slot, person)

    def _open(self, slot: int, person: int | None) -> str:
        token = self.tokens.open_token(self.broadcast_id, slot, person)
        return f"{self.base_url}/t/o/{token}.gif"

    def _click(self, position: int, url: str, slot: int, person: int | None) -> str:
        token = self.tokens.click_token(self.broadcast_id, position, url, slot, person)
        return f"{self.base_url}/t/c/{token}"

    def _shared_url(self, key: tuple, make: Callable[[], str]) -> str:
        """A token naming no person, made once per slot (bounded, emptied when full)."""
        slot = key[-1]
        if slot != self._shared_slot or len(self._shared) >= 10_000:
            self._shared = {}
            self._shared_slot = slot
        url = self._shared.get(key)
        if url is None:
            url = self._shared[key] = make()
        return url

    def _links(self, html: str, slot: int, person: int | None) -> tuple[str, dict[str, str]]:
        swapped: dict[str, str] = {}
        next_link = 0

        def one(match: re.Match[str]) -> str:
            nonlocal next_link
            href = match.group(2)
            key = (href, next_link)
            found = self._matched.get(key)
            if found is None:
                found = self._match(href, next_link)
                if len(self._matched) < 10_000:
                    self._matched[key] = found
            if not found:
                return match.group(0)
            position, url = found
            next_link = position + 1
            if person is None and self.links[position].has_fields:
                return match.group(0)  # its address names the reader: untracked in aggregate
            tracked = self.click_url(self.first_position + position, url, slot, person)
            swapped.setdefault(url, tracked)
            return f"{match.group(1)}{escape(tracked)}{match.group(3)}"

        return _HREF.sub(one, html), swapped

    def _match(self, href: str, start: int) -> tuple[int, str] | tuple[()]:
        """The template link a rendered href is, looking from link `start` on: its position
        and address; () when it is not tracked. It depends on nothing else, so the slice keeps
        each answer (most hrefs are the same for every recipient: the owner's links)."""
        if not _tracked(href) or unescape(href).startswith(self.own_prefix):
            return ()  # mailto:, or ours: unsubscribe, view in browser
        for link in self.links[start:]:
            if link.pattern.fullmatch(href):
                return link.position, unescape(href)
        return ()  # not a link of the template: left as it is
