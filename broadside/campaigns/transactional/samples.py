"""A transactional template tried out by the owner: its preview and its test send, filled with
sample `data` typed as a JSON object (what an API request's `data` would carry).

The preview renders the template frozen as it would be now (`frozen_revision`: nothing
written). The test send is rendered from `current_revision` (invariant 8: the revision a real
message sent now would use, written only when freezing gives something new) and queued on the
template's identity's stream as a test, pointing at that revision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from babel.numbers import format_decimal
from sqlalchemy.orm import Session

from broadside.campaigns.transactional.templates import (
    current_revision,
    frozen_revision,
    get_template,
)
from broadside.core.addresses import normalise_email
from broadside.core.errors import ValidationError
from broadside.core.i18n import _, current_locale
from broadside.core.json_input import json_within, refuse_unstorable
from broadside.core.models import TransactionalTemplate
from broadside.delivery.queues import Jobs
from broadside.delivery.transactional import queue_transactional
from broadside.mail.rendering import RenderedEmail, compiled_revision

MAX_SAMPLE = 10_000  # characters of sample data: a few fields, not a document
SAMPLE_NAME = "Alex"  # the sample reader's {{ name }}, as in a broadcast's preview
FIELD = "data"


def parse_sample(text: str) -> dict[str, Any]:
    """The sample data box: empty is no data; otherwise a JSON object, within bounds, whose
    text can be stored (a test send stores what it renders). ValidationError with field
    "data" otherwise."""
    if not text.strip():
        return {}
    if len(text) > MAX_SAMPLE:
        raise ValidationError(_("The sample data is at most %(limit)s characters.",
                                limit=format_decimal(MAX_SAMPLE, locale=current_locale())),
                              field=FIELD)
    try:
        data = json_within(text, what="The sample data", max_depth=8)
        refuse_unstorable(data, "The sample data")
    except ValidationError as exc:
        raise ValidationError(exc.message, field=FIELD) from None
    if not isinstance(data, dict):
        kind = {list: _("a list"), str: _("text"), bool: _("true or false"),
                type(None): "null"}.get(type(data), _("a number"))
        raise ValidationError(_("The sample data must be a JSON object, like %(example)s; this "
                                "is %(kind)s.", example='{"link": "https://example.com/reset"}',
                                kind=kind), field=FIELD)
    return data


@dataclass(frozen=True)
class TemplatePreview:
    from_name: str
    from_email: str
    rendered: RenderedEmail | None
    problem: str | None  # why it cannot be shown: a merge field that fails with this data


def _render(subject: str, html: str, text: str, *, email: str,
            data: dict[str, Any]) -> RenderedEmail:
    return compiled_revision(subject, html, text).render(
        email=email, name=SAMPLE_NAME, attributes={}, unsubscribe_url="", data=data)


def preview(session: Session, template: TransactionalTemplate, *, data: dict[str, Any],
            sample_email: str, default_from: str) -> TemplatePreview:
    """The template as a message sent now would read, for the sample reader and `data`."""
    try:
        revision = frozen_revision(session, template, default_from)
        rendered = _render(revision.subject, revision.html_template, revision.text_template,
                           email=sample_email, data=data)
    except ValidationError as exc:
        return TemplatePreview("", "", None, exc.message)
    return TemplatePreview(revision.from_name, revision.from_email, rendered, None)


def send_test(session: Session, template_id: int, to_email: str, *, data: dict[str, Any],
              default_from: str, jobs: Jobs) -> int:
    """One test copy to any address, on the template's identity's stream; its id."""
    template = get_template(session, template_id)
    address = normalise_email(to_email)
    try:
        revision = current_revision(session, template, default_from)
        rendered = _render(revision.subject, revision.html_template, revision.text_template,
                           email=address, data=data)
    except ValidationError:
        session.rollback()
        raise
    message = queue_transactional(
        session, jobs, kind="test", to_email=address, subject=f"[Test] {rendered.subject}",
        html=rendered.html, text=rendered.text,
        headers={"From-Name": revision.from_name, "From-Email": revision.from_email},
        identity_id=revision.identity_id, template_revision_id=revision.id,
        attachment_ids=revision.attachment_ids)
    return message.id
