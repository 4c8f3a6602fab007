"""The one email renderer: the compose preview and the sending worker both use it.

Freezing (once per revision, milliseconds):
    Markdown (markdown-it-py, commonmark, raw HTML escaped)
    -> sanitised HTML (nh3: no script, no event handlers, only http/https/mailto links and
       https images)
    -> the responsive layout in templates/email/layout.html
    -> CSS inlined (css-inline)                                      = html_template
    and the same sanitised HTML -> plain text (inscriptis) + footer   = text_template

Merge fields (`{{ name or "friend" }}`, `{{ attributes.city }}`) are cut out of the user's text
before any of that and carried through as opaque placeholders, then put back as sandboxed
Jinja; every other character of the result is embedded as literal data (see
merge_fields.jinja_literal). So the user's fields are the only user-controlled template code,
and a body containing `{% raw %}` or `{{` can never break the layout.

Rendering (per recipient, tens of microseconds): `CompiledRevision` compiles the three templates
once (per slice), and `render` fills them in with autoescaping on for HTML and off for text.
"""

from __future__ import annotations

import binascii
import email.policy
import email.utils
import functools
import re
import secrets
from dataclasses import dataclass
from email.header import Header
from email.headerregistry import Address
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import css_inline
import nh3
from inscriptis import get_text
from inscriptis.css_profiles import CSS_PROFILES
from inscriptis.html_properties import Display, WhiteSpace
from inscriptis.model.config import ParserConfig
from inscriptis.model.html_element import HtmlElement
from jinja2 import Environment, FileSystemLoader, TemplateError, select_autoescape
from jinja2.sandbox import SecurityError
from markdown_it import MarkdownIt
from markupsafe import Markup

from broadside.merge_fields import (
    MergeError,
    Placeholders,
    check_merge_fields,
    compile_template,
    join_template,
    split_merge_fields,
)
from broadside.merge_sandbox import HTML_ENV, TEXT_ENV, render_bounded

__all__ = [
    "CompiledRevision", "FrozenContent", "MergeError", "RenderedEmail", "build_message",
    "format_address", "freeze_content", "markdown_to_safe_html",
]

EMAIL_TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "email"

_markdown = MarkdownIt("commonmark", {"html": False})
# `.html` templates are autoescaped, `.txt` ones are not (as Flask does for its pages).
_layout_env = Environment(loader=FileSystemLoader(EMAIL_TEMPLATES),
                          autoescape=select_autoescape(default_for_string=True),
                          keep_trailing_newline=True)
# No network: a body cannot make the server fetch a stylesheet.
_inliner = css_inline.CSSInliner(keep_at_rules=True, load_remote_stylesheets=False)

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "i", "img", "li", "ol", "p", "pre", "s", "strong", "sub", "sup", "table",
    "tbody", "td", "th", "thead", "tr", "u", "ul",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title", "width", "height"},
    "ol": {"start"},
}
_text_css = dict(CSS_PROFILES["strict"])
# Keep the line breaks of code blocks (<pre><code>) in the plain-text part.
_text_css["code"] = HtmlElement(display=Display.inline, whitespace=WhiteSpace.pre)
_text_config = ParserConfig(css=_text_css, display_links=True)
_blank_lines = re.compile(r"\n{3,}")

# The most one rendered message may hold (characters; merge_fields bounds each value and the
# work of each render). Over these, the draft is refused (for the sample recipient) or that
# one recipient's row fails.
MAX_SUBJECT_CHARS = 1_000
MAX_HTML_CHARS = 1_000_000
MAX_TEXT_CHARS = 1_000_000


@dataclass(frozen=True)
class FrozenContent:
    html_template: str  # full email HTML, CSS inlined, merge fields still as sandboxed Jinja
    text_template: str  # plain-text alternative from the same source, merge fields in place


@dataclass(frozen=True)
class RenderedEmail:
    subject: str
    html: str
    text: str


def _keep_safe_urls(tag: str, attribute: str, value: str) -> str | None:
    # Called by nh3 for every kept attribute; it must not raise (nh3 would report it as
    # an unraisable exception). Images load from https only: http images leak the reader.
    if tag == "img" and attribute == "src" and not value.lower().startswith("https://"):
        return None
    return value


