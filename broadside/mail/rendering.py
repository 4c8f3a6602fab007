"""The one email renderer: the compose preview and the sending worker both use it.

Freezing (once per revision, milliseconds):
    Markdown (markdown-it-py, commonmark, raw HTML escaped)
    -> sanitised HTML (nh3: no script, no event handlers, only http/https/mailto links and
       https images)
    -> the responsive layout in templates/email/layout.html, in the owner's design
       (`EmailDesign`: logo, colour, width, font, footer text; read when the revision is
       frozen, so one broadcast is one design and a later change never alters it)
    -> CSS inlined (css-inline)                                      = html_template
    and the same sanitised HTML -> plain text (broadside.mail.plain_text: links as
    "text (URL)", lists and headings as typed, each image as "[alt: URL]", no logo)
    + footer                                                        = text_template

The double opt-in email (broadside.mail.confirmation) goes through the same pipeline
(`freeze_layout`) with the owner's words, a confirm button and no unsubscribe link.

Merge fields (`{{ name or "friend" }}`, `{{ attributes.city }}`) are cut out of the user's text
before any of that and carried through as opaque placeholders, then put back as sandboxed
Jinja; every other character of the result is embedded as literal data (see
merge_fields.jinja_literal). So the user's fields are the only user-controlled template code,
and a body containing `{% raw %}` or `{{` can never break the layout.

Rendering (per recipient, tens of microseconds): `CompiledRevision` compiles the three templates
once (per slice), and `render` fills them in with autoescaping on for HTML and off for text;
a template whose merge fields are plain substitutions is filled in by broadside.mail.merge_plain
(the same text, without the sandbox's per-render machinery), anything else by the sandbox.
The wire form (`message_bytes`, `build_message`) is broadside.mail.mime's, re-exported here.
"""

from __future__ import annotations

import functools
import logging
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, TemplateError, select_autoescape
from jinja2.sandbox import SecurityError
from markupsafe import Markup

from broadside.core.i18n import _, gettext, ngettext
from broadside.mail.merge_fields import (
    MergeError,
    Placeholders,
    check_merge_fields,
    compile_template,
    join_template,
    split_merge_fields,
)
from broadside.mail.merge_plain import PlainTemplate, plain_template
from broadside.mail.merge_sandbox import HTML_ENV, TEXT_ENV, MergeEnvironment, render_bounded
from broadside.mail.mime import RenderedEmail, build_message, format_address, message_bytes
from broadside.mail.plain_text import html_to_text
from broadside.mail.sanitise import (
    ALLOWED_ATTRIBUTES,
    ALLOWED_TAGS,
    BODY_FORMATS,
    body_to_safe_html,
    html_to_safe_html,
    markdown_to_safe_html,
)

__all__ = [
    "CompiledRevision", "EmailDesign", "FrozenContent", "MergeError", "RenderedEmail",
    "BODY_FORMATS", "build_message", "body_to_safe_html", "format_address", "freeze_content",
    "html_to_safe_html", "markdown_to_safe_html", "ALLOWED_TAGS", "ALLOWED_ATTRIBUTES",
    "freeze_layout", "message_bytes",
]

log = logging.getLogger(__name__)
EMAIL_TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "email"

# `.html` templates are autoescaped, `.txt` ones are not (as Flask does for its pages).
_layout_env = Environment(loader=FileSystemLoader(EMAIL_TEMPLATES),
                          autoescape=select_autoescape(default_for_string=True),
                          keep_trailing_newline=True, extensions=["jinja2.ext.i18n"])
# The layout's own words, in the language being spoken when it is frozen (the reader's:
# broadside.campaigns.content.languages freezes one per language).
_layout_env.install_gettext_callables(gettext, ngettext, newstyle=True)  # type: ignore[attr-defined]

# Runs of three or more line breaks, as `\n{3,}` finds them; written with a literal prefix, so
# the regex engine jumps from one "\n\n\n" to the next instead of trying a repeat at every
# position of the text (~30x faster: it ran on every recipient's plain text).
_blank_lines = re.compile(r"\n\n\n+")

# The most one rendered message may hold (characters; merge_fields bounds each value and the
# work of each render). Over these, the draft is refused (for the sample recipient) or that
# one recipient's row fails.
MAX_SUBJECT_CHARS = 1_000
MAX_HTML_CHARS = 1_000_000
MAX_TEXT_CHARS = 1_000_000


# Markdown and sanitising (broadside.mail.sanitise), CSS inlining and HTML -> text run when
# content is frozen (at Send, for a draft's preview, a confirmation email), never per
# recipient: they are imported on first use, so a worker that only sends keeps them (about
# 8 MB) out of its memory.
@functools.cache
def _inliner() -> Any:
    import css_inline

    # No network: a body cannot make the server fetch a stylesheet.
    return css_inline.CSSInliner(keep_at_rules=True, load_remote_stylesheets=False)


