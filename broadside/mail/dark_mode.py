"""An email as two families of mail clients show it in dark mode, for the preview only (what is
sent is never transformed).

- Apple Mail (macOS, iOS) honours the email's own dark design: with
  `<meta name="color-scheme" content="light dark">` it applies the rules inside
  `@media (prefers-color-scheme: dark)` and does not recolour anything itself.
  `as_apple_mail_dark` applies those rules unconditionally (a browser cannot be told to prefer
  dark for one frame), and the dark colour scheme for what the email leaves to the client.
- Gmail's apps (Android, iOS) ignore those rules and recolour on their own ("full inversion"):
  light backgrounds turn dark and dark text turns light; dark backgrounds and light text stay.
  `as_gmail_dark` approximates that: it drops the dark-mode rules, then for every colour the
  email sets (inline `style`, the `<style>` block, `bgcolor`/`color` attributes) it inverts the
  HSL lightness of a light background or border (lightness > 0.5) and of dark text (< 0.5),
  keeping hue and saturation. Images are left alone, as Gmail leaves them. Gmail's exact
  palette is its own and changes; this shows what turns dark and whether text stays readable.
"""

from __future__ import annotations

import colorsys
import re

_DARK_MEDIA = re.compile(r"@media[^{]*prefers-color-scheme\s*:\s*dark[^{]*\{", re.IGNORECASE)
_HEAD_END = re.compile(r"</head\s*>", re.IGNORECASE)
_DECLARATION = re.compile(
    r"(?P<property>(?<![\w-])(?:background(?:-color)?|color|border(?:-(?:top|right|bottom|left))?"
    r"(?:-color)?))(?P<colon>\s*:\s*)(?P<value>[^;\"'}<>]*)", re.IGNORECASE)
# Where CSS is: a style attribute's value, a <style> element's text.
_CSS = re.compile(r"(?P<open>\bstyle=\")(?P<css>[^\"]*)(?P<close>\")"
                  r"|(?P<open2>\bstyle=')(?P<css2>[^']*)(?P<close2>')"
                  r"|(?P<open3><style[^>]*>)(?P<css3>.*?)(?P<close3></style>)",
                  re.IGNORECASE | re.DOTALL)
_ATTRIBUTE = re.compile(r"(?P<name>\b(?:bgcolor|color))=(?P<quote>[\"'])(?P<value>[^\"']*)(?P=quote)",
                        re.IGNORECASE)
_COLOUR = re.compile(
    r"#(?P<hex>[0-9a-f]{6}|[0-9a-f]{3})\b|rgba?\((?P<rgb>[^)]*)\)"
    r"|\b(?P<name>white|black)\b", re.IGNORECASE)
_NAMED = {"white": (255, 255, 255), "black": (0, 0, 0)}
# What Gmail's apps put behind and under an email that sets no colours.
GMAIL_BASE = ("<style>html, body { background-color: #121212; color: #e8eaed; }</style>")


def _dark_blocks(css_html: str) -> list[tuple[int, int, int]]:
    """(start of `@media`, start of its body, end after its closing brace) for each dark block."""
    blocks = []
    for match in _DARK_MEDIA.finditer(css_html):
        depth, i = 1, match.end()
        while i < len(css_html) and depth:
            depth += {"{": 1, "}": -1}.get(css_html[i], 0)
            i += 1
        blocks.append((match.start(), match.end(), i))
    return blocks


def _before_head_end(html: str, addition: str) -> str:
    match = _HEAD_END.search(html)
    if match is None:
        return addition + html
    return html[:match.start()] + addition + html[match.start():]


def as_apple_mail_dark(html: str) -> str:
    """`html` with its dark-mode rules in force, as Apple Mail shows it in dark mode."""
    rules = "\n".join(html[body:end - 1] for _, body, end in _dark_blocks(html))
    return _before_head_end(html, f"<style>:root {{ color-scheme: dark; }}\n{rules}</style>")


def _rgb(match: re.Match[str]) -> tuple[int, int, int] | None:
    if match.group("hex"):
        digits = match.group("hex")
        if len(digits) == 3:
            digits = "".join(c * 2 for c in digits)
        return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)
    if match.group("rgb") is not None:
        parts = [p.strip() for p in match.group("rgb").replace("/", ",").split(",")]
        try:
            return int(float(parts[0])), int(float(parts[1])), int(float(parts[2]))
        except (ValueError, IndexError):
            return None
    return _NAMED[match.group("name").lower()]


def _inverted(rgb: tuple[int, int, int], *, background: bool) -> tuple[int, int, int]:
    hue, lightness, saturation = colorsys.rgb_to_hls(*(c / 255 for c in rgb))
    if (lightness > 0.5) if background else (lightness < 0.5):
        lightness = 1 - lightness
    return tuple(round(c * 255) for c in colorsys.hls_to_rgb(hue, lightness, saturation))  # type: ignore[return-value]


def _recolour(value: str, *, background: bool) -> str:
    def swap(match: re.Match[str]) -> str:
        rgb = _rgb(match)
        if rgb is None:
            return match.group(0)
        r, g, b = _inverted(rgb, background=background)
        return f"#{r:02x}{g:02x}{b:02x}"
    return _COLOUR.sub(swap, value)


def _declaration(match: re.Match[str]) -> str:
    background = not match.group("property").lower() == "color"
    return (match.group("property") + match.group("colon")
            + _recolour(match.group("value"), background=background))


def _css(match: re.Match[str]) -> str:
    for n in ("", "2", "3"):
        if match.group("open" + n) is not None:
            return (match.group("open" + n) + _DECLARATION.sub(_declaration, match.group("css" + n))
                    + match.group("close" + n))
    return match.group(0)


def _attribute(match: re.Match[str]) -> str:
    background = match.group("name").lower() == "bgcolor"
    quote = match.group("quote")
    return f"{match.group('name')}={quote}{_recolour(match.group('value'), background=background)}{quote}"


def as_gmail_dark(html: str) -> str:
    """`html` recoloured as Gmail's apps do in dark mode (an approximation: see the module)."""
    kept, last = [], 0
    for start, _, end in _dark_blocks(html):
        kept.append(html[last:start])
        last = end
    html = "".join(kept) + html[last:]
    html = _CSS.sub(_css, html)
    html = _ATTRIBUTE.sub(_attribute, html)
    return _before_head_end(html, GMAIL_BASE)
