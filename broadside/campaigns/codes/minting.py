"""Minting: each claimed row of a broadcast or step with codes on gets one code, in the
claim's own transaction (invariant 4: the engine commits the claim before any send, so the
row's `sending` and its code commit together or not at all).

A code is the owner's prefix, a hyphen and CODE_LENGTH characters drawn with `secrets` from
ALPHABET: the digits and capitals without the look-alikes 0/O, 1/I/L (31 characters, so
31^8, about 8.5 * 10^11 codes per prefix). A claimed batch's codes are one multi-row
`INSERT ... ON CONFLICT DO NOTHING RETURNING` (SQLite >= 3.35 and PostgreSQL): set-based, not
one round trip per row. A row that was minted for already (claimed again after going back to
pending, or a duplicated job) conflicts on UNIQUE(source_kind, source_id) and keeps the code
it has, read back; a drawn code that is taken (UNIQUE(code)) is drawn again.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core.db import dialect_insert
from broadside.core.errors import ValidationError
from broadside.core.models import Code
from broadside.core.models.codes import CODE_LENGTH, MAX_PREFIX
from broadside.core.timeutil import utcnow

ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
PREFIX_FIELD = "codes.prefix"
_PREFIX = re.compile(rf"[A-Z0-9]{{1,{MAX_PREFIX}}}")
MAX_DRAWS = 5  # a taken code drawn five times running is not chance: stop, say so
DELIVERY, AUTOMATION_MESSAGE = "delivery", "automation_message"
_CODES = Code.__table__


def clean_prefix(value: object, field: str = PREFIX_FIELD, where: str = "") -> str:
    """The owner's prefix, or a ValidationError naming `field` (and `where`, "Step 2: "):
    1 to 12 of A-Z and 0-9."""
    if not isinstance(value, str) or not _PREFIX.fullmatch(value):
        raise ValidationError(f"{where}The codes' prefix must be 1 to {MAX_PREFIX} capital "
                              "letters A-Z or digits 0-9 (for example SAVE).", field=field)
    return value


def codes_setting(value: object, field: str = "codes", where: str = "") -> str | None:
    """The API's `codes`: null (off) or {"prefix": "SAVE"}; the prefix, or None."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"prefix"}:
        raise ValidationError(f'{where}codes must be null (off) or {{"prefix": "SAVE"}}.',
                              field=field)
    return clean_prefix(value["prefix"], f"{field}.prefix", where)


def codes_json(prefix: str | None) -> dict[str, str] | None:
    return None if prefix is None else {"prefix": prefix}


def new_code(prefix: str, choose: Callable[[str], str] = secrets.choice) -> str:
    return prefix + "-" + "".join(choose(ALPHABET) for _ in range(CODE_LENGTH))


@dataclass(frozen=True)
class ToMint:
    """A claimed row that carries a code, and what its code will say it came from."""

    row_id: int
    subscriber_id: int | None
    prefix: str
    broadcast_id: int | None = None
    automation_id: int | None = None
    step_id: int | None = None


def mint(session: Session, kind: str, rows: Sequence[ToMint], now: datetime | None = None, *,
         choose: Callable[[str], str] = secrets.choice) -> dict[int, str]:
    """Each row's code ({row id: code}): minted now, or the one it was minted before. In the
    caller's transaction (the claim's); one INSERT for the batch, one SELECT more only when
    a row had a code already or a drawn code was taken. Does not commit."""
    now = now or utcnow()
    codes: dict[int, str] = {}
    wanted = list(rows)
    connection = session.connection()
    for _ in range(MAX_DRAWS):
        if not wanted:
            return codes
        values = [{"code": new_code(r.prefix, choose), "prefix": r.prefix, "source_kind": kind,
                   "source_id": r.row_id, "subscriber_id": r.subscriber_id,
                   "broadcast_id": r.broadcast_id, "automation_id": r.automation_id,
                   "step_id": r.step_id, "minted_at": now} for r in wanted]
        codes.update(connection.execute(
            dialect_insert(session, _CODES).values(values).on_conflict_do_nothing()
            .returning(_CODES.c.source_id, _CODES.c.code)).all())
        left = [r.row_id for r in wanted if r.row_id not in codes]
        if left:  # minted before (kept), or a drawn code was taken (drawn again)
            codes.update(connection.execute(
                select(_CODES.c.source_id, _CODES.c.code)
                .where(_CODES.c.source_kind == kind, _CODES.c.source_id.in_(left))).all())
        wanted = [r for r in wanted if r.row_id not in codes]
    if wanted:
        raise RuntimeError(f"{len(wanted)} codes drawn {MAX_DRAWS} times were all taken")
    return codes
