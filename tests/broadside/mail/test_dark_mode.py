"""The dark-mode views of the preview (broadside.mail.dark_mode): Apple Mail's applies the
email's own dark design; Gmail's recolours light backgrounds and dark text on its own."""

from __future__ import annotations

import re

from broadside.mail.dark_mode import as_apple_mail_dark, as_gmail_dark
from broadside.mail.rendering import CompiledRevision, freeze_content

EMAIL = """<!DOCTYPE html><html><head><style>
.a { color: #111111; }
@media (prefers-color-scheme: dark) { .a { color: #eeeeee !important; } }
</style></head><body style="background-color: #ffffff; color: #222222">
<table bgcolor="#f2f4f7"><tr><td style="background: #1f1f1f; color: #fafafa">x</td></tr></table>
<p>Our color: #000000 is text, not CSS.</p></body></html>"""


def test_apple_mail_applies_the_dark_rules_unconditionally():
    html = as_apple_mail_dark(EMAIL)
    head = html[:html.index("</head>")]
    assert head.rstrip().endswith("</style>")
    added = head[head.rindex("<style>"):]
    assert "color-scheme: dark" in added
    assert ".a { color: #eeeeee !important; }" in added
    assert "@media" not in added


def test_gmail_inverts_light_backgrounds_and_dark_text_and_keeps_the_rest():
    html = as_gmail_dark(EMAIL)
    assert "prefers-color-scheme" not in html  # Gmail ignores the email's dark design
    assert "background-color: #000000" in html  # white background: black
    assert "color: #dddddd" in html  # dark text (#222222): light
    assert 'bgcolor="#080a0d"' in html  # the attribute too
    assert "background: #1f1f1f; color: #fafafa" in html  # already dark: left alone
    assert ".a { color: #eeeeee; }" in html  # the <style> block too
    assert "Our color: #000000 is text" in html  # words are not CSS


def test_the_layout_stays_readable_in_both_dark_views():
    frozen = freeze_content(subject="Hi", preheader="", body_markdown="# Hello\n\nWords.",
                            from_name="Acme", from_email="a@acme.example",
                            postal_address="1 Main St")
    html = CompiledRevision(subject="Hi", html_template=frozen.html_template,
                            text_template=frozen.text_template).render(
        email="ann@example.com", name="Ann", attributes={}, unsubscribe_url="#").html
    assert "@media (prefers-color-scheme: dark)" in html
    apple = as_apple_mail_dark(html)
    assert re.search(r"\.content \{ background-color: #1c2128 !important;", apple)
    gmail = as_gmail_dark(html)
    content = re.search(r'class="content" style="([^"]*)"', gmail).group(1)
    assert "background-color: #000000" in content and "color: #dbdfe4" in content