SYSTEM_FONTS = Markup('-apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, Helvetica, '
                      'Arial, sans-serif')


@dataclass(frozen=True)
class EmailDesign:
    """How an email looks (broadside.mail.design builds it from Settings -> Design and validates
    every value: the colours are #rrggbb, the font stack one of a fixed list, so they can go
    into the layout's CSS as they are). The defaults are the layout before designs existed."""

    colour: str = "#1f5fbf"
    on_colour: str = "#ffffff"  # text on the colour (a button's label)
    link_colour: str = "#1f5fbf"  # the colour, made readable on white
    dark_link_colour: str = "#6893d4"  # the colour, made readable on DARK_BODY (dark mode)
    width: int = 600
    font_stack: str = SYSTEM_FONTS
    footer_text: str = ""
    logo_url: str = ""  # absolute; "" for no logo
    logo_alt: str = "Logo"
    logo_width: int = 0  # as shown, in CSS pixels
    logo_height: int = 0


PLAIN_DESIGN = EmailDesign()
DARK_BODY = "#1c2128"  # the email body's background in dark mode (templates/email/layout.html)
# The language and direction of the email's text (`<html lang dir>`), until messages have one.
DEFAULT_LANGUAGE, DEFAULT_DIRECTION = "en", "ltr"
_LANGUAGE = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*")


@dataclass(frozen=True)
class FrozenContent:
    html_template: str  # full email HTML, CSS inlined, merge fields still as sandboxed Jinja
    text_template: str  # plain-text alternative from the same source, merge fields in place


def _new_placeholders(*texts: str) -> Placeholders:
    while True:
        nonce = secrets.token_hex(5)
        if not any(nonce in text for text in texts):
            return Placeholders(nonce)


def _unwrap_block_fields(html: str, placeholders: Placeholders) -> str:
    """A paragraph holding only `{% if %}`-style fields becomes just those fields, so a
    condition on its own line wraps the paragraphs between, without empty <p></p> around."""
    token = placeholders.pattern.pattern.replace("[vb]", "b")
    return re.sub(rf"<p>\s*((?:{token}\s*)+)</p>", r"\1", html)


def freeze_content(*, subject: str, preheader: str, body_markdown: str, from_name: str,
                   from_email: str, postal_address: str,
                   design: EmailDesign = PLAIN_DESIGN, newsletter: bool = True,
                   body_format: str = "markdown", text_body: str | None = None,
                   language: str = DEFAULT_LANGUAGE, direction: str = DEFAULT_DIRECTION
                   ) -> FrozenContent:
    """Render the layout once, leaving merge fields for `CompiledRevision.render`.

    Raises ValidationError (MergeError) with a message naming the field and line when the
    subject, preheader or body has merge syntax that is wrong or not allowed. `from_email` is
    part of the frozen identity (the worker's envelope and From); the layout prints only the
    name and the postal address. `newsletter=False`: a transactional template's layout, with
    no unsubscribe link (a password reset is nobody's subscription). `body_markdown` is the
    body as written in `body_format` ("markdown" or "html"); `text_body`, when given, is the
    plain-text part as the owner wrote it (the footer is still added), instead of one made
    from the body. `language` (a BCP 47 tag) and `direction` ("ltr", "rtl") are the text's,
    set on the email's `<html>` and its outer table (Gmail drops `<html>`).
    """
    frozen = freeze_layout(subject=subject, preheader=preheader, body_markdown=body_markdown,
                           from_name=from_name, postal_address=postal_address, design=design,
                           link=("unsubscribe_url", "") if newsletter else None,
                           others=(from_email,), body_format=body_format,
                           text_body=text_body, language=language, direction=direction)
    # Prove now, not at the first recipient, that everything compiles and renders.
    compiled = CompiledRevision(subject=subject, html_template=frozen.html_template,
                                text_template=frozen.text_template)
    try:
        compiled.fill(_context("someone@example.com", "", {}, "https://example.invalid/u/x"))
    except _RENDER_ERRORS as exc:
        raise MergeError(f"A merge field fails even for a sample subscriber: {_said(exc)}"
                         ) from None
    return frozen