def markdown_to_safe_html(markdown: str) -> str:
    """Markdown to HTML that is safe to put in an email (and in a page)."""
    return nh3.clean(
        _markdown.render(markdown),
        tags=ALLOWED_TAGS,
        clean_content_tags={"script", "style"},
        attributes=ALLOWED_ATTRIBUTES,
        attribute_filter=_keep_safe_urls,
        url_schemes={"http", "https", "mailto"},
        url_relative="deny",
        strip_comments=True,
    )


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
                   from_email: str, postal_address: str) -> FrozenContent:
    """Render the layout once, leaving merge fields for `CompiledRevision.render`.

    Raises ValidationError (MergeError) with a message naming the field and line when the
    subject, preheader or body has merge syntax that is wrong or not allowed. `from_email` is
    part of the frozen identity (the worker's envelope and From); the layout prints only the
    name and the postal address.
    """
    check_merge_fields(subject, "subject")
    check_merge_fields(preheader, "preheader")
    check_merge_fields(body_markdown, "body")
    placeholders = _new_placeholders(subject, preheader, body_markdown, from_name,
                                     from_email, postal_address)
    subject_text = split_merge_fields(subject, placeholders)
    preheader_text = split_merge_fields(preheader, placeholders)
    body_source = split_merge_fields(body_markdown, placeholders)
    body_html = _unwrap_block_fields(markdown_to_safe_html(body_source), placeholders)
    lost = set(placeholders.pattern.findall(body_source)) - set(
        placeholders.pattern.findall(body_html))
    if lost:
        fields = ", ".join(sorted(placeholders.fields[token] for token in lost))
        raise MergeError(f"The body has a merge field where it is not allowed: {fields}. "
                         "A link or image address must start with https:// (or http://, "
                         "mailto:) before any merge field.")
    unsubscribe = placeholders.add("{{ unsubscribe_url }}", block=False)
    postal_lines = [line.strip() for line in postal_address.splitlines() if line.strip()]

    layout = _layout_env.get_template("layout.html").render(
        subject=subject_text, preheader=preheader_text, body=Markup(body_html),
        from_name=from_name.strip(), postal_lines=postal_lines, unsubscribe_url=unsubscribe,
    )
    html_template = join_template(_inliner.inline(layout), placeholders)

    footer = ["", "--"]
    if from_name.strip():
        footer.append(from_name.strip())
    footer.extend(postal_lines)
    footer.append(f"Unsubscribe: {unsubscribe}")
    body_text = get_text(body_html, _text_config).strip()
    text_template = join_template(body_text + "\n" + "\n".join(footer) + "\n", placeholders)

    # Prove now, not at the first recipient, that everything compiles and renders.
    compiled = CompiledRevision(subject=subject, html_template=html_template,
                                text_template=text_template)
    try:
        compiled.fill(_context("someone@example.com", "", {}, "https://example.invalid/u/x"))
    except _RENDER_ERRORS as exc:
        raise MergeError(f"A merge field fails even for a sample subscriber: {_said(exc)}"
                         ) from None
    return FrozenContent(html_template=html_template, text_template=text_template)


class CompiledRevision:
    """A frozen revision's templates, compiled once; `render` fills them per recipient."""

    def __init__(self, *, subject: str, html_template: str, text_template: str) -> None:
        self._subject = compile_template(TEXT_ENV, subject, "subject")
        self._html = compile_template(HTML_ENV, html_template, "email HTML")
        self._text = compile_template(TEXT_ENV, text_template, "plain-text email")

    def render(self, *, email: str, name: str, attributes: dict, unsubscribe_url: str
               ) -> RenderedEmail:
        """The email for one recipient. Unknown fields render empty.

        Raises MergeError (a ValidationError) only if an expression fails for this
        recipient's values (say, arithmetic on a text attribute).
        """
        try:
            return self.fill(_context(email, name, attributes, unsubscribe_url))
        except _RENDER_ERRORS as exc:
            raise MergeError(f"A merge field could not be filled in for {email}: {_said(exc)}"
                             ) from None

    def fill(self, context: dict[str, Any]) -> RenderedEmail:
        subject = render_bounded(self._subject, context, limit=MAX_SUBJECT_CHARS,
                                 what="subject")
        html = render_bounded(self._html, context, limit=MAX_HTML_CHARS, what="email HTML")
        text = render_bounded(self._text, context, limit=MAX_TEXT_CHARS,
                              what="plain-text email")
        # A header is one line; a value with a line break must not add headers.
        return RenderedEmail(subject=" ".join(subject.split()), html=html,
                             text=_blank_lines.sub("\n\n", text).strip() + "\n")


@functools.lru_cache(maxsize=16)
def compiled_revision(subject: str, html_template: str, text_template: str) -> CompiledRevision:
    """A frozen revision's templates, compiled once per process: a revision never changes
    (invariant 8), and compiling one costs ~15 ms, which the broadcast page paid on every view
    and the worker on every slice. Keyed by the text itself, so it can never be stale."""
    return CompiledRevision(subject=subject, html_template=html_template, text_template=text_template)


