"""An identity as the owner or an API client gives it: parsed and validated, every mistake a
`ValidationError` naming its field (broadside.delivery.identities.service saves it).

`account_rate` is the provider account's ceiling in requests per second (a number above 0 and
at most MAX_ACCOUNT_RATE, or null for none set here): it is shared by every identity that
sends through the same account, the smallest value set winning
(broadside.delivery.identities.accounts)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parseaddr
from typing import Any

from broadside.core import mailbox_urls
from broadside.core import transport_urls as urls
from broadside.core.addresses import normalise_email
from broadside.core.errors import ValidationError
from broadside.core.i18n import _
from broadside.delivery.identities.from_field import FROM_PATTERN, MAX_FROM, MAX_FROM_NAME
from broadside.mail import dkim_keys

DEFAULT_NAME = "default"
MAX_NAME = 100
MAX_POSTAL = 1000
MAX_SECRET = 200
MAX_DELAY_MS = 600_000
MAX_HOURLY = 10_000_000
MAX_ACCOUNT_RATE = 10_000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]*$")
FIELDS = ("name", "from", "transport", "delay_ms", "hourly_limit", "account_rate",
          "postal_address", "webhook_secret", "dkim", "bounce_mailbox", "verp_domain")
DKIM_FIELDS = ("selector", "private_key")
GENERATE = "generate"
PROVIDER_SIGNS = ("DKIM signing is for SMTP (and the outbox): a provider (SES, Postmark, Resend, "
                  "Mailgun) signs its own mail with the domain you verified there. Turn DKIM "
                  "off for this identity (\"dkim\": null).")


@dataclass
class IdentityInput:
    name: str
    from_name: str
    from_email: str
    transport_url: str | None  # None: keep the current one (an update that leaves it out)
    delay_ms: int
    hourly_limit: int
    postal_address: str
    webhook_secret: str | None  # None: keep the current one
    account_rate: float | None = None
    # DKIM: None keeps the stored value (an update leaving `dkim` out); "" turns it off.
    dkim_selector: str | None = None
    dkim_private_key: str | None = None  # PEM, a secret
    bounce_mailbox_url: str | None = ""  # None: keep the current one (a secret, never shown)
    verp_domain: str = ""


def signs_itself(transport_url: str) -> bool:
    """Whether the transport is a provider's, which signs its mail itself (no DKIM here)."""
    return urls.scheme_of(transport_url) in urls.PROVIDER_SCHEMES


def dkim_of(value: object) -> tuple[str, str | None]:
    """`dkim` as given: null (off: ("", "")) or {"selector": ..., "private_key": PEM |
    "generate"}; the private key may be left out to keep the stored one (None). A refusal
    names `dkim`, `dkim.selector` or `dkim.private_key`."""
    if value is None:
        return "", ""
    if not isinstance(value, dict):
        raise ValidationError(_("dkim must be null (no signing) or an object like {\"selector\": "
                                "\"broadside\", \"private_key\": \"generate\"}."), field="dkim")
    unknown = sorted(set(value) - set(DKIM_FIELDS))
    if unknown:
        raise ValidationError(_("Unknown field: dkim.%(value)s. dkim has selector and private_key.",
                                value=unknown[0]), field="dkim")
    try:
        selector = dkim_keys.check_selector(value.get("selector"))
    except dkim_keys.KeyProblem as problem:
        raise ValidationError(str(problem), field="dkim.selector") from None
    key = value.get("private_key")
    if key is None:
        return selector, None
    if key == GENERATE:
        return selector, dkim_keys.generate_private_key()
    if not isinstance(key, str):
        raise ValidationError(_("dkim.private_key must be a PEM private key or \"generate\"."),
                              field="dkim.private_key")
    try:
        return selector, dkim_keys.normalised_pem(key)
    except dkim_keys.KeyProblem as problem:
        raise ValidationError(str(problem), field="dkim.private_key") from None


def _text(value: object, label: str, limit: int, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValidationError(_("The %(label)s must be text.", label=label), field=field)
    if "\x00" in value:
        raise ValidationError(_("The %(label)s contains a NUL character.", label=label), field=field)
    if len(value) > limit:
        raise ValidationError(_("The %(label)s is too long (%(value)s of %(limit)s characters).",
                                label=label, value=len(value), limit=limit),
                              field=field)
    return value


def _whole(value: object, label: str, default: int, maximum: int) -> int:
    if value is None or value == "":
        return default
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= maximum:
        raise ValidationError(_("%(label)s must be a whole number from 0 to %(maximum)s.",
                                label=label, maximum=format(maximum, ',')), field=label)
    return value


def account_rate_of(value: object) -> float | None:
    """Requests per second above 0 and at most MAX_ACCOUNT_RATE (a JSON number), or None
    (null: none set). The owner's form turns its text into a number first."""
    if value is None:
        return None
    if (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)
            or not 0 < value <= MAX_ACCOUNT_RATE):
        raise ValidationError(_("account_rate must be a number of requests per second above 0 and at most "
                                "%(max_account_rate)s, or null for none.",
                                max_account_rate=format(MAX_ACCOUNT_RATE, ',')),
                              field="account_rate")
    return float(value)