def freeze_layout(*, subject: str, preheader: str, body_markdown: str, from_name: str,
                  postal_address: str, design: EmailDesign, link: tuple[str, str] | None,
                  others: tuple[str, ...] = (), body_format: str = "markdown",
                  text_body: str | None = None, language: str = DEFAULT_LANGUAGE,
                  direction: str = DEFAULT_DIRECTION) -> FrozenContent:
    """The layout around the body, merge fields left in. `link` is (name of the context
    variable, button label): `unsubscribe_url` for the owner's mail (a footer link), or
    another (`confirm_url`) for a notice, shown as a button after the body; None: neither (a
    transactional template's mail, whose links are its body's own)."""
    check_merge_fields(subject, "subject")
    check_merge_fields(preheader, "preheader")
    check_merge_fields(body_markdown, "body")
    if text_body is not None:
        check_merge_fields(text_body, "plain-text part")
    placeholders = _new_placeholders(subject, preheader, body_markdown, text_body or "",
                                     from_name,
                                     postal_address, design.footer_text, design.logo_url,
                                     design.logo_alt, *others)
    subject_text = split_merge_fields(subject, placeholders)
    preheader_text = split_merge_fields(preheader, placeholders)
    body_source = split_merge_fields(body_markdown, placeholders)
    body_html = _unwrap_block_fields(body_to_safe_html(body_source, body_format), placeholders)
    lost = set(placeholders.pattern.findall(body_source)) - set(
        placeholders.pattern.findall(body_html))
    if lost:
        fields = ", ".join(sorted(placeholders.fields[token] for token in lost))
        raise MergeError(f"The body has a merge field where it is not allowed: {fields}. "
                         "A link or image address must start with https:// (or http://, "
                         "mailto:) before any merge field.")
    variable, label = link or ("", "")
    url = placeholders.add(f"{{{{ {variable} }}}}", block=False) if variable else ""
    unsubscribe = url if variable == "unsubscribe_url" else ""
    # The owner's mail may carry "View in your browser" (broadside.campaigns.archive.links): a link
    # only in the copies given a `view_url`, so the tokens are `{% if %}`, the URL, `{% endif %}`.
    view = ((placeholders.add("{% if view_url %}", block=True),
             placeholders.add("{{ view_url }}", block=False),
             placeholders.add("{% endif %}", block=True)) if unsubscribe else ("", "", ""))
    postal_lines = [line.strip() for line in postal_address.splitlines() if line.strip()]
    footer_paragraphs = [[line for line in block.split("\n") if line]
                         for block in design.footer_text.split("\n\n") if block.strip()]

    layout = _layout_env.get_template("layout.html").render(
        subject=subject_text, preheader=preheader_text, body=Markup(body_html),
        from_name=from_name.strip(), postal_lines=postal_lines, unsubscribe_url=unsubscribe,
        design=design, footer_paragraphs=footer_paragraphs,
        action_url="" if unsubscribe else url, action_label=label, view=view,
        language=language if _LANGUAGE.fullmatch(language) else DEFAULT_LANGUAGE,
        direction=direction if direction in ("ltr", "rtl") else DEFAULT_DIRECTION,
        dark_body=DARK_BODY,
    )
    html_template = join_template(_inliner().inline(layout), placeholders)

    # No logo line: the plain text is read for its words.
    view_words = _("View in your browser:")
    header = f"{view[0]}{view_words} {view[1]}\n\n{view[2]}" if unsubscribe else ""
    footer = ["", "--"]
    if from_name.strip():
        footer.append(from_name.strip())
    if design.footer_text:
        footer.append(design.footer_text)
    footer.extend(postal_lines)
    if unsubscribe:
        footer.append(_("Unsubscribe:") + " " + unsubscribe)
    if text_body is not None:
        body_text = split_merge_fields(text_body.replace("\r\n", "\n"), placeholders).strip()
    else:
        body_text = html_to_text(body_html, placeholders.pattern).strip()
    if url and not unsubscribe:
        body_text += f"\n\n{label}: {url}"
    text_template = join_template(header + body_text + "\n" + "\n".join(footer)
                                  + "\n", placeholders)
    return FrozenContent(html_template=html_template, text_template=text_template)


