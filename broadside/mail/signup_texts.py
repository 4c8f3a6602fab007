"""The owner's words for the double opt-in email and the public sign-up pages.

Each text has a default (the words Broadside used before they were editable), so an owner who
never opens Settings -> Design sees no change, and "reset" is simply forgetting the owner's
version (only texts that differ from their default are stored).

The texts take merge fields, checked by broadside.mail.merge_fields when they are saved (a mistake
is refused with the line, or, for a field that does not exist there, the closest one that does):
- the email has `email` and `list_name`, and not the broadcasts' `name` and `attributes`:
  on a public form anyone can type anything there, and this email goes from the owner's
  address to whatever address was typed (a spammer's pitch must not ride on it);
- the pages have `list_name` and `list_description` (nobody is known yet on a public page).
Page texts are plain text (a blank line starts a paragraph; the page escapes them); the
email's body is Markdown, like a broadcast's, with the confirm button after it.
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass

from jinja2 import TemplateSyntaxError, meta
from sqlalchemy.orm import Session

from broadside.core.models import MailingList, SiteSettings, Subscriber
from broadside.core.site_settings import SettingsError, get_settings
from broadside.mail.confirmation import render_confirmation
from broadside.mail.design import current_design, email_design
from broadside.mail.merge_fields import MergeError, check_merge_fields, compile_template
from broadside.mail.merge_sandbox import TEXT_ENV, render_bounded
from broadside.mail.rendering import RENDER_ERRORS, RenderedEmail

log = logging.getLogger(__name__)

EMAIL_FIELDS = ("email", "list_name")
# Fields of a broadcast that the confirmation email refuses, and why.
STRANGERS_TEXT = ("name", "attributes")
PAGE_FIELDS = ("list_name", "list_description")


@dataclass(frozen=True)
class Text:
    key: str
    label: str
    default: str
    fields: tuple[str, ...]
    max_length: int
    where: str  # how an error message names it
    one_line: bool = False
    required: bool = False


TEXTS: tuple[Text, ...] = (
    Text("optin_subject", "Confirmation email: subject",
         "Confirm your subscription to {{ list_name }}", EMAIL_FIELDS, 200, "email's subject", one_line=True,
         required=True),
    Text("optin_body", "Confirmation email: message (Markdown; the confirm button follows it)",
         "Hello,\n\nSomeone (we hope you) asked to subscribe this address to "
         "**{{ list_name }}**. To confirm, press the button below, then the button on the "
         "page it opens.\n\nIf it was not you, ignore this email: you will not be subscribed "
         "and will hear nothing more.", EMAIL_FIELDS, 5000, "email's message"),
    Text("join_heading", "Sign-up page: heading", "Subscribe to {{ list_name }}", PAGE_FIELDS,
         200, "page's heading", one_line=True, required=True),
    Text("join_intro", "Sign-up page: introduction", "{{ list_description }}", PAGE_FIELDS,
         2000, "page's introduction"),
    Text("check_inbox", "After signing up: “check your inbox” text",
         "If that address can join {{ list_name }}, a confirmation email is on its way. "
         "Follow the link in it to finish subscribing.", PAGE_FIELDS, 2000, "“check your inbox” text",
         required=True),
    Text("confirmed", "After confirming: “you are subscribed” text",
         "Thank you: you will receive {{ list_name }}. Every email has a link to unsubscribe "
         "with one click.", PAGE_FIELDS, 2000, "“you are subscribed” text", required=True),
)
BY_KEY = {text.key: text for text in TEXTS}
_SAMPLE = {"name": "Alex", "email": "alex@example.com", "attributes": {},
           "list_name": "Our newsletter", "list_description": "News every week.",
           "confirm_url": "https://example.invalid/join/confirm/x"}


def saved_texts(settings: SiteSettings | None) -> dict[str, str]:
    """Every text: the owner's where they wrote one, the default elsewhere."""
    own = (settings.signup_texts if settings is not None else None) or {}
    return {t.key: own[t.key] if isinstance(own.get(t.key), str) else t.default for t in TEXTS}


def current_texts(session: Session) -> dict[str, str]:
    """Reads only: a public page's GET creates no settings row."""
    return saved_texts(session.get(SiteSettings, 1))


