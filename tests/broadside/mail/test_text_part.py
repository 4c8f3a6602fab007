"""The plain-text part: automatic (made from the body) or the owner's own, whose merge fields
work and are checked like the body's (broadside.mail.text_part, rendering.freeze_content)."""

from __future__ import annotations

import pytest

from broadside.core.errors import ValidationError
from broadside.mail.rendering import CompiledRevision, freeze_content
from broadside.mail.text_part import MAX_TEXT_BODY, automatic_text, clean_text_body

BODY = "# Hello {{ name or \"friend\" }}\n\nRead [the news](https://acme.example/news)."


def render(text_body: str | None, body: str = BODY):
    frozen = freeze_content(subject="Hi", preheader="", body_markdown=body, from_name="Acme",
                            from_email="news@acme.example", postal_address="1 Main St",
                            text_body=text_body)
    return CompiledRevision(subject="Hi", html_template=frozen.html_template,
                            text_template=frozen.text_template).render(
        email="ann@example.com", name="Ann", attributes={"city": "Lyon"},
        unsubscribe_url="https://news.example/u/x")


def test_the_automatic_text_is_the_renderers_with_merge_fields_as_written():
    text = automatic_text(BODY)
    # (a heading holding a merge field is not underlined: its length is not known)
    assert text == ('Hello {{ name or "friend" }}\n\n'
                    "Read the news (https://acme.example/news).")
    # Rendered, it is the automatic part of the email, footer aside.
    assert render(None).text.startswith("Hello Ann\n\nRead the news (https://acme.example/news).")


def test_the_automatic_text_of_html_and_of_broken_merge_fields():
    assert automatic_text("<p>Hi <b>{{ name }}</b></p>", "html") == "Hi {{ name }}"
    assert "Hi" in automatic_text("Hi {{ name ", "markdown")  # said by the preview, not here


def test_the_owners_text_is_sent_with_its_merge_fields_filled_and_the_footer():
    text = render("Dear {{ name }} in {{ attributes.city }},\r\nplain words.").text
    assert text.startswith("Dear Ann in Lyon,\nplain words.\n")
    assert text.rstrip().endswith("Unsubscribe: https://news.example/u/x")
    assert "1 Main St" in text


def test_a_broken_merge_field_in_the_text_part_is_refused_naming_it():
    with pytest.raises(ValidationError, match="plain-text part"):
        render("Dear {{ name ")


def test_blank_means_automatic_and_line_endings_are_made_one():
    assert clean_text_body(None) is None
    assert clean_text_body("  \r\n ") is None
    assert clean_text_body("a\r\nb\rc") == "a\nb\nc"
    with pytest.raises(ValidationError, match="too long"):
        clean_text_body("x" * (MAX_TEXT_BODY + 1))
