"""Outgoing webhooks: Broadside tells the owner's other systems what happened.

- `addresses.py`: which URLs may be called (http(s), public addresses only unless
  `WEBHOOKS_ALLOW_PRIVATE=1`), checked when an endpoint is saved and again before each POST.
- `endpoints.py`: the owner's endpoints (save, delete, the secret, enable and disable: the only
  writer of their status).
- `emitter.py`: an event is recorded in the transaction of the change it reports, once per
  endpoint that wants it, and only then (`emit`, `emit_many` for the delivery ledger's flushes).
- `ledger.py`: the only writer of an outbox row's status (claim, delivered, retry, failed),
  each a guarded UPDATE.
- `signing.py`: the `Broadside-Signature` header and its check.
- `posting.py`: one small batch of an endpoint's due events POSTed (the worker's webhook
  threads call it, never a mail stream); `exchange.py`: one POST, whole within its deadline,
  at most 4 KB of the answer read and never decompressed.
"""

from __future__ import annotations

from broadside.core.i18n import _l

EVENT_TYPES = (
    "subscriber.created",
    "subscriber.unsubscribed",
    "subscriber.suppressed",
    "delivery.sent",
    "delivery.failed",
    "delivery.unknown",
    "broadcast.started",
    "broadcast.finished",
    "automation.entered",
    "transactional.sent",
    "transactional.failed",
    "transactional.unknown",
    "identity.paused",
)
# What the owner's "send a test event" button sends; never subscribed to, always allowed.
TEST_EVENT = "webhook.test"

# Each event in words, for the Webhooks page (in the page's language when shown).
DESCRIPTIONS = {
    "subscriber.created": _l("a person joined a list (a new subscription, confirmed or not yet)"),
    "subscriber.unsubscribed": _l("a person left a list"),
    "subscriber.suppressed": _l("an address was suppressed (bounced, complained or blocked)"),
    "delivery.sent": _l("a broadcast's email was accepted by the mail server or provider"),
    "delivery.failed": _l("a broadcast's email failed for good"),
    "delivery.unknown": _l("a broadcast's email may or may not have been sent (never resent)"),
    "broadcast.started": _l("a broadcast started sending"),
    "broadcast.finished": _l("a broadcast finished sending"),
    "automation.entered": _l("a person entered an automation"),
    "transactional.sent": _l("a transactional template's email (the API's) was accepted"),
    "transactional.failed": _l("a transactional template's email failed for good or was not "
                               "sent (the address was suppressed or unsubscribed meanwhile)"),
    "transactional.unknown": _l("a transactional template's email may or may not have been "
                                "sent (never resent)"),
    "identity.paused": _l("a sending identity was paused: the provider refused the channel, or "
                          "the reputation guard saw its bounce or complaint rate cross a limit "
                          "(with the figures)"),
}
