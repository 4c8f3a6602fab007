"""The OpenAPI document's part for sending identities (`webapp/api/identities.py`): their
schemas and their paths, merged into the document by `document.py`, like automations'.

Limits and enumerations come from `broadside.delivery.identities` and `broadside.core.transport_urls`.
"""

from __future__ import annotations

import re
from typing import Any

from broadside.core import mailbox_urls
from broadside.core import transport_urls as urls
from broadside.core.models.identities import IDENTITY_STATUSES, IdentityStatus
from broadside.delivery.identities import inputs, service
from broadside.mail import dkim_keys
from webapp.apidocs.paths import body, operation, reply
from webapp.apidocs.schemas import ID, nullable, obj, ref

RESERVED_NAME = "^ *" + "".join(f"[{c.upper()}{c}]" for c in service.DEFAULT_NAME) + " *$"
IDENTITY = {"name": "identity_id", "in": "path", "required": True, "schema": ID,
            "description": "The identity's id (the default identity has none: it is the "
            "environment)."}
# The API never shows a deleted identity: it is 404 from then on.
SHOWN_STATUSES = [s for s in IDENTITY_STATUSES if s != IdentityStatus.DELETED.value]
EXAMPLES = "; ".join(f"`{example}`" for example in urls.EXAMPLES.values())


def _transport_pattern() -> str:
    """The transport URLs `urls.check_transport_url` accepts, as one pattern: each scheme's
    form (credentials in URL characters, percent-encoded where need be), its options, and the
    outer spaces the server strips. tests/webapp/test_api_schema_rules.py checks that the
    server accepts what it matches."""
    space = r"[\s\x1c-\x1f\x85]*"
    user = r"[A-Za-z0-9._~!$&'()*+,;=%-]{1,200}"
    secret = r"[A-Za-z0-9._~!$&'()*+,;=%:-]{1,200}"
    label = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    host = rf"{label}(?:\.{label}){{0,8}}"
    domain = rf"(?:{label}\.){{1,8}}[A-Za-z]{{2,63}}"
    ipv4 = r"(?!169\.254\.)[0-9]{1,3}(?:\.[0-9]{1,3}){3}"  # never link-local
    port = r"(?::[1-9][0-9]{0,3})?"
    path = r"(?:/[A-Za-z0-9._~!$&'()*+,;=:@%/-]{0,200})?"
    endpoint = rf"endpoint=https?://(?:{domain}|{ipv4}){port}(?:/[A-Za-z0-9._~!$'()*,;=:@%/-]{{0,200}})?"
    stream = r"stream=[A-Za-z0-9_-]{1,100}"

    def options(*names: str) -> str:
        one = "|".join(names)
        return rf"(?:\?(?:{one})(?:&(?:{one})){{0,3}})?"

    forms = [
        "", "outbox://",
        rf"(?:{'|'.join(re.escape(s) for s in urls.SMTP_SCHEMES)})://(?:{user}(?::{secret})?@)?{host}{port}{path}",
        rf"ses://{user}:{secret}@[a-z]{{2}}(?:-[a-z]{{1,20}}){{1,3}}-[0-9]{options(endpoint)}",
        rf"postmark://{user}@/?{options(endpoint, stream)}",
        rf"resend://{user}@/?{options(endpoint)}",
        rf"mailgun://{user}(?::{secret})?@{domain}/?{options(endpoint)}",
    ]
    return rf"^{space}(?:{'|'.join(forms)}){space}$"


TRANSPORT_PATTERN = _transport_pattern()
TRANSPORT = {"type": ["string", "null"], "maxLength": urls.MAX_URL, "pattern": TRANSPORT_PATTERN,
             "description": (
    f"Where its mail goes: {EXAMPLES}; empty or `outbox://` writes .eml files instead. A "
    "provider's URL takes `?endpoint=URL` to send to another base URL (Postmark also "
    "`?stream=NAME`); an endpoint that resolves to a private or loopback address is 422 "
    "without PROVIDER_ENDPOINTS_ALLOW_PRIVATE=1, a link-local or metadata one always. It holds "
    "secrets: answers show it masked (a user name by its first 4 characters). On PUT, missing or null "
    "keeps the stored one; a new one resumes a paused identity.")}

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_SPACE = r"[\s\x1c-\x1f\x85]*"
# The mailbox URLs `mailbox_urls.check_mailbox_url` accepts, the loopback-only ?tls=none left
# out (tests/webapp/test_api_schema_rules.py checks that the server accepts what it matches).
MAILBOX_PATTERN = (
    rf"^{_SPACE}(?:imaps?://[A-Za-z0-9._~-]{{1,64}}(?:%40{_LABEL}(?:\.{_LABEL}){{0,8}})?"
    rf":[A-Za-z0-9._~-]{{1,100}}@{_LABEL}(?:\.{_LABEL}){{0,8}}(?::[1-9][0-9]{{0,3}})?"
    rf"(?:/[A-Za-z0-9._-]{{0,100}})?)?{_SPACE}$")
