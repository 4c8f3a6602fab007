"""Plain merge templates (broadside.mail.merge_plain) render exactly what the sandbox renders.

Each revision whose merge fields are plain substitutions is rendered without the sandbox's
per-render machinery; here every such render is compared with the sandboxed render of the same
template for the same person (text, or the same error), over random templates and random
people: HTML metacharacters, non-ASCII, empty, missing, None and non-text values, values near
the limits. And the fast path is shown to be taken where it should, and only there.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broadside.mail import merge_plain
from broadside.mail.merge_plain import PLAIN_VALUE_LIMIT, PlainTemplate, plain_template
from broadside.mail.merge_sandbox import HTML_ENV, TEXT_ENV
from broadside.mail.rendering import CompiledRevision, MergeError, _context, freeze_content

FIELDS = [
    "{{ name }}", '{{ name or "friend" }}', '{{ name | default("friend", true) }}',
    '{{ name|d("<b>&amp;") }}', "{{ name | default }}", "{{ attributes.city }}",
    "{{ attributes.city or name }}", "{{ attributes.missing }}", "{{ attributes.a.b }}",
    "{{ attributes.n }}", "{{ attributes.vip and name }}", "{{ email }}",
    "{{ unsubscribe_url }}", "{{ view_url }}", "{{ nobody }}", "{{ nobody.at.all }}",
    "{{ '{' }}", '{{ "<lit & \'q\'>" }}',
    '{{ attributes.tags | default("none", true) }}',
    "{% if attributes.vip %}VIP {{ name }}{% endif %}",
    "{% if not name %}Hi{% elif attributes.city %}In {{ attributes.city }}"
    "{% else %}<none>{% endif %}",
    "{% if view_url %}<a href=\"{{ view_url }}\">view</a>{% endif %}",
]
# Anything else goes to the sandbox whole: another filter, a method, an operator...
NOT_PLAIN = [
    "{{ name | upper }}", "{{ name ~ '!' }}", "{{ attributes['city'] }}", "{{ name * 2 }}",
    "{{ attributes.keys }}", "{{ name.upper() }}", "{{ name == 'x' }}", "{{ 1.5 }}",
    "{{ name if name else 'x' }}", '{{ name | default("x", 2**40) }}',
    "{{ attributes.city | default(name) }}",
]
LITERALS = ["Hello ", "<p>&amp; é ✉</p>", "\n\n\n", " { } ", "%s ", "Zoë\n"]

text_values = st.text(alphabet=st.sampled_from(list("aZ <>&\"'é✉😀\n\r\t{}%") + [" "]),
                      max_size=30)
json_values = st.one_of(text_values, st.none(), st.booleans(), st.integers(-5, 10**12),
                        st.floats(allow_nan=False), st.lists(text_values, max_size=3))
attributes = st.dictionaries(st.sampled_from(["city", "vip", "n", "tags", "a", "missing2"]),
                             st.one_of(json_values, st.fixed_dictionaries({"b": json_values})),
                             max_size=5)
templates = st.lists(st.one_of(st.sampled_from(FIELDS), st.sampled_from(LITERALS)),
                     min_size=1, max_size=8).map("".join)


def sandbox_only(compiled: CompiledRevision) -> CompiledRevision:
    compiled._plain_subject = compiled._plain_html = compiled._plain_text = None
    return compiled


def outcome(compiled: CompiledRevision, **person):
    try:
        return compiled.render(**person)
    except MergeError as error:
        return ("error", error.message)


def both(subject: str, html: str, text: str) -> tuple[CompiledRevision, CompiledRevision]:
    fast = CompiledRevision(subject=subject, html_template=html, text_template=text)
    slow = sandbox_only(CompiledRevision(subject=subject, html_template=html, text_template=text))
    return fast, slow


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subject=templates, html=templates, text=templates, name=text_values, attrs=attributes,
       view=st.sampled_from(["", "https://x.example/v/1?a=1&b=<2>"]))
def test_plain_render_is_the_sandboxs_for_random_people(subject, html, text, name, attrs, view):
    fast, slow = both(subject, html, text)
    person = {"email": "zoë@example.com", "name": name, "attributes": attrs,
              "unsubscribe_url": "https://x.example/u/t?x=1&y=2", "view_url": view}
    assert outcome(fast, **person) == outcome(slow, **person)


@settings(max_examples=300, deadline=None)
@given(template=templates, name=text_values, attrs=attributes)
def test_each_plain_template_renders_the_sandboxs_text_or_nothing(template, name, attrs):
    context = _context("a@example.com", name, attrs, "https://x.example/u?a=1&b=2")
    for env in (HTML_ENV, TEXT_ENV):
        plain = plain_template(env.parse(template), autoescape=env.autoescape)
        assert plain is not None  # every field above is plain
        rendered = plain.render(dict(context), limit=1_000_000)
        if rendered is not None:
            assert rendered == env.from_string(template).render(dict(context))


@pytest.mark.parametrize("field", NOT_PLAIN)
def test_other_merge_fields_go_to_the_sandbox(field):
    for env in (HTML_ENV, TEXT_ENV):
        assert plain_template(env.parse(f"a {field} b"), autoescape=env.autoescape) is None
    fast, slow = both(field, f"<p>{field}</p>", field)
    person = {"email": "a@example.com", "name": "Zoë <x>", "attributes": {"city": "Malmö & Co"},
              "unsubscribe_url": "https://x.example/u"}
    assert outcome(fast, **person) == outcome(slow, **person)


def test_a_newsletter_renders_on_the_plain_path(monkeypatch):
    frozen = freeze_content(
        subject='News for {{ name or "you" }}, {{ attributes.city }}', preheader="Our news",
        body_markdown='# Hello {{ name | default("friend", true) }}\n\n'
                      "{% if attributes.vip %}\n\nEarly access, {{ email }}.\n\n{% endif %}\n\n"
                      "In {{ attributes.city }} & elsewhere.\n",
        from_name="Acme", from_email="news@example.com", postal_address="1 Main St")
    fast, slow = both('News for {{ name or "you" }}, {{ attributes.city }}',
                      frozen.html_template, frozen.text_template)
    assert all(isinstance(t, PlainTemplate)
               for t in (fast._plain_subject, fast._plain_html, fast._plain_text))
    people = [("Zoë <Ünïcode> & \"co\"", {"city": "Malmö & <Lund>", "vip": True}),
              ("", {}), ("Reader 1", {"city": "Oslo", "vip": False})]
    for name, attrs in people:
        person = {"email": "r@example.com", "name": name, "attributes": attrs,
                  "unsubscribe_url": "https://x.example/u/a&b", "view_url": "https://x/v"}
        expected = slow.render(**person)
        # No sandbox render for these people: the plain path answered all three templates.
        monkeypatch.setattr("broadside.mail.rendering.render_bounded", _refuse)
        assert fast.render(**person) == expected
        monkeypatch.undo()


def _refuse(*args, **kwargs):
    raise AssertionError("the sandbox rendered a plain template")


def test_values_past_the_plain_limits_fall_back_to_the_sandbox():
    fast, slow = both("{{ name }}{{ name }}", "<p>{{ name }}</p>" * 30, "{{ attributes.bio }}")
    for name, bio in [("n" * 600, "b"),  # the subject would pass its 1,000 characters
                      ("x", "b" * (PLAIN_VALUE_LIMIT + 1)),  # a value past the plain limit
                      ("&" * 40_000, "b"),  # HTML past its limit, and the work budget
                      ("<" * 9_000, "b" * 99_000)]:
        person = {"email": "a@example.com", "name": name, "attributes": {"bio": bio},
                  "unsubscribe_url": "u"}
        assert outcome(fast, **person) == outcome(slow, **person)
    subject = fast._plain_subject
    assert subject.render(_context("a@x", "n" * 600, {}, "u"), limit=1_000) is None
    assert subject.render(_context("a@x", "n" * 400, {}, "u"), limit=1_000) == "n" * 800


def test_the_work_budget_is_never_approached_on_the_plain_path(monkeypatch):
    # Lower the budget: a render the sandbox would refuse for work is never answered here.
    monkeypatch.setattr(merge_plain, "RENDER_BUDGET", 200_000)
    plain = plain_template(HTML_ENV.parse("{{ name }}" * 10), autoescape=True)
    assert plain.render(_context("a@x", "ab", {}, "u"), limit=10**6) == "ab" * 10
    assert plain.render(_context("a@x", "a" * 5_000, {}, "u"), limit=10**6) is None


def test_layouts_stay_few_and_share_the_literal_text():
    # Eight independent `if`s: 256 ways through; at most 64 layouts are kept, and each refers
    # to the template's own literal strings (a big body is never copied per layout).
    big = "<p>" + "x" * 100_000 + "</p>"
    source = "".join(f"{{% if attributes.f{i} %}}{big}{i}{{% endif %}}" for i in range(8))
    plain = plain_template(HTML_ENV.parse(source), autoescape=True)
    sandbox = HTML_ENV.from_string(source)
    for combination in range(256):
        attrs = {f"f{i}": bool(combination >> i & 1) for i in range(8)}
        context = _context("a@x", "n", attrs, "u")
        assert plain.render(dict(context), limit=10**7) == sandbox.render(dict(context))
        assert len(plain._layouts) <= 64
    literals = {id(chunk) for chunk in _literals(plain._program)}
    for chunks, _, _ in plain._layouts.values():
        assert all(id(chunk) in literals or chunk == "" for chunk in chunks)


def _literals(program):
    for step in program:
        if type(step) is str:
            yield step
        elif type(step) is tuple:
            branches, otherwise = step
            for _, body in branches:
                yield from _literals(body)
            yield from _literals(otherwise)