def parse_input(data: Any, *, updating: bool = False) -> IdentityInput:
    """The API's JSON shape (the owner's form is turned into it), validated; every mistake
    is a ValidationError naming the field. When updating, a missing `transport` or
    `webhook_secret` keeps the current one (they are never shown back)."""
    if not isinstance(data, dict):
        raise ValidationError(_("Send a JSON object with \"name\", \"from\" and \"transport\"."))
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ValidationError(f"Unknown field: {unknown[0]}. An identity has " + ", ".join(FIELDS) + ".")
    name = " ".join(_text(data.get("name"), "name", MAX_NAME, "name").split())
    if not name:
        raise ValidationError(_("The name is required (for example “Product updates”)."), field="name")
    if not _NAME.match(name):
        raise ValidationError(_("The name may hold letters, digits, spaces, dots, dashes and underscores, "
                                "starting with a letter or digit (it is what `worker --identity NAME` "
                                "takes)."), field="name")
    if name.lower() == DEFAULT_NAME:
        raise ValidationError(_("“default” is the identity the environment defines; choose another name."),
                              field="name")
    raw_from = _text(data.get("from"), "From", MAX_FROM, "from")
    if not raw_from.strip():
        raise ValidationError(_("The From address is required, like “Ada <ada@example.com>”."),
                              field="from")
    shaped = re.fullmatch(FROM_PATTERN, raw_from)  # the document's pattern
    raw_from = raw_from.strip()
    if "\n" in raw_from or "\r" in raw_from:
        raise ValidationError(_("The From must be one line."), field="from")
    from_name, address = parseaddr(raw_from)
    if not address or "@" not in address:
        raise ValidationError(_("%(raw_from)s has no email address; write “Name <address@example.com>”.",
                                raw_from=repr(raw_from)),
                              field="from")
    if not shaped:
        raise ValidationError(_("%(value)s is not a From: write “Name <address@example.com>” or the "
                                "address alone (a name with a comma goes in double quotes); the address's "
                                "domain needs a dot and cannot be a reserved one such as localhost.",
                                value=repr(raw_from[:80])), field="from")
    try:
        from_email = normalise_email(address)
    except ValidationError as exc:
        raise ValidationError(exc.message, field="from") from None
    from_name = " ".join(from_name.split())
    if len(from_name) > MAX_FROM_NAME:
        raise ValidationError(_("The From name is too long (at most %(max_from_name)s characters).",
                                max_from_name=MAX_FROM_NAME),
                              field="from")
    transport: str | None
    if updating and data.get("transport") is None:
        transport = None
    else:
        try:
            transport = urls.check_transport_url(_text(data.get("transport"), "transport URL",
                                                          urls.MAX_URL, "transport"))
        except urls.TransportUrlError as exc:
            raise ValidationError(str(exc), field="transport") from None
    secret: str | None
    if updating and data.get("webhook_secret") is None:
        secret = None
    else:
        secret = _text(data.get("webhook_secret"), "webhook secret", MAX_SECRET, "webhook_secret").strip()
    selector: str | None
    key: str | None
    if "dkim" not in data:
        selector, key = (None, None) if updating else ("", "")
    else:
        selector, key = dkim_of(data["dkim"])
        if selector and key is None and not updating:
            raise ValidationError(_("Give the DKIM private key: a PEM key, or \"generate\"."),
                                  field="dkim.private_key")
        if selector and transport is not None and signs_itself(transport):
            raise ValidationError(PROVIDER_SIGNS, field="dkim")
    mailbox: str | None
    if updating and data.get("bounce_mailbox") is None:
        mailbox = None
    else:
        try:
            mailbox = mailbox_urls.check_mailbox_url(_text(
                data.get("bounce_mailbox"), "bounce mailbox URL", mailbox_urls.MAX_URL,
                "bounce_mailbox"))
        except mailbox_urls.MailboxUrlError as exc:
            raise ValidationError(str(exc), field="bounce_mailbox") from None
    try:
        verp_domain = mailbox_urls.check_verp_domain(_text(data.get("verp_domain"), "VERP domain",
                                                           253, "verp_domain"))
    except mailbox_urls.MailboxUrlError as exc:
        raise ValidationError(str(exc), field="verp_domain") from None
    return IdentityInput(
        bounce_mailbox_url=mailbox, verp_domain=verp_domain,
        name=name, from_name=from_name, from_email=from_email, transport_url=transport,
        delay_ms=_whole(data.get("delay_ms"), "delay_ms", 200, MAX_DELAY_MS),
        hourly_limit=_whole(data.get("hourly_limit"), "hourly_limit", 0, MAX_HOURLY),
        account_rate=account_rate_of(data.get("account_rate")),
        postal_address=_text(data.get("postal_address"), "postal address", MAX_POSTAL,
                             "postal_address").strip(),
        webhook_secret=secret, dkim_selector=selector, dkim_private_key=key,
    )


def check_endpoint(data: IdentityInput, config: Mapping[str, Any]) -> IdentityInput:
    """`data` when its transport's `?endpoint=` (if any) resolves only to addresses Broadside
    may call (`PROVIDER_ENDPOINTS_ALLOW_PRIVATE` in `config` allows the own network); a
    `ValidationError` under the transport field naming the address and the flag otherwise.
    Resolves the endpoint's name: for the pages and the API when an identity is saved."""
    if data.transport_url:
        try:
            urls.check_endpoint(data.transport_url,
                                allow_private=bool(config.get("PROVIDER_ENDPOINTS_ALLOW_PRIVATE")))
        except urls.TransportUrlError as exc:
            raise ValidationError(str(exc), field="transport") from None
    return data