VERP_PATTERN = rf"^{_SPACE}(?:(?:{_LABEL}\.){{1,8}}[A-Za-z]{{2,63}})?{_SPACE}$"
BOUNCE_MAILBOX = {"type": ["string", "null"], "maxLength": mailbox_urls.MAX_URL,
                  "pattern": MAILBOX_PATTERN, "description": (
    "The IMAP mailbox its bounces come back to: `imaps://USER:PASSWORD@HOST:993/INBOX` (TLS), "
    "or `imap://…:143/…` upgraded with STARTTLS (`?tls=none` only for a server on 127.0.0.1); "
    "a login that is an address is written with `%40` for its @. The worker reads it, applies "
    "each bounce and complaint once, and moves it to `Processed` (or `Unrecognised`). An SMTP "
    "identity with a mailbox sends with a VERP Return-Path "
    "(`<login's local part, or bounces>+<token>@<verp_domain, else the login's domain, else "
    "the host>`); a provider's identity reports bounces through its webhooks instead. The "
    "password is a secret: answers show the URL masked. On PUT, missing or null keeps the "
    "stored one; \"\" removes it.")}
VERP_DOMAIN = {"type": ["string", "null"], "maxLength": 253, "pattern": VERP_PATTERN,
               "description": "The domain of its VERP Return-Path (mail to it must reach the "
               "bounce mailbox); empty or null: the mailbox login's domain, else its host."}

ACCOUNT_RATE = {"type": ["number", "null"], "exclusiveMinimum": 0,
                "maximum": inputs.MAX_ACCOUNT_RATE, "description": (
    "Requests per second its provider account allows (one SMTP message or one provider "
    "request each), shared by every identity that sends through the same account (the same "
    "SMTP host and user name, SES access key and region, Postmark server token, Resend or "
    "Mailgun key): their streams keep to it together, each identity's `delay_ms` still a "
    "floor. The account's ceiling is the smallest value set on any of its identities, and "
    "every identity of the account shows it. For SES it never exceeds 90 % of the account's "
    "MaxSendRate. null: none set here.")}

