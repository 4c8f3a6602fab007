"""The addresses of a provider's batch: each domain as its A-label (every provider takes it),
and a local part outside ASCII refused by us, item by item, where the provider cannot take it.

What each provider's own documentation says of a local part outside ASCII (SMTPUTF8,
RFC 6531), as read for this code:
- Amazon SES: not supported ("Amazon SES does not support the SMTPUTF8 extension ... the
  local part of a destination email address may only contain 7-bit ASCII characters"; the
  domain is to be Punycode).
- Mailgun: supported on its HTTP API ("Mailgun supports internationalized email addresses
  through the use of the SMTPUTF8 extension": outgoing messages), provided the receiving
  server supports SMTPUTF8 too.
- Postmark: not supported (the mailbox pattern its support article gives is ASCII only).
- Resend: not documented either way, so treated as not supported.
A refused item fails that one row (phase rcpt, `ours`: jobs.classify makes it a recipient
verdict, never retried, never channel-wide); the rest of the batch goes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace

from broadside.core.addresses import needs_smtputf8, wire_address
from broadside.delivery.smtp_envelope import NEEDS_SMTPUTF8
from broadside.delivery.transports import PROVIDER_NAMES, DeliveryError, Outgoing, SendResult

# Whether the provider takes a local part outside ASCII, by its documentation (above).
TAKES_SMTPUTF8 = {"ses": False, "mailgun": True, "postmark": False, "resend": False}
_DOCUMENTED = {"ses": "its documentation says so", "postmark": "its documentation says so",
               "resend": "its documentation does not say it does"}


def takes_smtputf8(scheme: str) -> bool:
    return TAKES_SMTPUTF8.get(scheme, False)


def refusal(scheme: str) -> DeliveryError:
    name = PROVIDER_NAMES.get(scheme, scheme)
    why = _DOCUMENTED.get(scheme, "it is not known to")
    return DeliveryError("rcpt", None, (
        f"Broadside did not send it: this address {NEEDS_SMTPUTF8} (it has characters outside "
        f"ASCII before the @), which {name} does not offer ({why}). Send to it through an "
        "identity whose server offers SMTPUTF8, or ask the person for another address."),
        ours=True, provider=scheme)


def _written(scheme: str, item: Outgoing) -> Outgoing | DeliveryError:
    if needs_smtputf8(item.rcpt) and not takes_smtputf8(scheme):
        return refusal(scheme)
    try:
        rcpt, sender = wire_address(item.rcpt), wire_address(item.mail_from)
    except ValueError:
        return DeliveryError("rcpt", None, "Broadside did not send it: the domain of the "
                             "address is not a valid international domain name. Correct the "
                             "address on the subscriber's page.", ours=True, provider=scheme)
    fields = item.fields
    if fields is not None and fields.to == item.rcpt:
        fields = replace(fields, to=rcpt)
    return replace(item, rcpt=rcpt, mail_from=sender, fields=fields)


Batch = Callable[..., list[SendResult | DeliveryError]]


def addressed(send_batch: Batch) -> Batch:
    """A provider's `send_batch` given only the items it can take, their addresses as the
    wire writes them; the refused ones keep their positions in the answer."""

    @functools.wraps(send_batch)
    def wrapper(self, items: Sequence[Outgoing], idempotency_key: str,
                *args, **kwargs) -> list[SendResult | DeliveryError]:
        written = [_written(self.scheme, item) for item in items]
        outgoing = [w for w in written if isinstance(w, Outgoing)]
        if len(outgoing) == len(written):
            return send_batch(self, outgoing, idempotency_key, *args, **kwargs)
        sent = iter(send_batch(self, outgoing, idempotency_key, *args, **kwargs)
                    if outgoing else [])
        return [w if isinstance(w, DeliveryError) else next(sent) for w in written]

    return wrapper
