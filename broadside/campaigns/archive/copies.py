"""What a frozen revision looks like to the public, and to one reader.

The public copy is the revision's own subject, preheader and Markdown body, through the same
pipeline as the email (merge fields cut out, Markdown, nh3, fields put back as sandboxed
Jinja) and filled in by the same merge sandbox with a context holding nobody: no email, no
name (a neutral "reader" that counts as empty), no attributes, no unsubscribe link. So
`{{ name or "friend" }}` shows "friend", `{{ name }}` "reader", `{{ attributes.city }}`
nothing; no subscriber's value can reach a public page. It is
rendered once, when the owner publishes, and stored (models.ArchivedIssue); the email's
layout and footer (the unsubscribe link's place) are not part of it: the page has its own.
"""

from __future__ import annotations

import re
import secrets
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from broadside.campaigns.content.versions import frozen_message
from broadside.core.models import Revision
from broadside.mail.merge_fields import (
    MergeError,
    Placeholders,
    compile_template,
    join_template,
    split_merge_fields,
)
from broadside.mail.merge_sandbox import HTML_ENV, TEXT_ENV, render_bounded
from broadside.mail.rendering import (
    MAX_HTML_CHARS,
    MAX_SUBJECT_CHARS,
    RENDER_ERRORS,
    RenderedEmail,
    compiled_revision,
    markdown_to_safe_html,
)
from broadside.mail.unsubscribe_tokens import Tokens, unsubscribe_url


class Neutral(str):
    """A placeholder that reads as text but counts as empty, so a field's own fallback wins:
    `{{ name or "friend" }}` shows "friend", `{% if name %}` takes its else, and a bare
    `{{ name }}` shows "reader" instead of leaving "Hi ," behind."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False


# Nobody: what every merge field sees on a public page.
NOBODY: dict[str, Any] = {"email": "", "name": Neutral("reader"), "attributes": {},
                          "unsubscribe_url": "", "view_url": ""}
MAX_SLUG = 60


@dataclass(frozen=True)
class PublicCopy:
    subject: str
    summary: str
    html: str  # the body only, sanitised
    slug: str


def public_copy(revision: Revision) -> PublicCopy:
    """The revision as anyone may read it. Raises MergeError when a merge field cannot be
    filled without a reader (say, arithmetic on an attribute)."""
    try:
        subject = " ".join(_filled_text(revision.subject, "subject").split())
        summary = " ".join(_filled_text(revision.preheader, "preheader").split())
        html = _filled_body(revision.body_markdown)
    except RENDER_ERRORS as exc:
        raise MergeError("A merge field cannot be filled in without a reader, so this issue "
                         f"cannot be published: {str(exc)[:300]}") from None
    return PublicCopy(subject=subject, summary=summary, html=html, slug=slugify(subject))


# The body inside the email layout (templates/email/layout.html): its `content` cell, up to
# the footer's. A version frozen without its source body is published from it.
_CONTENT = re.compile(r'<td class="content"[^>]*>\s*(.*?)\s*</td>\s*</tr>\s*<tr>\s*'
                      r'<td class="footer"', re.DOTALL)
_ACTION = re.compile(r'\s*<p class="action"[^>]*>.*\Z', re.DOTALL)


def version_copy(message: Any) -> PublicCopy:
    """A version in another language (a `versions.FrozenMessage`) as anyone may read it:
    its own body as written when it was frozen with it (`body`), else the body of its email
    filled with nobody's values. Raises MergeError as `public_copy` does."""
    try:
        subject = " ".join(_filled_text(message.subject, "subject").split())
        summary = " ".join(_filled_text(message.preheader, "preheader").split())
        body = getattr(message, "body", None)
        if body is not None:
            html = _filled_body(body)
        else:
            email = compiled_revision(message.subject, message.html_template,
                                      message.text_template).render(
                email="", name=NOBODY["name"], attributes={}, unsubscribe_url="")
            found = _CONTENT.search(email.html)
            html = _ACTION.sub("", found.group(1)) if found else ""
    except RENDER_ERRORS as exc:
        raise MergeError("A merge field cannot be filled in without a reader, so this issue "
                         f"cannot be published: {str(exc)[:300]}") from None
    return PublicCopy(subject=subject, summary=summary, html=html, slug=slugify(subject))


def _filled_text(source: str, where: str) -> str:
    template = compile_template(TEXT_ENV, source, where)
    return render_bounded(template, dict(NOBODY), limit=MAX_SUBJECT_CHARS, what=where)


def _filled_body(markdown: str) -> str:
    placeholders = Placeholders(_nonce(markdown))
    html = markdown_to_safe_html(split_merge_fields(markdown, placeholders))
    # A paragraph of only {% if %}-style fields is just those fields (as in the email).
    token = placeholders.pattern.pattern.replace("[vb]", "b")
    html = re.sub(rf"<p>\s*((?:{token}\s*)+)</p>", r"\1", html)
    template = compile_template(HTML_ENV, join_template(html, placeholders), "body")
    return render_bounded(template, dict(NOBODY), limit=MAX_HTML_CHARS, what="body")


def _nonce(text: str) -> str:
    while True:
        nonce = secrets.token_hex(5)
        if nonce not in text:
            return nonce


def slugify(text: str) -> str:
    """A URL's readable part: ASCII words joined by hyphens ("issue" when none)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    slug = ""
    for word in words:
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > MAX_SLUG:
            break
        slug = candidate
    return slug or "issue"


@dataclass(frozen=True)
class Reader:
    """The one person a view-in-browser page is for, as the database has them now."""

    subscriber_id: int
    email: str
    name: str
    attributes: dict
    joined: datetime | str
    list_id: int
    languages: tuple[str | None, ...] = ()  # theirs, their list's, Settings': their version


def reader_copy(revision: Revision, broadcast_id: int, reader: Reader, *, secret_key: str,
                base_url: str) -> RenderedEmail:
    """This reader's own email, as the worker builds it: their merge values and their own
    unsubscribe link (the page has no link back to itself). Raises MergeError when their
    values cannot fill a field."""
    message = frozen_message(revision, *reader.languages)
    compiled = compiled_revision(message.subject, message.html_template, message.text_template)
    token = Tokens(secret_key).make(reader.subscriber_id, reader.list_id, broadcast_id, reader.joined)
    return compiled.render(email=reader.email, name=reader.name, attributes=reader.attributes,
                           unsubscribe_url=unsubscribe_url(token, base_url))