SELECTOR_PATTERN = ("^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                    "(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)?$")
DKIM_INPUT = {"type": ["object", "null"], "additionalProperties": False, "properties": {
    "selector": {"type": ["string", "null"], "maxLength": 63, "pattern": SELECTOR_PATTERN,
                 "description": "DNS labels (letters, digits, dashes, dots); empty or null: "
                 f"`{dkim_keys.DEFAULT_SELECTOR}`. Stored in lower case."},
    "private_key": {"type": ["string", "null"], "maxLength": dkim_keys.MAX_PEM,
                    "pattern": "^(?:generate|[\\s\\S]*-----BEGIN[\\s\\S]*)$",
                    "description": (
        "`\"generate\"` for a new 2048-bit RSA key made by Broadside, or an RSA private key in "
        f"PEM ({dkim_keys.MIN_BITS} to {dkim_keys.MAX_BITS} bits; under {dkim_keys.KEY_BITS} it "
        "is accepted and `problem` says to replace it; no passphrase; Ed25519 and EC keys are "
        "refused). Write-only: never returned. Missing or null on PUT keeps the stored key "
        "(to change the selector alone); on POST it is required with `dkim`.")},
}, "description": (
    "DKIM signing of its mail (SMTP and outbox transports only: a provider's transport signs "
    "its own mail, and `dkim` with one is 422). Each message is signed right before it "
    "leaves, for the domain of its From address, covering From, Subject, To, Date, "
    "Message-ID, List-Unsubscribe, List-Unsubscribe-Post, MIME-Version, Content-Type, "
    "Reply-To and the body (relaxed/relaxed). null: not signed. On PUT, missing keeps the "
    "stored setting. A refusal is 422 naming `dkim`, `dkim.selector` or `dkim.private_key`.")}
DKIM_SHOWN = {"type": ["object", "null"], "description": (
    "Its DKIM signing (null: not signed): publish `txt_record` as a TXT record named "
    "`record_name`. The private key is never returned, only its size and fingerprint."),
    "required": ["selector", "record_name", "txt_record", "key_bits", "key_fingerprint",
                 "problem"],
    "additionalProperties": False, "properties": {
        "selector": {"type": "string"},
        "record_name": {"type": "string", "description": "`<selector>._domainkey.<From domain>`."},
        "txt_record": {"type": ["string", "null"], "description": (
            "`v=DKIM1; k=rsa; p=<public key>`: the text of the TXT record (a DNS panel splits "
            "it into 255-byte strings itself); null when the stored key cannot be read.")},
        "key_bits": {"type": ["integer", "null"]},
        "key_fingerprint": {"type": ["string", "null"], "description": (
            "`SHA256:` and the base64 SHA-256 of the public key.")},
        "problem": {"type": ["string", "null"], "description": (
            "What is wrong with the key (a short one; one that cannot be read), or null.")},
    }}

IDENTITY_SCHEMAS: dict[str, Any] = {
    "IdentityStatus": {"type": "string", "enum": SHOWN_STATUSES, "description": (
        "active, or paused (the provider refused the channel: bad credentials, an unverified "
        "sender, a suspended account; its mail waits, with `pause_reason`, until it is "
        "resumed on the identities page or a new transport URL is saved).")},
    "IdentityInput": obj({
        "name": {"type": "string", "minLength": 1, "maxLength": service.MAX_NAME,
                 "pattern": r"^[A-Za-z0-9][A-Za-z0-9 ._-]*$",
                 # "default" is the environment's identity (runs of spaces count as one).
                 "not": {"pattern": RESERVED_NAME}, "description": (
                     "Unique, ignoring case; not “default”. `python -m jobs "
                     "--identity NAME` serves only this identity.")},
        "from": {"type": "string", "maxLength": service.MAX_FROM, "pattern": service.FROM_PATTERN,
                 "description": (
                     "“Name <address>” or the address alone, on one line; a name with a comma "
                     "or parentheses goes in double quotes (“\"Acme, Inc.\" <news@acme.example>”). "
                     "The address's domain needs a dot and is not a reserved one (localhost, "
                     ".test, .local, .invalid, .onion, .arpa); at most 64 characters before the "
                     "@ and 254 in all.")},
        "transport": TRANSPORT,
        "delay_ms": {"type": ["integer", "null"], "minimum": 0, "maximum": service.MAX_DELAY_MS,
                     "default": 200, "description": "The pause after each request: one message "
                     "(SMTP, SES, Mailgun) or one batch (Postmark, Resend)."},
        "hourly_limit": {"type": ["integer", "null"], "minimum": 0, "maximum": service.MAX_HOURLY,
                         "default": 0, "description": "At most this many sends in any rolling "
                         "hour; 0: no cap."},
        "account_rate": ACCOUNT_RATE,
        "postal_address": {"type": ["string", "null"], "maxLength": service.MAX_POSTAL,
                           "description": "Printed in its emails' footer; empty: the one in "
                           "Settings."},
        "webhook_secret": {"type": ["string", "null"], "maxLength": service.MAX_SECRET,
                           "description": "The provider's signing secret for its delivery and "
                           "bounce webhooks (posted to /webhooks/<provider>/<id>). Never shown "
                           "back. On PUT, missing or null keeps the stored one; \"\" removes it."},
        "dkim": DKIM_INPUT,
        "bounce_mailbox": BOUNCE_MAILBOX,
        "verp_domain": VERP_DOMAIN,
    }, ("name", "from")),
    "Identity": obj({
        "id": {**nullable(ID), "description": "null for the default identity."},
        "name": {"type": "string", "description": "“default” for the default identity."},
        "default": {"type": "boolean", "description": "true for the identity the environment "
                    "defines (SMTP_URL, MAIL_FROM or the Settings sender, SEND_DELAY_MS, "
                    "SEND_HOURLY_LIMIT); it is changed there, never here."},
        "from": {"type": "string", "description": (
            "The From header its mail carries. A named identity's is one the API accepts "
            "(`IdentityInput.from`); the default's is the environment's (the Settings sender, "
            "else MAIL_FROM), which may be a placeholder no identity may use, like the stock "
            "`newsletter@localhost`.")},
        "transport": {"type": "string", "description": "The transport URL with every secret "
                      "masked."},
        "delay_ms": {"type": "integer", "minimum": 0},
        "hourly_limit": {"type": "integer", "minimum": 0},
        "account_rate": {**ACCOUNT_RATE, "description": (
            "The ceiling of its provider account in requests per second: the smallest "
            "`account_rate` set on any identity sending through the same account (the "
            "default's is ACCOUNT_RATE); null when none is set.")},
        "postal_address": {"type": "string", "description": "Its own; empty: the Settings one "
                           "is used."},
        "status": ref("IdentityStatus"),
        "pause_reason": {"type": ["string", "null"]},
        "webhook_secret_set": {"type": "boolean", "description": "Whether a webhook secret is "
                               "stored (the secret itself is never returned)."},
        "dkim": DKIM_SHOWN,
        "bounce_mailbox": {"type": ["string", "null"], "description": (
            "Its bounce mailbox URL with the password masked (the login by its first 4 "
            "characters); null: none. The default's is BOUNCE_MAILBOX_URL.")},
        "verp_domain": {"type": ["string", "null"], "description": (
            "The domain of its VERP Return-Path; null: the mailbox's (the default's is "
            "VERP_DOMAIN).")},
    }, extra={"if": {"properties": {"default": {"const": False}}},
              "then": {"properties": {"from": {"pattern": service.FROM_PATTERN}}}}),
}

INPUT_EXAMPLE = {"name": "Product updates", "from": "Acme Product <product@acme.example>",
                 "transport": "postmark://SERVER_TOKEN@", "delay_ms": 500, "hourly_limit": 10000,
                 "account_rate": 10, "postal_address": "", "webhook_secret": "a long random password"}
IDENTITY_EXAMPLE = {"id": 2, "name": "Product updates", "default": False,
                    "from": "Acme Product <product@acme.example>",
                    "transport": "postmark://SERV…@", "delay_ms": 500, "hourly_limit": 10000,
                    "account_rate": 10.0, "postal_address": "", "status": "active", "pause_reason": None,
                    "webhook_secret_set": True, "dkim": None, "bounce_mailbox": None,
                    "verp_domain": None}
DEFAULT_EXAMPLE = {"id": None, "name": "default", "default": True,
                   "from": "Acme Weekly <news@acme.example>",
                   "transport": "smtp+starttls://news:•••@smtp.acme.example:587", "delay_ms": 200,
                   "hourly_limit": 0, "account_rate": None, "postal_address": "1 Main St, Springfield",
                   "status": "active", "pause_reason": None, "webhook_secret_set": False,
                   "dkim": {"selector": "broadside",
                            "record_name": "broadside._domainkey.acme.example",
                            "txt_record": "v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA…",
                            "key_bits": 2048,
                            "key_fingerprint": "SHA256:by6TynEnG1+0RQocCO5B7Y95GzAlSjTSM7q4Rkwxydg",
                            "problem": None},
                   "bounce_mailbox": "imaps://boun…:•••@imap.acme.example:993/INBOX",
                   "verp_domain": None}

IDENTITY_PATHS: dict[str, Any] = {
    "/api/identities": {
        "get": operation("Identities", "listIdentities", "All sending identities, the default first",
                         "The default (the environment, `id` null), then the others by name.",
                         responses={"200": reply("Every live identity.", {
                             "type": "array", "items": ref("Identity")},
                             [DEFAULT_EXAMPLE, IDENTITY_EXAMPLE])}),
        "post": operation(
            "Identities", "createIdentity", "Create a sending identity",
            "Its own paced stream: broadcasts and automations may choose it (`identity_id`). "
            "A refused body (an unknown field included) is 422 with a message naming the "
            "field; names are unique, ignoring case (409). Once the installation has "
            "`MAX_IDENTITIES` live identities besides the default (50 unless set) it is 422, "
            "naming the bound. An SMTP identity may sign its mail with DKIM: "
            "`\"dkim\": {\"selector\": \"broadside\", \"private_key\": \"generate\"}`, then "
            "publish the answer's `dkim.txt_record` at `dkim.record_name`.",
            write=True, request=body("IdentityInput", INPUT_EXAMPLE),
            responses={"201": reply("Created.", "Identity", IDENTITY_EXAMPLE)},
            errors=("Conflict", "Invalid")),
    },
    "/api/identities/{identity_id}": {
        "get": operation("Identities", "getIdentity", "One sending identity", parameters=[IDENTITY],
                         responses={"200": reply("The identity.", "Identity", IDENTITY_EXAMPLE)},
                         errors=("NotFound",)),
        "put": operation(
            "Identities", "replaceIdentity", "Replace a sending identity",
            "The whole identity: fields left out take their defaults, except `transport`, "
            "`webhook_secret` and `bounce_mailbox`, which keep the stored ones when missing or "
            "null. A new transport "
            "URL resumes a paused identity.",
            parameters=[IDENTITY], write=True,
            request=body("IdentityInput", {**INPUT_EXAMPLE, "transport": None,
                                           "webhook_secret": None, "bounce_mailbox": None}),
            responses={"200": reply("Saved.", "Identity", IDENTITY_EXAMPLE)},
            errors=("NotFound", "Conflict", "Invalid")),
        "delete": operation(
            "Identities", "deleteIdentity", "Delete a sending identity",
            "Only when nothing needs it: 409 naming the broadcasts not yet sent (drafts "
            "included) and the automations that use it. Broadcasts sent through it still name "
            "it. It is 404 from then on, and its name is free again.",
            parameters=[IDENTITY], write=True, responses={"204": reply("Deleted.")},
            errors=("NotFound", "Conflict")),
    },
}
