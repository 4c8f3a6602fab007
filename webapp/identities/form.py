"""The identity form <-> the API's JSON shape (`broadside.delivery.identities.service.parse_input`
validates it; this module only reads what was typed and says which field a refusal is about).

The form's inputs are named like the API's fields (`name`, `from`, `transport`, `delay_ms`,
`hourly_limit`, `account_rate`, `postal_address`, `webhook_secret`, `bounce_mailbox`,
`verp_domain`), so the form is the API's body as text; the API's `dkim` object is three
inputs (`dkim_mode`: off, keep, generate or paste; `dkim_selector`; `dkim_private_key`, the
pasted PEM). The secrets (the transport URL, the webhook secret, the bounce mailbox URL, a
pasted DKIM key) are read, never written back: an
edit form shows them empty ("leave blank to keep"), and a form shown again after a refusal
keeps everything typed except them.
"""

from __future__ import annotations

import re
from typing import Any

from werkzeug.datastructures import MultiDict

from broadside.core.errors import DomainError
from broadside.delivery.identities.service import FIELDS, SendingIdentity
from broadside.mail.dkim_keys import DEFAULT_SELECTOR

SECRETS = ("transport", "webhook_secret", "bounce_mailbox", "dkim_private_key")
MAX_FIELD = 10_000  # longer than any valid value: the domain says what is too long
# The form's fields: the API's, its `dkim` object spread over three inputs.
DKIM_INPUTS = ("dkim_mode", "dkim_selector", "dkim_private_key")
FORM_FIELDS = (*(f for f in FIELDS if f != "dkim"), *DKIM_INPUTS)
DKIM_MODES = ("off", "keep", "generate", "paste")  # keep: the stored key (editing only)
# The API's names of a refusal's field -> the form's input.
_DKIM_FIELDS = {"dkim": "dkim_mode", "dkim.selector": "dkim_selector",
                "dkim.private_key": "dkim_private_key"}
EMPTY = {"name": "", "from": "", "transport": "", "delay_ms": "200", "hourly_limit": "0",
         "account_rate": "", "postal_address": "", "webhook_secret": "", "bounce_mailbox": "",
         "verp_domain": "", "dkim_mode": "off", "dkim_selector": DEFAULT_SELECTOR,
         "dkim_private_key": ""}

# How the domain's refusals name their field, checked in this order (a From refusal may say
# "Name <address>", so From comes before the name).
_FIELD_WORDS = (
    ("webhook_secret", re.compile(r"webhook secret")),
    ("bounce_mailbox", re.compile(r"mailbox|IMAP")),
    ("verp_domain", re.compile(r"VERP|domain name")),
    ("postal_address", re.compile(r"postal address")),
    ("delay_ms", re.compile(r"\bdelay_ms\b")),
    ("hourly_limit", re.compile(r"\bhourly_limit\b")),
    ("account_rate", re.compile(r"\baccount_rate\b")),
    ("dkim_private_key", re.compile(r"private key|\bPEM\b|RSA")),
    ("dkim_selector", re.compile(r"\bselector\b")),
    ("dkim_mode", re.compile(r"\bDKIM\b")),
    ("transport", re.compile(r"URL|[Tt]ransport|endpoint|option|AWS region")),
    ("from", re.compile(r"\bFrom\b|email address")),
    ("name", re.compile(r"\bname\b|“default”|identity called")),
)


def read_form(form: MultiDict) -> dict[str, str]:
    """Whatever was typed, as text, by field (a field left out reads as empty)."""
    values = {}
    for field in FORM_FIELDS:
        value = form.get(field, "")
        values[field] = value[:MAX_FIELD] if isinstance(value, str) else ""
    # Browsers post a textarea's line breaks as CRLF.
    values["postal_address"] = values["postal_address"].replace("\r\n", "\n")
    return values


