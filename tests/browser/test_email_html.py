"""The email's HTML is built for mail clients: every layout (newsletter, transactional, the
double opt-in confirmation) in every mode (a Markdown body, the owner's HTML body with tables
and images, with and without a logo, a preheader, right-to-left text) parses without a single
error by the WHATWG algorithm (html5lib, which is what "valid HTML" means for a parser), carries
its language, direction, preheader and dark-mode hints, and passes the same axe check as every
page (tests/browser/test_every_page.py), in light and in dark mode."""

from __future__ import annotations

import re

import html5lib
import pytest
from playwright.sync_api import Page

from broadside.mail.confirmation import render_confirmation
from broadside.mail.rendering import CompiledRevision, EmailDesign, freeze_content
from tests.browser.test_every_page import AXE_RUN, AXE_SOURCE

pytestmark = pytest.mark.browser

MARKDOWN = """# November at Acme

Hi {{ name or "friend" }}, here is what changed:

- Exports are **twice as fast**
- A [calmer inbox](https://acme.example/inbox)

> The best newsletter is the one people look forward to.

```
export --since 2026-11-01
```

![A bar chart of export times](https://acme.example/chart.png)
"""
HTML = """<h1>November at Acme</h1>
<table role="presentation" width="100%" cellpadding="0" cellspacing="0">
  <tr><td width="50%" valign="top" style="padding: 8px; background-color: #eef3fb">
    <img src="https://acme.example/a.png" alt="The new export screen" width="260" height="160">
  </td><td width="50%" valign="top" style="padding: 8px">
    <h2>Faster exports</h2><p>Hi {{ name }}, <a href="https://acme.example/x">read more</a>.</p>
  </td></tr>
</table>
<p style="text-align: center"><a href="https://acme.example/go" style="color: #1f5fbf">Go</a></p>"""
LOGO = EmailDesign(logo_url="https://acme.example/brand/logo.png", logo_alt="Acme logo",
                   logo_width=120, logo_height=40, footer_text="Thanks for reading")


def newsletter(body: str, body_format: str, design: EmailDesign, **kw) -> str:
    frozen = freeze_content(subject="November at Acme", preheader=kw.pop("preheader", ""),
                            body_markdown=body, body_format=body_format, from_name="Acme",
                            from_email="news@acme.example", postal_address="1 Main St\nSpringfield",
                            design=design, **kw)
    return CompiledRevision(subject="November at Acme", html_template=frozen.html_template,
                            text_template=frozen.text_template).render(
        email="ann@example.com", name="Ann", attributes={},
        unsubscribe_url="https://news.acme.example/u/x", view_url="https://news.acme.example/v/x"
    ).html


EMAILS = {
    "newsletter, Markdown, no logo, preheader": lambda: newsletter(
        MARKDOWN, "markdown", EmailDesign(), preheader="Faster exports and a calmer inbox"),
    "newsletter, Markdown, logo": lambda: newsletter(MARKDOWN, "markdown", LOGO),
    "newsletter, HTML body, no logo": lambda: newsletter(HTML, "html", EmailDesign()),
    "newsletter, HTML body, logo, right to left": lambda: newsletter(
        "<p>مرحبا {{ name }}</p>", "html", LOGO, language="ar", direction="rtl"),
    "transactional, Markdown": lambda: newsletter(MARKDOWN, "markdown", EmailDesign(),
                                                  newsletter=False),
    "transactional, HTML body, logo": lambda: newsletter(HTML, "html", LOGO, newsletter=False),
    "confirmation, logo": lambda: render_confirmation(
        subject="Confirm", body_markdown="Please confirm your subscription to {{ list_name }}.",
        from_name="Acme", postal_address="1 Main St", design=LOGO, email="ann@example.com",
        name="Ann", attributes={}, list_name="Monthly news",
        confirm_url="https://news.acme.example/c/x").html,
    "confirmation, no logo": lambda: render_confirmation(
        subject="Confirm", body_markdown="Confirm, {{ name }}.", from_name="", postal_address="",
        design=EmailDesign(), email="ann@example.com", name="Ann", attributes={},
        list_name="Monthly news", confirm_url="https://news.acme.example/c/x").html,
}


def parse_errors(html: str) -> list[str]:
    parser = html5lib.HTMLParser(strict=False)
    parser.parse(html)
    lines = html.splitlines()
    return [f"line {line}, col {col}: {code} {data} near {lines[line - 1][max(0, col - 40):col + 20]!r}"
            for (line, col), code, data in parser.errors]


@pytest.mark.parametrize("mode", list(EMAILS))
def test_every_layout_and_mode_parses_without_an_error_and_says_what_clients_need(mode):
    html = EMAILS[mode]()
    assert parse_errors(html) == []
    rtl = "right to left" in mode
    assert re.search(r'<html lang="%s" dir="%s"' % (("ar", "rtl") if rtl else ("en", "ltr")), html)
    assert re.search(r'<table class="wrapper" [^>]*lang="\w+" dir="\w+"', html)
    assert '<meta name="color-scheme" content="light dark">' in html
    assert '<meta name="supported-color-schemes" content="light dark">' in html
    assert "@media (prefers-color-scheme: dark)" in html
    assert 'role="presentation"' in html and "<!--[if mso]>" in html  # tables, for Outlook
    if "preheader" in mode:
        hidden = re.search(r'<div class="preheader" style="([^"]*)">Faster exports and a calmer '
                           r"inbox((?:\u034f\u200c&nbsp;)+)</div>", html)
        assert hidden, "the preheader, hidden and padded"
        for rule in ("display: none", "max-height: 0", "opacity: 0", "mso-hide: all"):
            assert rule in hidden.group(1)
        assert hidden.group(2).count("&nbsp;") >= 30
    else:
        assert 'class="preheader"' not in html


def test_an_unknown_language_or_direction_falls_back_to_english_left_to_right():
    html = newsletter("Hi", "markdown", EmailDesign(), language='en" onload="x', direction="up")
    assert '<html lang="en" dir="ltr"' in html


def test_every_layout_and_mode_passes_axe_in_light_and_dark(page: Page):
    problems = []
    for mode, build in EMAILS.items():
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            page.set_content(build())
            page.evaluate(AXE_SOURCE)
            problems += [f"{mode}, {scheme}: {problem}" for problem in page.evaluate(AXE_RUN)]
    assert problems == []
