"""The one email renderer: sanitising, the layout, merge fields in a sandbox, the MIME message."""

from __future__ import annotations

import email
import email.policy
from html.parser import HTMLParser

import pytest

from broadside.core.errors import ValidationError
from broadside.mail.rendering import (
    CompiledRevision,
    MergeError,
    build_message,
    format_address,
    freeze_content,
)

UNSUBSCRIBE = "https://news.example.com/u/tok-en?x=1&y=2"


def freeze(body: str = "Hello", subject: str = "Subject", preheader: str = "", *,
           postal_address: str = "Acme Ltd\n1 Main Street\nSpringfield"):
    return freeze_content(subject=subject, preheader=preheader, body_markdown=body,
                          from_name="Acme Weekly", from_email="news@example.com",
                          postal_address=postal_address)


def render(body: str = "Hello", subject: str = "Subject", *, name: str = "Alex",
           address: str = "alex@example.com", attributes: dict | None = None, preheader: str = ""):
    frozen = freeze(body, subject, preheader)
    compiled = CompiledRevision(subject=subject, html_template=frozen.html_template,
                                text_template=frozen.text_template)
    return compiled.render(email=address, name=name, attributes=attributes or {},
                           unsubscribe_url=UNSUBSCRIBE)


class Elements(HTMLParser):
    """Every start tag and its attributes, as a browser's parser would see them."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def tags(self) -> set[str]:
        return {tag for tag, _ in self.elements}

    def urls(self) -> list[str]:
        return [attrs[key] or "" for _, attrs in self.elements for key in ("href", "src")
                if key in attrs]


HOSTILE_BODY = """
<script>alert(1)</script>

<img src=x onerror=alert(2)> <a href="javascript:alert(3)" onclick="alert(4)">raw html</a>

[md link](javascript:alert(5)) [mixed case](JaVaScRiPt:alert(6)) <javascript:alert(7)>
[vb](vbscript:msgbox) [data](data:text/html;base64,PHNjcmlwdD4=)

