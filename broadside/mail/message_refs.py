"""Our Message-IDs, written here and nowhere else: each names the row it was sent for, so a
provider's event can find it even when the worker died before recording the provider's answer
(the row is `unknown` and has no provider id yet, invariant 5):

    <broadside.d<delivery id>.b<broadcast id>@domain>    a broadcast's delivery
    <broadside.m<message id>.a<automation id>@domain>    an automation message
    <broadside.t<message id>@domain>                     a transactional message

Providers that rebuild the message from JSON (Postmark, Resend) carry the same reference in
their own echoed fields (Postmark's Metadata, Resend's tags), written as `ref_for` makes it.
A reference only ever narrows the search: the event's address must match the row's too.

The worker writes every Message-ID with the three functions below (`delivery_message_id`,
`automation_message_id`, `transactional_message_id`), and `row_of` reads any of them back.
A delivery's Message-ID is not stored (a string and an index entry per recipient would cost
more than deriving it): `delivery_message_id` derives it again from the row and its
revision's From, exactly as the worker wrote it, and a provider's event naming it finds the
row through `row_of`.
"""

from __future__ import annotations

import re

_OURS = re.compile(r"^<?broadside[._]([dmt])(\d{1,18})(?:[._][ab]\d{1,18})?(?:@|>|$)")
KINDS = {"d": "delivery", "m": "automation message", "t": "transactional message"}
TAG_NAME = "broadside"


def _domain(from_email: str) -> str:
    return from_email.rpartition("@")[2] or "localhost"


def delivery_message_id(delivery_id: int, broadcast_id: int, from_email: str) -> str:
    """The Message-ID a broadcast's delivery was sent with: stable, so "send again" reuses it."""
    return f"<broadside.d{delivery_id}.b{broadcast_id}@{_domain(from_email)}>"


def automation_message_id(message_id: int, automation_id: int, from_email: str) -> str:
    """The Message-ID of an automation's message (one per step and person)."""
    return f"<broadside.m{message_id}.a{automation_id}@{_domain(from_email)}>"


def transactional_message_id(message_id: int, from_email: str) -> str:
    """The Message-ID of a transactional message (a test send, a confirmation)."""
    return f"<broadside.t{message_id}@{_domain(from_email)}>"


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
