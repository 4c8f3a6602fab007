"""A template as an email, for its page: rendered as a broadcast started from it would be
(its blocks in, Settings' design with its changes over it), for the sample reader Alex.
Nothing is written."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from broadside.campaigns.content.blocks import expand
from broadside.campaigns.content.design import with_overrides
from broadside.campaigns.content.templates import Template
from broadside.core.errors import ValidationError
from broadside.mail.design import current_design, email_design
from broadside.mail.mime import RenderedEmail
from broadside.mail.rendering import CompiledRevision, freeze_content


@dataclass(frozen=True)
class TemplatePreview:
    rendered: RenderedEmail | None
    problem: str | None


def preview_template(session: Session, template: Template, *, from_name: str, from_email: str,
                     postal_address: str, sample_email: str) -> TemplatePreview:
    design = email_design(with_overrides(current_design(session), template.design_overrides),
                          from_name=from_name)
    try:
        written = expand(session, template.body, template.body_format, None)
        frozen = freeze_content(subject=template.subject, preheader=template.preheader,
                                body_markdown=written.body, body_format=written.body_format,
                                from_name=from_name, from_email=from_email,
                                postal_address=postal_address, design=design)
        rendered = CompiledRevision(subject=template.subject,
                                    html_template=frozen.html_template,
                                    text_template=frozen.text_template).render(
            email=sample_email, name="Alex", attributes={}, unsubscribe_url="#")
    except ValidationError as exc:
        return TemplatePreview(None, exc.message)
    return TemplatePreview(rendered, None)