![pixel](http://tracker.example.com/p.gif) ![ok](https://cdn.example.com/a.png)

<svg onload=alert(8)></svg> <iframe src="https://evil.example.com"></iframe>
"""


def test_script_tags_never_reach_the_html_template():
    frozen = freeze(HOSTILE_BODY, subject="<script>alert('subject')</script>",
                    preheader="<script>x</script>")
    elements = Elements(frozen.html_template)
    assert not {"script", "iframe", "svg", "object", "embed"} & elements.tags()
    assert "<script" not in frozen.html_template.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in frozen.html_template  # shown as text


def test_event_handlers_never_survive_into_the_html_template():
    frozen = freeze(HOSTILE_BODY)
    handlers = [(tag, key) for tag, attrs in Elements(frozen.html_template).elements
                for key in attrs if key.lower().startswith("on")]
    assert handlers == []


def test_javascript_and_other_unsafe_urls_never_survive():
    html = render(HOSTILE_BODY).html
    urls = Elements(html).urls()
    assert urls, "the safe image and the unsubscribe link must remain"
    for url in urls:
        assert url.startswith(("https://", "http://", "mailto:")), url
    assert "https://cdn.example.com/a.png" in urls
    # Images load from https only: an http pixel would leak the reader over plain HTTP.
    assert "http://tracker.example.com/p.gif" not in urls


def test_merge_fields_render_per_recipient_in_subject_body_and_text():
    subject = 'News for {{ name or "friend" }}'
    body = ('Hi {{ name | default("friend", true) }} ({{ email }}), greetings to '
            "{{ attributes.city }}!\n\n[Your page](https://example.com/p?e={{ email }})")
    frozen = freeze(body, subject)
    compiled = CompiledRevision(subject=subject, html_template=frozen.html_template,
                                text_template=frozen.text_template)
    ana = compiled.render(email="ana@example.com", name="Ana",
                          attributes={"city": "Lisbon"}, unsubscribe_url=UNSUBSCRIBE + "a")
    anon = compiled.render(email="x@example.com", name="", attributes={},
                           unsubscribe_url=UNSUBSCRIBE + "b")
    assert ana.subject == "News for Ana"
    assert "Hi Ana (ana@example.com), greetings to Lisbon!" in ana.html
    assert "Hi Ana (ana@example.com), greetings to Lisbon!" in ana.text
    assert 'href="https://example.com/p?e=ana@example.com"' in ana.html
    assert anon.subject == "News for friend"
    assert "Hi friend (x@example.com), greetings to !" in anon.text
    assert "Lisbon" not in anon.html and "Ana" not in anon.html


def test_unknown_fields_render_empty_and_never_raise():
    rendered = render("a{{ nosuch }}b{{ attributes.missing.deeper }}c{{ nosuch() }}"
                      "d{{ attributes.city | upper }}e{{ nosuch + 1 }}f")
    assert "abcdef" in rendered.text


def test_if_blocks_choose_paragraphs_per_recipient():
    body = "Hello.\n\n{% if attributes.vip %}\n\nYou are a VIP.\n\n{% endif %}\n\nBye."
    frozen = freeze(body)
    compiled = CompiledRevision(subject="s", html_template=frozen.html_template,
                                text_template=frozen.text_template)
    vip = compiled.render(email="a@x.com", name="", attributes={"vip": True},
                          unsubscribe_url=UNSUBSCRIBE)
    other = compiled.render(email="b@x.com", name="", attributes={},
                            unsubscribe_url=UNSUBSCRIBE)
    assert "You are a VIP." in vip.html and "You are a VIP." in vip.text
    assert "VIP" not in other.html and "VIP" not in other.text
    assert "<p></p>" not in other.html
    assert "Hello.\n\nBye." in other.text


def test_subscriber_name_with_markup_is_escaped_in_html_but_plain_in_text():
    rendered = render("Dear {{ name }},", subject="For {{ name }}", name="<b>Bob</b> & co")
    assert "<b>Bob</b>" not in rendered.html
    assert "Dear &lt;b&gt;Bob&lt;/b&gt; &amp; co," in rendered.html
    assert "<title>For &lt;b&gt;Bob&lt;/b&gt; &amp; co</title>" in rendered.html
    assert "Dear <b>Bob</b> & co," in rendered.text
    assert rendered.subject == "For <b>Bob</b> & co"


def test_attribute_values_cannot_inject_html_or_links():
    rendered = render("Bio: {{ attributes.bio }}",
                      attributes={"bio": '<a href="javascript:alert(1)">x</a><script>y</script>'})
    assert "<script" not in rendered.html and "javascript:" not in "".join(
        Elements(rendered.html).urls())


@pytest.mark.parametrize("source", [
    "{{ ''.__class__.__mro__ }}",
    "{{ name.__class__.__base__.__subclasses__() }}",
    "{{ attributes['__class__'] }}",
    "{{ name|attr('__class__') }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ self._TemplateReference__context }}",
])
def test_sandbox_refuses_access_to_internals_with_a_clear_error(source):
    with pytest.raises(ValidationError) as caught:
        freeze(f"Hello {source}")
    assert "body" in caught.value.message


def test_sandbox_renders_nothing_for_internals_reached_through_format_strings():
    rendered = render("[{{ '{0.__class__.__mro__}'.format(name) }}]")
    assert "[]" in rendered.text and "class" not in rendered.text


@pytest.mark.parametrize("source", [
    "{{ config }}{{ request }}{{ lipsum }}{{ range }}{{ namespace }}",
    "{{ name.format }}{{ ''.join }}",
    "{{ attributes.items }}",
])
def test_sandbox_exposes_no_globals_or_methods_worth_rendering(source):
    rendered = render(f"[{source}]", attributes={"city": "Paris"})
    assert "[]" in rendered.text


def test_safe_filter_is_not_available_so_values_are_always_escaped():
    with pytest.raises(ValidationError, match="filter 'safe'"):
        freeze("{{ attributes.bio | safe }}")


@pytest.mark.parametrize(("source", "tag"), [
    ("{% for x in attributes %}{{ x }}{% endfor %}", "for"),
    ("{% include 'layout.html' %}", "include"),
    ("{% extends 'layout.html' %}", "extends"),
    ("{% set x = 1 %}", "set"),
    ("{% autoescape false %}{{ name }}{% endautoescape %}", "autoescape"),
    ("{% macro m() %}{% endmacro %}", "macro"),
    ("{{ 2 ** 100000 }}", "**"),
])
def test_only_values_and_if_blocks_are_allowed(source, tag):
    with pytest.raises(ValidationError) as caught:
        freeze(source)
    assert f"'{tag}'" in caught.value.message


def test_bad_merge_syntax_names_the_field_and_line():
    with pytest.raises(MergeError) as caught:
        freeze("First line\n\nHello {{ name ")
    assert isinstance(caught.value, ValidationError)
    assert "body" in caught.value.message and "line 3" in caught.value.message
    with pytest.raises(ValidationError, match="subject"):
        freeze("fine", subject="Hi {% if name %}")


def test_runaway_repetition_is_refused_at_freeze_time():
    with pytest.raises(ValidationError, match="too long"):
        freeze("{{ 'x' * 100000000 }}")


def test_a_value_that_fails_for_one_recipient_raises_a_merge_error():
    frozen = freeze("Next year: {{ attributes.age + 1 }}")
    compiled = CompiledRevision(subject="s", html_template=frozen.html_template,
                                text_template=frozen.text_template)
    ok = compiled.render(email="a@x.com", name="", attributes={"age": 41},
                         unsubscribe_url=UNSUBSCRIBE)
    assert "Next year: 42" in ok.text
    with pytest.raises(MergeError, match="b@x.com"):
        compiled.render(email="b@x.com", name="", attributes={"age": "forty"},
                        unsubscribe_url=UNSUBSCRIBE)


def test_a_merge_field_cannot_be_a_whole_link_address():
    with pytest.raises(ValidationError, match="https://"):
        freeze("[my page]({{ attributes.link }})")


def test_body_with_raw_blocks_and_braces_cannot_break_the_layout():
    body = ("Write {% raw %}{{ name }}{% endraw %} to greet, {{ name }}.\n\n"
            "Literal: {% raw %}{#{ and }} and { { and %}{% endraw %} {\n\n"
            "`{% raw %}{% if %}{% endraw %}`")
    rendered = render(body, subject="{% raw %}{{ subject }}{% endraw %} for {{ name }}")
    assert "Write {{ name }} to greet, Alex." in rendered.text
    assert "{#{ and }} and { { and %}" in rendered.text
    assert ">{% if %}</code>" in rendered.html
    assert rendered.subject == "{{ subject }} for Alex"
    # The layout after the body is intact: footer and unsubscribe link.
    assert f'href="{UNSUBSCRIBE.replace("&", "&amp;")}"' in rendered.html
    assert rendered.html.rstrip().endswith("</html>")


def test_layout_has_preheader_postal_address_and_a_visible_unsubscribe_link():
    rendered = render("Body text", preheader="A short teaser for {{ name }}")
    html = rendered.html
    assert "A short teaser for Alex" in html
    assert html.index("A short teaser") < html.index("Body text")
    assert "Acme Ltd<br>1 Main Street<br>Springfield" in html
    unsubscribe_links = [attrs for tag, attrs in Elements(html).elements
                         if tag == "a" and attrs.get("href") == UNSUBSCRIBE]
    assert len(unsubscribe_links) == 1
    assert ">Unsubscribe</a>" in html
    assert "max-width: 600px" in html
    assert "Acme Ltd\n1 Main Street\nSpringfield\nUnsubscribe: " + UNSUBSCRIBE in rendered.text


def test_css_is_inlined_into_the_users_elements():
    html = render("# Title\n\nA paragraph with a [link](https://example.com).").html
    elements = Elements(html).elements
    for tag in ("h1", "p", "a"):
        styled = [attrs for t, attrs in elements if t == tag]
        assert styled and all("style" in attrs for attrs in styled), tag
    assert "<link" not in html


def test_text_alternative_comes_from_the_same_source_with_links_shown():
    rendered = render("# Title\n\n- one\n- two\n\nSee [the site](https://example.com/x).\n\n"
                      "```\nline 1\n  line 2\n```")
    # As a person would type it: the heading underlined, "- " lists, `text (URL)` links.
    assert rendered.text.startswith("Title\n=====\n\n")
    assert "- one\n- two\n" in rendered.text
    assert "See the site (https://example.com/x)." in rendered.text and "](" not in rendered.text
    assert "line 1\n      line 2" in rendered.text
    assert "<" not in rendered.text.replace("<b>", "")


def test_build_message_is_multipart_alternative_text_then_html():
    rendered = render("Héllo {{ name }}", subject="Café news for {{ name }}", name="Zoë")
    message = build_message(
        rendered, from_addr=format_address("Acme, Weekly", "news@example.com"),
        to_addr="zoe@example.com", message_id="d42.b7@example.com",
        headers={"List-Unsubscribe": f"<{UNSUBSCRIBE}>",
                 "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"},
    )
    parsed = email.message_from_bytes(message.as_bytes(), policy=email.policy.default)
    assert parsed.get_content_type() == "multipart/alternative"
    parts = list(parsed.iter_parts())
    assert [p.get_content_type() for p in parts] == ["text/plain", "text/html"]
    assert "Héllo Zoë" in parts[0].get_content()
    assert "Héllo Zoë" in parts[1].get_content()
    assert parsed["Subject"] == "Café news for Zoë"
    assert parsed["From"] == '"Acme, Weekly" <news@example.com>'
    assert parsed["To"] == "zoe@example.com"
    assert parsed["Message-ID"] == "<d42.b7@example.com>"
    assert parsed["Date"]
    assert parsed["List-Unsubscribe"] == f"<{UNSUBSCRIBE}>"
    assert parsed["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


def test_line_breaks_in_a_value_cannot_add_headers():
    rendered = render("x", subject="Hi {{ name }}", name="Bob\r\nBcc: victim@example.com")
    assert rendered.subject == "Hi Bob Bcc: victim@example.com"
    message = build_message(rendered, from_addr="a@example.com", to_addr="b@example.com",
                            message_id="<1@example.com>", headers={})
    parsed = email.message_from_bytes(message.as_bytes(), policy=email.policy.default)
    assert parsed["Bcc"] is None


@pytest.mark.parametrize(
    ("body", "encoding"),
    [
        ("Plain ASCII, short lines.", "7bit"),
        ("Caf\u00e9 and \u201cquotes\u201d", "quoted-printable"),
        ("x" * 1200, "quoted-printable"),  # a line over SMTP's 998-octet limit
    ],
)
def test_each_part_is_sent_as_is_when_it_can_be_and_quoted_printable_otherwise(body, encoding):
    """Like the email package: 7bit for ASCII in short lines (no encoding work, and no "=3D"
    for every "=" of the HTML), quoted-printable when it must; the reader sees the same text."""
    from broadside.mail.rendering import RenderedEmail, message_bytes

    rendered = RenderedEmail(subject="S", html=f"<p>{body}</p>\n", text=f"{body}\n")
    raw = message_bytes(rendered, from_addr="a@example.com", to_addr="b@example.com",
                        message_id="<1@example.com>", headers={})
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    parts = list(parsed.iter_parts())
    assert [p["Content-Transfer-Encoding"] for p in parts] == [encoding, encoding]
    assert parts[0].get_content().replace("\r\n", "\n") == f"{body}\n"
    assert parts[1].get_content().replace("\r\n", "\n") == f"<p>{body}</p>\n"
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))


def test_a_frozen_revision_is_compiled_once_per_process_and_never_confused_with_another():
    from broadside.mail.rendering import compiled_revision

    frozen = freeze("Hello {{ name }}")
    first = compiled_revision("Subject", frozen.html_template, frozen.text_template)
    assert compiled_revision("Subject", frozen.html_template, frozen.text_template) is first
    other = compiled_revision("Subject", freeze("Bye {{ name }}").html_template, frozen.text_template)
    assert other is not first
    assert "Bye Alex" in other.render(email="a@example.com", name="Alex", attributes={},
                                      unsubscribe_url=UNSUBSCRIBE).html
