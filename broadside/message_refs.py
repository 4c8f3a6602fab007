"""Our Message-IDs name the row they were sent for, so a provider's event can find it even
when the worker died before recording the provider's answer (the row is `unknown` and has no
provider id yet, invariant 5):

    <broadside.d<delivery id>.b<broadcast id>@domain>    a broadcast's delivery
    <broadside.m<message id>.a<automation id>@domain>    an automation message
    <broadside.t<message id>@domain>                     a transactional message

Providers that rebuild the message from JSON (Postmark, Resend) carry the same reference in
their own echoed fields (Postmark's Metadata, Resend's tags), written as `ref_for` makes it.
A reference only ever narrows the search: the event's address must match the row's too.
"""

from __future__ import annotations

import re

_OURS = re.compile(r"^<?broadside[._]([dmt])(\d{1,18})(?:[._][ab]\d{1,18})?(?:@|>|$)")
KINDS = {"d": "delivery", "m": "automation message", "t": "transactional message"}
TAG_NAME = "broadside"


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
