"""The double opt-in email: the owner's subject and Markdown body (with the merge fields of a
broadcast, and `list_name`) in their design, then a button to confirm, and no unsubscribe
link. Rendered through the broadcasts' pipeline (broadside.mail.rendering) when it is queued.
"""

from __future__ import annotations

from broadside.core.i18n import DEFAULT_LOCALE, _
from broadside.mail.mime import RenderedEmail
from broadside.mail.rendering import CompiledRevision, EmailDesign, freeze_layout


def N_(message: str) -> str:
    return message


CONFIRM_LABEL = N_("Confirm my subscription")  # in the language being spoken (`speaking`)


def render_confirmation(*, subject: str, body_markdown: str, from_name: str,
                        postal_address: str, design: EmailDesign, email: str, name: str,
                        attributes: dict, list_name: str, confirm_url: str,
                        language: str = DEFAULT_LOCALE, direction: str = "ltr") -> RenderedEmail:
    """The double opt-in email in the owner's words and design: their subject and Markdown
    body (the merge fields of a broadcast, and `list_name`), then a button to `confirm_url`.

    Raises MergeError when the owner's text has a mistake (it is checked when saved, so only
    a value that fails for this one person, say arithmetic on a text attribute, can).

    `language` and `direction`: the owner's words' (`<html lang dir>`); Broadside's own words
    (the button, the layout's) are in the language being spoken: call it inside `speaking`.
    """
    frozen = freeze_layout(subject=subject, preheader="", body_markdown=body_markdown,
                           from_name=from_name, postal_address=postal_address, design=design,
                           link=("confirm_url", _(CONFIRM_LABEL)), others=(confirm_url,),
                           language=language, direction=direction)
    compiled = CompiledRevision(subject=subject, html_template=frozen.html_template,
                                text_template=frozen.text_template)
    return compiled.render(email=email, name=name, attributes=attributes, unsubscribe_url="",
                           list_name=list_name, confirm_url=confirm_url)