def as_body(values: dict[str, str], *, updating: bool, clear_secret: bool = False,
            clear_mailbox: bool = False) -> dict[str, Any]:
    """The API's JSON shape, for `parse_input`. When updating, an empty secret means "keep the
    stored one" (None); `clear_secret` removes the webhook secret instead, `clear_mailbox` the
    bounce mailbox."""
    body: dict[str, Any] = {field: values.get(field, "") for field in FIELDS if field != "dkim"}
    body["account_rate"] = _number(body["account_rate"])
    body["dkim"] = _dkim(values, updating=updating)
    if updating:
        for field in ("transport", "webhook_secret", "bounce_mailbox"):
            if not body[field].strip():
                body[field] = None
        if clear_secret:
            body["webhook_secret"] = ""
        if clear_mailbox:
            body["bounce_mailbox"] = ""
    return body


def _dkim(values: dict[str, str], *, updating: bool) -> dict[str, Any] | None:
    """The "DKIM signing" section as the API's `dkim`: off (null), the stored key kept (no
    `private_key`), a key generated, or the pasted PEM. An unknown choice sends an empty
    key, which the domain refuses under the key's field."""
    mode = values.get("dkim_mode") or "off"  # a form without the section: off
    if mode == "off" or (mode == "keep" and not updating):
        return None
    body: dict[str, Any] = {"selector": values.get("dkim_selector", "")}
    if mode == "generate":
        body["private_key"] = "generate"
    elif mode == "paste":
        body["private_key"] = values.get("dkim_private_key", "").replace("\r\n", "\n")
    elif mode != "keep":
        body["private_key"] = ""
    return body


def _number(text: str) -> float | str | None:
    """The typed account rate as the API's number (empty: null); text that is no number stays
    text, which the domain refuses under its field."""
    if not text.strip():
        return None
    try:
        return float(text.strip())
    except ValueError:
        return text


def shown(values: dict[str, str]) -> dict[str, str]:
    """The values to show again in the form: everything but the secrets."""
    return {**values, **dict.fromkeys(SECRETS, "")}


def typed_a_secret(values: dict[str, str]) -> bool:
    return any(values.get(field, "").strip() for field in SECRETS)


def from_saved(identity: SendingIdentity) -> dict[str, str]:
    """A saved identity laid out in the form (its secrets left empty)."""
    return {"name": identity.name, "from": identity.from_header, "transport": "",
            "delay_ms": str(identity.delay_ms), "hourly_limit": str(identity.hourly_limit),
            "account_rate": "" if identity.account_rate is None else f"{identity.account_rate:g}",
            "postal_address": identity.postal_address, "webhook_secret": "", "bounce_mailbox": "",
            "verp_domain": identity.verp_domain,
            "dkim_mode": "keep" if identity.dkim_selector else "off",
            "dkim_selector": identity.dkim_selector or DEFAULT_SELECTOR, "dkim_private_key": ""}


def field_of(error: DomainError | None) -> str | None:
    """The field a refusal is about: the one the domain names, else one its words name."""
    if error is None:
        return None
    if error.field in _DKIM_FIELDS:
        return _DKIM_FIELDS[error.field]
    if error.field in FIELDS:
        return error.field
    return field_named(error.message)


def field_named(message: str | None) -> str | None:
    """The field a refusal is about (to show it beside that field), if it names one."""
    for field, words in _FIELD_WORDS:
        if message and words.search(message):
            return field
    return None


def send_from_choices(identities: list[SendingIdentity]) -> list[tuple[str, str]]:
    """The "Send from" options of the broadcast and automation editors: the default first
    (value ""), then each live identity by its id. The editors show the select only when
    there is more than the default, so nothing changes for a one-identity installation."""
    choices = []
    for identity in identities:
        label = f"{identity.label} — {identity.from_header}"
        if identity.status == "paused":
            label += " (paused)"
        choices.append(("" if identity.id is None else str(identity.id), label))
    return choices