class CompiledRevision:
    """A frozen revision's templates, compiled once; `render` fills them per recipient."""

    def __init__(self, *, subject: str, html_template: str, text_template: str) -> None:
        self._subject = _no_globals(compile_template(TEXT_ENV, subject, "subject"))
        self._html = _no_globals(compile_template(HTML_ENV, html_template, "email HTML"))
        self._text = _no_globals(compile_template(TEXT_ENV, text_template, "plain-text email"))
        # The same three without the sandbox's per-render machinery when their merge fields
        # are plain substitutions (broadside.mail.merge_plain: the same text, or none and then the
        # sandbox renders); None when they are not.
        self._plain_subject = _plain(TEXT_ENV, subject)
        self._plain_html = _plain(HTML_ENV, html_template)
        self._plain_text = _plain(TEXT_ENV, text_template)

    def render(self, *, email: str, name: str, attributes: dict, unsubscribe_url: str,
               view_url: str = "", **extra: Any) -> RenderedEmail:
        """The email for one recipient. Unknown fields render empty; `extra`: the fields of
        a notice (`list_name`, `confirm_url` in the double opt-in email), or a transactional
        message's `data` (an API request's object).

        Raises MergeError (a ValidationError) only if an expression fails for this
        recipient's values (say, arithmetic on a text attribute).
        """
        context = _context(email, name, attributes, unsubscribe_url, view_url)
        if extra:
            context.update(extra)
        try:
            return self.fill(context)
        except _RENDER_ERRORS as exc:
            raise MergeError(f"A merge field could not be filled in for {email}: {_said(exc)}"
                             ) from None

    def fill(self, context: dict[str, Any]) -> RenderedEmail:
        subject = _plain_render(self._plain_subject, context, MAX_SUBJECT_CHARS)
        if subject is None:
            subject = render_bounded(self._subject, context, limit=MAX_SUBJECT_CHARS,
                                     what="subject")
        html = _plain_render(self._plain_html, context, MAX_HTML_CHARS)
        if html is None:
            html = render_bounded(self._html, context, limit=MAX_HTML_CHARS, what="email HTML")
        text = _plain_render(self._plain_text, context, MAX_TEXT_CHARS)
        if text is None:
            text = render_bounded(self._text, context, limit=MAX_TEXT_CHARS,
                                  what="plain-text email")
        # A header is one line; a value with a line break must not add headers.
        return RenderedEmail(subject=" ".join(subject.split()), html=html,
                             text=_blank_lines.sub("\n\n", text).strip() + "\n")


def _plain(env: MergeEnvironment, source: str) -> PlainTemplate | None:
    # The source compiled in the sandbox just before, so it parses.
    return plain_template(env.parse(source), autoescape=bool(env.autoescape))


def _plain_render(template: PlainTemplate | None, context: dict[str, Any],
                  limit: int) -> str | None:
    return template.render(context, limit) if template is not None else None


def _no_globals(template: Any) -> Any:
    """The merge sandbox has no globals (merge_sandbox clears them), but a Jinja template
    keeps a ChainMap over its own and its environment's, which every render copies into the
    new context by iterating it in Python (a fifth of a recipient's render). An empty plain
    dict in its place is the same nothing, copied for free."""
    if not template.globals:  # both maps empty
        template.globals = {}
    return template


@functools.lru_cache(maxsize=16)
def compiled_revision(subject: str, html_template: str, text_template: str) -> CompiledRevision:
    """A frozen revision's templates, compiled once per process: a revision never changes
    (invariant 8), and compiling one costs ~15 ms, which the broadcast page paid on every view
    and the worker on every slice. Keyed by the text itself, so it can never be stale."""
    return CompiledRevision(subject=subject, html_template=html_template, text_template=text_template)


def _context(email: str, name: str, attributes: dict, unsubscribe_url: str,
             view_url: str = "") -> dict[str, Any]:
    return {"email": email, "name": name or "", "attributes": attributes or {},
            "unsubscribe_url": unsubscribe_url, "view_url": view_url}


# SecurityError covers merge_fields.MergeLimitError (a bound broken); AssertionError is how
# some Jinja filters refuse an argument (truncate shorter than its ending).
_RENDER_ERRORS = (TemplateError, SecurityError, ArithmeticError, TypeError, ValueError,
                  LookupError, AttributeError, AssertionError)
RENDER_ERRORS = _RENDER_ERRORS  # for other renderers of the owner's merge fields


_NO_ATTRIBUTE = re.compile(r"has no attribute '([^']{1,80})'")
_UNDEFINED = re.compile(r"'([^']{1,80})' is undefined")


def _said(exc: Exception) -> str:
    """What went wrong with a merge field, in the owner's words: our own bounds say it
    themselves; Jinja's and Python's messages ("'dict object' has no attribute 'city'") are
    told in plain words, short (the exception itself is logged)."""
    log.info("a merge field failed: %r", exc)
    text = str(exc)
    if isinstance(exc, SecurityError):  # our bounds (merge_limits), or the sandbox's refusal
        said = text or "it asks for something merge fields may not do"
    elif match := _NO_ATTRIBUTE.search(text):
        said = f"it uses “{match.group(1)}”, which this person's values do not have"
    elif match := _UNDEFINED.search(text):
        said = f"it uses “{match.group(1)}”, which is not a merge field"
    elif isinstance(exc, ZeroDivisionError):
        said = "it divides by zero"
    elif isinstance(exc, TemplateError):
        said = f"the template cannot be read ({text})" if text else "the template cannot be read"
    else:  # TypeError, ValueError, LookupError...: a value not of the kind the field needs
        said = ("a value it uses is not of the kind it needs (for example, arithmetic on "
                "text, or an item that is not there)")
    return said if len(said) <= 300 else said[:300] + "…"
