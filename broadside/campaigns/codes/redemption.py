"""A code's redemption: the one writer of `Code.redeemed_at`, a two-state machine.

| move   | from       | to       | guard                                   |
|--------|------------|----------|-----------------------------------------|
| redeem | unredeemed | redeemed | `WHERE code = ? AND redeemed_at IS NULL` |

The state is `redeemed_at` itself (NULL: unredeemed). The move is one guarded UPDATE, so of
two redeems at the same moment exactly one changes the row; the other finds it redeemed and
is told when (409). There is no way back: a redeemed code stays redeemed.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.errors import Conflict, NotFound
from broadside.core.models import Code
from broadside.core.timeutil import utcnow


class Redemption(StrEnum):
    UNREDEEMED = "unredeemed"
    REDEEMED = "redeemed"


TRANSITIONS = {"redeem": (Redemption.UNREDEEMED, Redemption.REDEEMED)}


def state_of(redeemed_at: datetime | None) -> Redemption:
    return Redemption.UNREDEEMED if redeemed_at is None else Redemption.REDEEMED


class AlreadyRedeemed(Conflict):
    def __init__(self, code: str, redeemed_at: datetime) -> None:
        super().__init__(f"The code {code} was already redeemed "
                         f"({redeemed_at.isoformat(timespec='seconds')}Z UTC).")
        self.redeemed_at = redeemed_at


def redeem(session: Session, code: str, now: datetime | None = None) -> datetime:
    """unredeemed -> redeemed, once; the moment it was redeemed. NotFound for no such code,
    AlreadyRedeemed (409, with when) after. Commits."""
    now = (now or utcnow()).replace(microsecond=0)
    source, target = TRANSITIONS["redeem"]
    assert source is Redemption.UNREDEEMED and target is Redemption.REDEEMED
    moved = rowcount(session.execute(
        update(Code).where(Code.code == code, Code.redeemed_at.is_(None))
        .values(redeemed_at=now).execution_options(synchronize_session=False)))
    session.commit()
    if moved == 1:
        return now
    redeemed_at = session.scalar(select(Code.redeemed_at).where(Code.code == code))
    session.commit()
    if redeemed_at is None:
        raise NotFound(f"There is no code {code}.")
    raise AlreadyRedeemed(code, redeemed_at)
