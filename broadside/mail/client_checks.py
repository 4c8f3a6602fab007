"""What in a rendered email breaks in mail clients, said in the preview before anyone sends it.

Each check reads the real rendered HTML of one recipient's copy (the bytes a client gets):

- an image without a `width` attribute: Outlook for Windows ignores CSS widths and shows the
  image at its natural size, so a 2x photo spills out of the layout;
- more HTML than Gmail keeps: Gmail cuts a message whose HTML passes 102 KB (GMAIL_CLIP_BYTES)
  and hides the rest, the footer and its unsubscribe link with it, behind "View entire message";
- an image without alt text (absent or blank): what a reader hears from a screen reader, and
  what every client shows while images are blocked;
- a link over plain http://: clients and browsers warn about it, and the address travels
  readable on the network.

Nothing here knows the web or the database: text in, findings out (the preview says them).
"""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser

# Gmail clips at 102 KB of HTML; taken as kibibytes, the larger reading, so a finding is sure.
GMAIL_CLIP_BYTES = 102 * 1024
# How many offending images or links a finding names (the rest are counted).
NAMED = 3


@dataclass(frozen=True)
class ClientCheck:
    kind: str  # "image-width" | "gmail-clipping" | "image-alt" | "insecure-link"
    message: str
    where: tuple[str, ...] = ()  # the first few image or link addresses concerned


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.images: list[dict[str, str]] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "img":
            self.images.append(values)
        elif tag == "a" and "href" in values:
            self.links.append(values["href"].strip())

    handle_startendtag = handle_starttag


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _named(items: list[str]) -> tuple[str, ...]:
    return tuple(items[:NAMED])


def check_email(html: str) -> list[ClientCheck]:
    """The findings for one rendered email, most serious first (empty: nothing to say)."""
    collector = _Collector()
    collector.feed(html)
    collector.close()
    found: list[ClientCheck] = []
    size = len(html.encode("utf-8"))
    if size > GMAIL_CLIP_BYTES:
        found.append(ClientCheck(
            "gmail-clipping",
            f"The email's HTML is {size / 1024:.0f} KB: Gmail shows only the first 102 KB and "
            "hides the rest (the unsubscribe link too) behind “View entire message”. "
            "Shorten it, or link to the rest."))
    no_width = [image.get("src", "") for image in collector.images
                if not image.get("width", "").strip()]
    if no_width:
        found.append(ClientCheck(
            "image-width",
            f"{_count(len(no_width), 'image has', 'images have')} no width: Outlook shows an "
            "image at its full size without one, which can spill out of the email. "
            "Insert images from the media library, or give each a width.", _named(no_width)))
    no_alt = [image.get("src", "") for image in collector.images
              if not image.get("alt", "").strip()]
    if no_alt:
        found.append(ClientCheck(
            "image-alt",
            f"{_count(len(no_alt), 'image has', 'images have')} no alt text: screen readers, "
            "and every inbox that blocks images, show nothing in its place.", _named(no_alt)))
    insecure = [link for link in collector.links if link.lower().startswith("http://")]
    if insecure:
        found.append(ClientCheck(
            "insecure-link",
            f"{_count(len(insecure), 'link does', 'links do')} not use https: some clients "
            "warn before opening it. Use the https:// address.", _named(insecure)))
    return found