def _context(email: str, name: str, attributes: dict, unsubscribe_url: str) -> dict[str, Any]:
    return {"email": email, "name": name or "", "attributes": attributes or {},
            "unsubscribe_url": unsubscribe_url}


# SecurityError covers merge_fields.MergeLimitError (a bound broken); AssertionError is how
# some Jinja filters refuse an argument (truncate shorter than its ending).
_RENDER_ERRORS = (TemplateError, SecurityError, ArithmeticError, TypeError, ValueError,
                  LookupError, AttributeError, AssertionError)


def _said(exc: Exception) -> str:
    """An exception's message, short: some quote the value they choked on."""
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "…"


def render_notice(template: str, **context: Any) -> tuple[str, str]:
    """A system email of Broadside's own (not the owner's content), such as the sign-up
    confirmation: (html, text) from `templates/email/<template>.html` and `.txt`."""
    return (_layout_env.get_template(f"{template}.html").render(**context),
            _layout_env.get_template(f"{template}.txt").render(**context))


def format_address(name: str, address: str) -> str:
    """`Name <address>` for a From/To header, quoted as needed."""
    if not name:
        return address
    return str(Address(display_name=name, addr_spec=address))


def _header_value(value: str) -> str:
    """One line, and RFC 2047-encoded when not ASCII: merge fields (a subscriber's name in the
    subject) can never inject a header."""
    value = " ".join(str(value).replace("\r", " ").replace("\n", " ").split())
    if value.isascii():
        return value
    return Header(value, "utf-8", maxlinelen=998).encode(linesep="\r\n")


_PLAIN_ADDRESS = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9.-]+")


@functools.lru_cache(maxsize=64)
def _address_header(value: str) -> str:
    if _PLAIN_ADDRESS.fullmatch(value):
        return value  # the usual To: a bare, already validated address
    name, address = email.utils.parseaddr(value.replace("\r", " ").replace("\n", " "))
    return email.utils.formataddr((name, address), charset="utf-8") if name else address


def _text_part(content_type: str, body: str) -> bytes:
    """One text part: as it is (7bit) when it is plain ASCII in lines of at most 998 octets,
    as the email package itself would choose; otherwise quoted-printable (which costs ~10 µs a
    KB and turns every "=" of the HTML into "=3D")."""
    data = body.replace("\r\n", "\n").replace("\r", "\n").encode("utf-8")
    if data.isascii() and b"\x00" not in data and max(map(len, data.split(b"\n"))) <= 998:
        encoding, encoded = "7bit", data
    else:
        encoding, encoded = "quoted-printable", binascii.b2a_qp(data, istext=True)
    return (f"Content-Type: {content_type}; charset=\"utf-8\"\r\n"
            f"Content-Transfer-Encoding: {encoding}\r\n\r\n").encode() + encoded.replace(b"\n", b"\r\n")


def message_bytes(rendered: RenderedEmail, *, from_addr: str, to_addr: str, message_id: str,
                  headers: dict[str, str]) -> bytes:
    """The wire form of a multipart/alternative message (text/plain first, then text/html:
    RFC 2046 order, clients show the last part they understand), CRLF line endings.

    Assembled directly rather than through `email.message`, whose header handling cost
    ~3 ms a message: this is the worker's per-recipient hot path.
    """
    boundary = f"=_broadside_{secrets.token_hex(12)}"
    lines = [
        f"Subject: {_header_value(rendered.subject)}",
        f"From: {_address_header(from_addr)}",
        f"To: {_address_header(to_addr)}",
        f"Date: {email.utils.formatdate(usegmt=True)}",
        f"Message-ID: {message_id if message_id.startswith('<') else f'<{message_id}>'}",
        "MIME-Version: 1.0",
        *(f"{name}: {_header_value(value)}" for name, value in headers.items()),
        f'Content-Type: multipart/alternative; boundary="{boundary}"',
    ]
    delimiter = f"\r\n--{boundary}\r\n".encode()
    return b"".join([
        "\r\n".join(lines).encode("ascii"), b"\r\n", delimiter,
        _text_part("text/plain", rendered.text), delimiter,
        _text_part("text/html", rendered.html), f"\r\n--{boundary}--\r\n".encode(),
    ])


def build_message(rendered: RenderedEmail, *, from_addr: str, to_addr: str, message_id: str,
                  headers: dict[str, str]) -> EmailMessage:
    """The same message as `message_bytes`, parsed back into an object (for previews, tests)."""
    raw = message_bytes(rendered, from_addr=from_addr, to_addr=to_addr, message_id=message_id,
                        headers=headers)
    return email.message_from_bytes(raw, policy=email.policy.default)
