"""Our Message-IDs name the row they were sent for, so a provider's event can find it even
when the worker died before recording the provider's answer (the row is `unknown` and has no
provider id yet, invariant 5):

    <broadside.d<delivery id>.b<broadcast id>@domain>    a broadcast's delivery
    <broadside.m<message id>.a<automation id>@domain>    an automation message
    <broadside.t<message id>@domain>                     a transactional message

Providers that rebuild the message from JSON (Postmark, Resend) carry the same reference in
their own echoed fields (Postmark's Metadata, Resend's tags), written as `ref_for` makes it.
A reference only ever narrows the search: the event's address must match the row's too.

A delivery's Message-ID is not stored (it would cost a string and an index entry per recipient):
`delivery_message_id` derives it again from the row and its revision's From, exactly as the
worker writes it (jobs/recheck.py `message_id_for`, which a test holds equal), and a provider's
event naming it finds the row through `row_of`.
"""

from __future__ import annotations

import re

_OURS = re.compile(r"^<?broadside[._]([dmt])(\d{1,18})(?:[._][ab]\d{1,18})?(?:@|>|$)")
KINDS = {"d": "delivery", "m": "automation message", "t": "transactional message"}
TAG_NAME = "broadside"


def delivery_message_id(delivery_id: int, broadcast_id: int, from_email: str) -> str:
    """The Message-ID a broadcast's delivery was sent with: stable, so "send again" reuses it."""
    domain = from_email.rpartition("@")[2] or "localhost"
    return f"<broadside.d{delivery_id}.b{broadcast_id}@{domain}>"


def ref_for(message_id: str) -> str | None:
    """`<broadside.d12.b3@x>` -> `broadside_d12_b3`: letters, digits, _ and - only (what
    Resend's tags allow), or None for a Message-ID that is not ours."""
    bare = message_id.strip().strip("<>").partition("@")[0]
    if not _OURS.match(bare):
        return None
    return bare.replace(".", "_")


def row_of(value: str) -> tuple[str, int] | None:
    """The (kind, id) a Message-ID or a reference of ours names, else None."""
    match = _OURS.match(value.strip())
    if match is None:
        return None
    return KINDS[match.group(1)], int(match.group(2))
