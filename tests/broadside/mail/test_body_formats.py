"""Bodies in each format: the owner's HTML sanitised for email, an HTML body's merge fields read
as typed, Markdown <-> HTML conversion, and the words for what a switch would lose."""

from __future__ import annotations

import pytest

from broadside.core.errors import ValidationError
from broadside.mail.body_formats import written_as, written_format
from broadside.mail.html_markdown import (
    html_to_markdown,
    lost_in_markdown,
    lost_in_rich,
    markdown_to_html,
)
from broadside.mail.rendering import (
    CompiledRevision,
    body_to_safe_html,
    freeze_content,
    html_to_safe_html,
)

OWN = """<table role="presentation" width="600" cellpadding="4"><tr>
<td align="center" style="color: #b00020; background-color: #fff; position: fixed">Hi</td>
</tr></table>
<p onclick="steal()" style="font-size: 18px">Text <u>under</u></p>
<script>alert(1)</script><form action="https://evil.example/"><input name="q">typed</form>
<img src="http://tracker.example/p.gif" onerror="alert(2)" alt="pixel">
<img src="https://cdn.example/a.png" alt="A chart" width="300" height="200">
<iframe src="https://evil.example/"></iframe><a href="javascript:alert(3)">bad</a>"""


def test_the_owners_html_keeps_tables_styles_and_layout_and_drops_what_runs():
    safe = html_to_safe_html(OWN)
    assert '<table role="presentation" width="600" cellpadding="4">' in safe
    assert 'align="center"' in safe and "color:#b00020" in safe and "background-color" in safe
    assert "position" not in safe  # a property email clients do not honour is filtered out
    assert 'style="font-size:18px"' in safe and "<u>under</u>" in safe
    assert '<img src="https://cdn.example/a.png" alt="A chart" width="300" height="200">' in safe
    for gone in ("<script", "alert(", "onclick", "onerror", "<form", "<input", "typed",
                 "tracker.example", "<iframe", "evil.example", "javascript:"):
        assert gone not in safe, gone


def test_markdown_still_shows_raw_html_as_text():
    assert "&lt;script&gt;" in body_to_safe_html("<script>alert(1)</script>", "markdown")
    with pytest.raises(ValueError):
        body_to_safe_html("x", "docx")


def test_an_html_bodys_merge_fields_are_read_as_typed():
    typed = ('<div>Hello {{ name or &quot;friend&quot; }}, {{&nbsp;<strong>email</strong> }}'
             '<br>{% if attributes.age &gt; 30 %}<br>old<br>{% endif %}</div>')
    assert written_as(typed, "html") == (
        '<div>Hello {{ name or "friend" }}, {{ email }}<br>{% if attributes.age > 30 %}<br>old'
        '<br>{% endif %}</div>')
    # A field across a block's end is left as written (the merge check names it), and
    # Markdown is never touched.
    across = "<div>{{ name </div><div> }}</div>"
    assert written_as(across, "html") == across
    assert written_as("{{ name or &quot;x&quot; }}", "markdown") == "{{ name or &quot;x&quot; }}"


def test_an_html_body_renders_its_merge_fields_for_each_reader():
    body = written_as('<p>Hello {{ name or &quot;friend&quot; }}</p>'
                      '<p><a href="https://x.example/?e={{ email }}">mine</a></p>', "html")
    frozen = freeze_content(subject="Hi", preheader="", body_markdown=body, body_format="html",
                            from_name="Acme", from_email="a@b.example", postal_address="1 Main St")
    compiled = CompiledRevision(subject="Hi", html_template=frozen.html_template,
                                text_template=frozen.text_template)
    ada = compiled.render(email="ada@example.com", name="Ada", attributes={},
                          unsubscribe_url="https://x.example/u")
    assert "Hello Ada" in ada.html and "?e=ada@example.com" in ada.html
    assert "Hello Ada" in ada.text
    nobody = compiled.render(email="b@example.com", name="", attributes={},
                             unsubscribe_url="https://x.example/u")
    assert "Hello friend" in nobody.html


def test_the_compose_mode_decides_the_format_and_a_bad_one_is_named():
    assert written_format(editor="rich") == ("html", "rich")
    assert written_format(editor="markdown") == ("markdown", "markdown")
    assert written_format(body_format="html", current_editor="rich") == ("html", "html")
    assert written_format(current_format="html", current_editor="rich") == ("html", "rich")
    assert written_format() == ("markdown", "markdown")
    with pytest.raises(ValidationError) as refused:
        written_format(body_format="docx")
    assert refused.value.field == "format" and "markdown" in refused.value.message
    with pytest.raises(ValidationError) as refused:
        written_format(editor="rich", body_format="markdown")
    assert refused.value.field == "format"


def test_markdown_to_html_and_back_keeps_the_words_and_the_merge_fields():
    markdown = ('# Autumn notes\n\nHello {{ attributes.first_name or "friend" }}, a **short** '
                'issue.\n\n{% if attributes.vip %}\n\nFor *you*.\n\n{% endif %}\n\n'
                '- one\n- [two](https://example.com/)\n')
    html = markdown_to_html(markdown)
    assert "<h1>Autumn notes</h1>" in html and "<strong>short</strong>" in html
    assert "{{ attributes.first_name or \"friend\" }}" in html  # no escaped underscore
    back = html_to_markdown(html)
    assert back.startswith("# Autumn notes\n\nHello {{ attributes.first_name or \"friend\" }}, "
                           "a **short** issue.")
    assert "\n{% if attributes.vip %}\n\nFor *you*.\n\n{% endif %}\n" in back
    assert "[two](https://example.com/)" in back
    assert lost_in_markdown(html) == []


def test_the_rich_text_editors_lines_become_paragraphs():
    trix = ('<div>Hello {{ name }}<br><br>{% if attributes.vip %}<br>VIP<br>{% endif %}</div>'
            '<ul><li>one</li></ul>')
    markdown = html_to_markdown(trix)
    assert markdown == ("Hello {{ name }}\n\n{% if attributes.vip %}\n\nVIP\n\n{% endif %}\n\n"
                        "- one\n")
    assert lost_in_markdown(trix) == []


def test_switching_says_what_markdown_or_rich_text_would_lose():
    lost = lost_in_markdown(OWN)
    assert {"tables", "inline styles (colours, fonts, spacing)", "alignment",
            "underlining", "image sizes"} <= set(lost)
    assert lost_in_markdown("<p>Plain <strong>words</strong> and a "
                            '<a href="https://example.com/">link</a>.</p>') == []
    rich = lost_in_rich(OWN)
    assert "tables" in rich and "inline styles (colours, fonts, spacing)" in rich
    assert "images" not in rich and "image sizes" not in rich  # the editor keeps those
    assert lost_in_rich("<h1>Title</h1><p><em>x</em></p>") == []
    assert lost_in_rich("<h2>Smaller</h2>") == ["smaller headings"]
