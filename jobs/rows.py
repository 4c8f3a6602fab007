"""What the send engine (jobs.engine) asks of the rows it sends, in types.

A slice sends rows of one `RowSource`: a broadcast's deliveries (jobs.broadcasts), the due
messages of an identity's automations (jobs.automations) or its transactional mail (jobs.
transactional). Each source claims its due rows (pending -> sending, committed by the engine
before any send: invariant 4), re-checks each one at its turn and builds its message
(`decide`, invariant 3), and records every outcome through its own `Ledger`, the one writer of
its rows' status (guarded by `status = 'sending'`). A new kind of mail is a new source, never
a new loop: the lease (1), the pace (2), the classifier (6) and the resumable slices (7) come
with the engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.ledger import Change
from broadside.delivery.transports import MessageFields


@dataclass(frozen=True)
class Row:
    """A claimed row: a delivery, an automation message or a transactional message."""

    id: int
    subscriber_id: int | None
    list_id: int | None = None  # the list of this copy; None: the broadcast's
    code: str | None = None  # the code its claim minted (`{{ code }}`); None: no codes
    variant: int | None = None  # its A/B test's variant (the rest's: the winner); None: no test


@dataclass
class Prepared:
    """One person's message, ready for the wire."""

    delivery_id: int  # the row's id, whatever its table
    subscriber_id: int | None
    email: str
    message_id: str
    wire: bytes = b""
    soft_bounces: int = 0  # their run of soft bounces when re-checked
    from_email: str = ""  # the envelope sender
    fields: MessageFields | None = None  # the same message for a JSON API (jobs.batches)

    @property
    def row(self) -> Row:
        return Row(self.delivery_id, self.subscriber_id)


@dataclass
class Decision:
    """What the send-time re-check decided for one claimed row."""

    stop: str | None = None  # what the rows belong to left `sending`: its status
    skip: str | None = None  # not to be sent: the reason
    fail: str | None = None  # their values cannot make a message: the reason
    hold: bool = False  # not now (an automation disabled or paused since the claim): released
    message: Prepared | None = None


class Ledger(Protocol):
    """The one writer of a source's row status: every move guarded by the status it expects."""

    def transition(self, session: Session, changes: Sequence[Change], *, source: str,
                   target: str, now: datetime) -> list[int]:
        """Move each row from `source` to `target` only if it is still in `source`, with its
        values and event; the ids that moved. Does not commit."""
        ...

    def attempts_of(self, session: Session, row_id: int) -> int:
        """The attempts spent on a row (its claims), for the retry budget."""
        ...


class RowSource(Protocol):
    """Where a slice's rows come from, how each is re-checked, and who records them."""

    @property
    def key_kind(self) -> str:
        """Idempotency keys of provider batches name rows of this kind (message_refs' letters)."""
        ...

    @property
    def pausable(self) -> bool:
        """Whether a channel-wide refusal pauses what the rows belong to (a broadcast, the
        identity's automations); transactional mail has nothing to pause: it retries."""
        ...

    @property
    def ledger(self) -> Ledger:
        """The one writer of these rows' status."""
        ...

    def open(self, fields: bool) -> str | None:
        """Get ready for a slice (`fields`: build each message's fields for a JSON API, not
        its MIME); None to go on, else the slice's outcome without sending ("nothing")."""
        ...

    def claim(self, limit: int) -> list[Row]:
        """At most `limit` due rows, claimed (pending -> sending, each guarded); the engine
        commits them before any send (invariant 4)."""
        ...

    def decide(self, row: Row) -> Decision:
        """Invariant 3: this row's re-check, the last read before its send, and its message."""
        ...

    def finished(self, deadline: float) -> bool:
        """Nothing claimable now: whether the source is done (a broadcast: its `finish`)."""
        ...

    def wait_for_due(self, deadline: float) -> bool:
        """Sleep (stop-aware) until a row is due, within the slice; False to end the slice."""
        ...

    def pause(self, reason: str) -> None:
        """A channel-wide refusal (invariant 6): pause what the rows belong to; commits."""
        ...

    def notice(self, text: str | None) -> None:
        """Say why sending waits (the hourly limit, a paused identity), or that it no longer
        does (None); commits."""
        ...

    def close(self, attempts: int, seconds: float) -> None:
        """The slice is over: `attempts` sends in `seconds` (a broadcast keeps its rate)."""
        ...
