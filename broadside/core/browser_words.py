"""A browser's User-Agent in words, as Settings -> Security names a session: "Firefox on
Linux", "Chrome on Android", "Safari on iPhone"; "Unknown browser" when none of the common
tokens is there.

A small reader of our own over the tokens every common browser sends (no dependency, no
database of agents): the order matters, because browsers carry each other's names (Edge and
Opera say "Chrome", Chrome says "Safari", every browser on an iPhone is Safari underneath
and names itself with its own iOS token). It is a label for a person to recognise their own
devices, never a check: a User-Agent is whatever the browser chooses to send.
"""

from __future__ import annotations

from broadside.core.i18n import _

# (token in the User-Agent, the browser's name), first match wins.
BROWSERS: tuple[tuple[str, str], ...] = (
    ("Edg/", "Edge"), ("EdgiOS/", "Edge"), ("EdgA/", "Edge"),
    ("OPR/", "Opera"), ("OPiOS/", "Opera"),
    ("SamsungBrowser/", "Samsung Internet"),
    ("Vivaldi/", "Vivaldi"), ("YaBrowser/", "Yandex Browser"),
    ("FxiOS/", "Firefox"), ("Firefox/", "Firefox"),
    ("CriOS/", "Chrome"), ("Chromium/", "Chromium"), ("Chrome/", "Chrome"),
    ("Version/", "Safari"),  # real Safari writes Version/17.1 ... Safari/605.1.15
)
# (token, the system's name), first match wins: phones before the desktops they resemble.
SYSTEMS: tuple[tuple[str, str], ...] = (
    ("iPhone", "iPhone"), ("iPad", "iPad"), ("iPod", "iPod"),
    ("Android", "Android"), ("CrOS", "ChromeOS"),
    ("Windows", "Windows"), ("Macintosh", "macOS"), ("Mac OS X", "macOS"),
    ("Linux", "Linux"), ("FreeBSD", "FreeBSD"), ("OpenBSD", "OpenBSD"),
)
UNKNOWN = "Unknown browser"


def _first(user_agent: str, table: tuple[tuple[str, str], ...]) -> str | None:
    return next((name for token, name in table if token in user_agent), None)


def describe(user_agent: str | None) -> str:
    """The browser and the system it runs on, in words."""
    text = (user_agent or "")[:300]
    browser = _first(text, BROWSERS)
    if browser == "Safari" and "Safari/" not in text:
        browser = None
    system = _first(text, SYSTEMS)
    if browser is None:
        return _("Unknown browser on %(system)s", system=system) if system else _("Unknown browser")
    return _("%(browser)s on %(system)s", browser=browser, system=system) if system else browser