def _unknown_field(text: Text, source: str) -> str | None:
    try:
        names = meta.find_undeclared_variables(TEXT_ENV.parse(source))
    except TemplateSyntaxError:
        return None  # check_merge_fields says what is wrong
    for name in sorted(names):
        if name in STRANGERS_TEXT and text.fields == EMAIL_FIELDS:
            return (f"{{{{ {name} }}}} cannot be used in the confirmation email: anyone can "
                    "type anything into the sign-up form, and this email goes from your "
                    "address to whatever address was typed. Fields here: {{ email }}, "
                    "{{ list_name }}.")
        if name not in text.fields:
            close = difflib.get_close_matches(name, text.fields, n=1, cutoff=0.6)
            hint = f" Did you mean {{{{ {close[0]} }}}}?" if close else ""
            available = ", ".join(f"{{{{ {f} }}}}" for f in text.fields)
            return f"{{{{ {name} }}}} is not a field here.{hint} Fields here: {available}."
    return None


def clean_text(text: Text, value: str | None) -> str:
    """`value` for `text`, or SettingsError (field: the text's key) saying what is wrong."""
    source = (value or "").replace("\r\n", "\n").strip()
    if text.one_line:
        source = " ".join(source.split())
    label = text.label.split(" (")[0]
    if text.required and not source:
        raise SettingsError(text.key, f"{label} cannot be empty: write one, or press "
                                      "“Reset to default”.")
    if len(source) > text.max_length:
        raise SettingsError(text.key, f"{label} is too long (at most {text.max_length:,} "
                                      "characters).")
    try:
        check_merge_fields(source, text.where)
        unknown = _unknown_field(text, source)
        if unknown:
            raise MergeError(unknown)
        render_bounded(compile_template(TEXT_ENV, source, text.where), _SAMPLE,
                       limit=100_000, what=text.where)
    except MergeError as exc:
        raise SettingsError(text.key, exc.message) from None
    except RENDER_ERRORS as exc:  # a value that fails even for the sample (say, 1 / 0)
        raise SettingsError(text.key, f"The {text.where} has a merge field that fails even "
                                      f"for a sample subscriber ({exc}).") from None
    return source


def update_texts(session: Session, values: dict[str, str], *, reset: str | None = None
                 ) -> SiteSettings:
    """Save every text in `values` (all checked first, then one commit); `reset` names one
    to put back to its default (the others typed are saved with it, so none is lost)."""
    cleaned: dict[str, str] = {}
    for text in TEXTS:
        if text.key == reset:
            continue
        if text.key in values:
            cleaned[text.key] = clean_text(text, values[text.key])
    settings = get_settings(session)
    own = dict(settings.signup_texts or {})
    own.update(cleaned)
    if reset is not None:
        own.pop(reset, None)
    settings.signup_texts = {key: value for key, value in own.items()
                             if key in BY_KEY and value != BY_KEY[key].default} or None
    session.commit()
    return settings


def page_text(texts: dict[str, str], key: str, mailing_list: MailingList) -> list[str]:
    """A page text filled in for a list, as paragraphs (plain text: the page escapes it).
    A text that fails to render (saved before a rule tightened) falls back to its default."""
    context = {"list_name": mailing_list.name, "list_description": mailing_list.description or ""}
    for source in (texts[key], BY_KEY[key].default):
        try:
            text = render_bounded(compile_template(TEXT_ENV, source, key), context,
                                  limit=100_000, what=key)
            break
        except RENDER_ERRORS:  # the default always renders
            log.warning("sign-up text %s could not be filled in; using the default", key)
    return [" ".join(p.split("\n")) for p in text.replace("\r", "").split("\n\n") if p.strip()]


def confirmation_email(session: Session, mailing_list: MailingList, subscriber: Subscriber,
                       link: str) -> RenderedEmail:
    """The double opt-in email for one person, in the owner's words and design. Should the
    owner's text fail for this person, the default words are used: the email must go."""
    settings = session.get(SiteSettings, 1)
    texts = saved_texts(settings)
    from_name = settings.sender_name if settings is not None else ""
    postal = settings.postal_address if settings is not None else ""
    design = email_design(current_design(session), from_name=from_name)
    for subject, body in ((texts["optin_subject"], texts["optin_body"]),
                          (BY_KEY["optin_subject"].default, BY_KEY["optin_body"].default)):
        try:
            return render_confirmation(subject=subject, body_markdown=body,
                                       from_name=from_name, postal_address=postal,
                                       design=design, email=subscriber.email,
                                       name=subscriber.name or "",
                                       attributes=subscriber.attributes or {},
                                       list_name=mailing_list.name, confirm_url=link)
        except MergeError as exc:
            log.warning("the confirmation email's text failed for subscriber %s (%s); "
                        "sending the default text", subscriber.id, exc.message)
    raise AssertionError("the default confirmation email always renders")
