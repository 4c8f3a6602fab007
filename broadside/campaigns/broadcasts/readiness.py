"""Can it send? The database's half of the answer; `webapp.readiness.sending_readiness` adds
the other half (Redis answering, a worker holding the identity's lease, its last connection
check) and is what every page asks: the dashboard, a broadcast's page, the send confirmation
and its Send button, the System page.

- which sending identity the mail goes out through, and whether it is paused (a paused
  identity's worker claims nothing: its mail waits until the owner resumes it);
- for a broadcast, what blocks sending and scheduling it (`launch.blocking_problems`: someone
  to send to, a subject, a postal address for the footer, merge fields that work).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.launch import blocking_problems
from broadside.core.models import Broadcast
from broadside.delivery.identities.service import SendingIdentity, resolve


@dataclass(frozen=True)
class Standing:
    identity: SendingIdentity
    problems: tuple[str, ...] = ()  # the broadcast's, in the owner's words; () without one

    @property
    def paused(self) -> bool:
        return self.identity.status == "paused"


def standing(session: Session, config: Mapping[str, Any], *, identity_id: int | None = None,
             broadcast: Broadcast | None = None,
             problems: Sequence[str] | None = None) -> Standing:
    """Through the identity `identity_id` (None: the default), or through the broadcast's own
    when one is given; with a broadcast, its blocking problems, unless the caller has them
    already (`problems`: the send plan counted the audience to find them)."""
    if broadcast is not None:
        identity_id = broadcast.identity_id
        if problems is None:
            problems = blocking_problems(session, broadcast)
    return Standing(resolve(session, config, identity_id), tuple(problems or ()))
