"""Merge-field mistakes are found where they are: the line and column of the real mistake
(not where Jinja's parser gave up), fields nobody has with the closest known one, fields
printed without a fallback, and a `}}` that closes nothing. Pure functions: no database."""

from __future__ import annotations

import pytest

from broadside.mail.merge_check import field_uses, stray_closers, suggest
from broadside.mail.merge_fields import MergeError, check_merge_fields


def error_of(source: str, where: str = "body") -> MergeError:
    with pytest.raises(MergeError) as caught:
        check_merge_fields(source, where)
    return caught.value


def test_an_unclosed_field_on_line_1_is_reported_at_its_opening_braces_not_line_3():
    # Jinja alone says "unexpected '%'" on line 3.
    error = error_of("Hi {{ name,\n\n{% if attributes.vip %}Thanks!{% endif %}")
    assert (error.line, error.column) == (1, 4)
    assert "line 1, column 4" in error.message
    assert "{{ is never closed" in error.message and "line 3" not in error.message
    assert "unexpected" not in error.message.lower()


def test_an_unclosed_field_before_another_tag_on_the_same_paragraph_names_both():
    error = error_of("Dear {{ name {% if attributes.vip %}VIP{% endif %}")
    assert (error.line, error.column) == (1, 6)
    assert "before the {% on line 1, column 14" in error.message


def test_an_unclosed_field_at_the_end_is_reported_at_its_opening_braces():
    error = error_of("Line one\n\nHello {{ name ")
    assert (error.line, error.column) == (3, 7)
    assert "merge-field error on line 3, column 7" in error.message


@pytest.mark.parametrize(("source", "line", "column", "words"), [
    ("a {% if attributes.vip \n b", 1, 3, "{% is never closed"),
    ("x\n  {% if attributes.vip %} b", 2, 3, "{% if %} is never closed: add {% endif %}"),
    ("a\n{% endif %}", 2, 1, "{% endif %} has no {% if %}"),
    ("{% if a %}\n{% else %}\n{% else %}{% endif %}", 3, 1, "comes after the {% else %}"),
    ("x {% if a }} y {% endif %}", 1, 3, "{% is closed with }}"),
    ('{{ name or "friend }}', 1, 12, 'This " starts a text that is never closed'),
    ("{# a note", 1, 1, "comment #} is never closed"),
    ("{% raw %} {{", 1, 1, "{% raw %} is never closed"),
    ("ok\nx {{ name !}}", 2, 11, "Unexpected character '!'"),
    ("ok\n\nx {{ name | upper( }}", 3, 3, "expected ')'"),
])
def test_each_delimiter_mistake_has_its_line_and_column(source, line, column, words):
    error = error_of(source)
    assert (error.line, error.column) == (line, column), error.message
    assert words in error.message


def test_the_subject_is_checked_and_named():
    error = error_of("Hello {{ name", where="subject")
    assert error.message.startswith("The subject has a merge-field error on line 1, column 7")


@pytest.mark.parametrize("source", [
    'Hi {{ name or "friend" }}, {{ attributes.city | default("there") }}!',
    "{% if attributes.vip %}\n\nThanks, {{ attributes.vip | upper }}.\n\n{% endif %}",
    '{{ attributes["first name"] | default("") | trim }} {{ attributes.get("zip", "") }}',
    '{{ "}}" }} and {{ {"a": 1}["a"] }} and {% raw %}{{ not a field }}{% endraw %}',
    "{{- name -}} {# a note #} {{ email }} {{ unsubscribe_url }}",
])
def test_valid_fields_with_filters_and_fallbacks_raise_nothing_and_warn_nothing(source):
    check_merge_fields(source, "body")
    assert [use for use in field_uses(source) if use.kind == "unknown" or use.printed_bare
            and use.kind == "attribute"] == []
    assert list(stray_closers(source)) == []


def test_a_name_nobody_has_is_found_with_its_place_and_the_closest_known_field():
    uses = field_uses("Hello!\n\nDear {{ nmae }},")
    assert [(u.kind, u.key, u.line, u.column) for u in uses] == [("unknown", "nmae", 3, 9)]
    assert suggest("nmae", ["name", "email", "unsubscribe_url", "city"]) == "name"
    assert suggest("Citty", ["name", "email", "city"]) == "city"
    assert suggest("zzzz", ["name", "email", "city"]) is None


def test_a_field_is_bare_unless_it_has_a_fallback_or_an_if_on_it():
    source = ("{{ attributes.city }} {{ attributes.town or 'here' }} "
              "{% if attributes.vip %}{{ attributes.vip }}{% endif %} "
              "{{ attributes.zip if attributes.zip else '' }} {{ name }} {{ name | d('you') }} "
              "{% if attributes.a is defined %}{{ attributes.b }}{% endif %}")
    bare = {(use.written, use.printed_bare) for use in field_uses(source)}
    assert ("attributes.city", True) in bare
    assert ("attributes.town", False) in bare
    assert ("attributes.vip", True) not in bare
    assert ("attributes.zip", True) not in bare
    assert ("name", True) in bare and ("name", False) in bare
    assert ("attributes.b", True) in bare  # an if on another field guards nothing


def test_a_closer_outside_any_field_is_found_where_it_is():
    assert list(stray_closers("Hello name }}\n{ email }}")) == [(1, 12, "}}"), (2, 9, "}}")]
    assert list(stray_closers("50% off %} now")) == [(1, 9, "%}")]
