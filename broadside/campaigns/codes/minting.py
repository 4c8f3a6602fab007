"""Minting: each claimed row of a broadcast or step with codes on gets one code, in the
claim's own transaction (invariant 4: the engine commits the claim before any send, so the
row's `sending` and its code commit together or not at all).

A code is the owner's prefix, a hyphen and CODE_LENGTH characters drawn with `secrets` from
ALPHABET: the digits and capitals without the look-alikes 0/O, 1/I/L (31 characters, so
31^8, about 8.5 * 10^11 codes per prefix). A claimed batch's codes are set-based, not one
round trip per row: on PostgreSQL one `INSERT ... SELECT FROM unnest(arrays) ON CONFLICT DO
NOTHING RETURNING`, on SQLite one prepared INSERT run as the driver's executemany and one
SELECT of the codes back (bench/codes.py: what a code adds to a claim). A row that was minted
for already (claimed again after going back to pending, or a duplicated job) conflicts on
UNIQUE(source_kind, source_id) and keeps the code it has, read back; a drawn code that is
taken (UNIQUE(code)) is drawn again.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, text
from sqlalchemy.orm import Session

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


_SQLITE_INSERT = ("INSERT INTO codes (code, prefix, source_kind, source_id, subscriber_id, "
                  "broadcast_id, automation_id, step_id, minted_at) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")

# PostgreSQL: the batch's rows as arrays, ONE statement of the same text every batch (so
# psycopg prepares it once); the multi-row VALUES form was a new 900-parameter text each time,
# which psycopg parsed again per batch (about 5 ms of a 100-row claim).
_ARRAYS = {"code": "VARCHAR", "prefix": "VARCHAR", "source_id": "INTEGER",
           "subscriber_id": "INTEGER", "broadcast_id": "INTEGER", "automation_id": "INTEGER",
           "step_id": "INTEGER"}
_UNNEST_INSERT = text(
    f"INSERT INTO codes (source_kind, minted_at, {', '.join(_ARRAYS)}) "
    f"SELECT :kind, :now, {', '.join(f'v.{c}' for c in _ARRAYS)} FROM unnest("
    + ", ".join(f"CAST(:a_{c} AS {t}[])" for c, t in _ARRAYS.items())
    + f") AS v({', '.join(_ARRAYS)}) ON CONFLICT DO NOTHING RETURNING source_id, code")
_UNBIASED = 256 - 256 % len(ALPHABET)  # bytes at or above it would favour the first letters


def draw(count: int) -> list[str]:
    """`count` random parts of CODE_LENGTH characters from ALPHABET, uniformly: random bytes
    from `secrets` in one call per batch (a `secrets.choice` per character cost more than the
    claim itself), each below _UNBIASED taken modulo the alphabet, the rest drawn again."""
    need = count * CODE_LENGTH
    chars: list[str] = []
    while len(chars) < need:
        chars += [ALPHABET[b % len(ALPHABET)]
                  for b in secrets.token_bytes(need - len(chars) + 8) if b < _UNBIASED]
    return ["".join(chars[i:i + CODE_LENGTH]) for i in range(0, need, CODE_LENGTH)]


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
         drawn: Callable[[int], list[str]] = draw) -> dict[int, str]:
    """Each row's code ({row id: code}): minted now, or the one it was minted before. In the
    caller's transaction (the claim's); one INSERT for the batch (and on SQLite one SELECT of
    the codes back). Does not commit."""
    now = now or utcnow()
    codes: dict[int, str] = {}
    wanted = list(rows)
    connection = session.connection()
    for _ in range(MAX_DRAWS):
        if not wanted:
            return codes
        values = [{"code": f"{r.prefix}-{part}", "prefix": r.prefix, "source_id": r.row_id,
                   "subscriber_id": r.subscriber_id,
                   "broadcast_id": r.broadcast_id, "automation_id": r.automation_id,
                   "step_id": r.step_id}
                  for r, part in zip(wanted, drawn(len(wanted)), strict=True)]
        if connection.dialect.name == "postgresql":
            codes.update(connection.execute(_UNNEST_INSERT, {
                "kind": kind, "now": now,
                **{f"a_{column}": [v[column] for v in values] for column in _ARRAYS}}).all())
        else:
            # SQLite: the driver's executemany of one prepared INSERT (a RETURNING form was a
            # new multi-row text every batch, prepared again each time; SQLAlchemy's per-row
            # parameter processing cost as much as the INSERT), then the codes read back.
            stored = _CODES.c.minted_at.type.dialect_impl(connection.dialect).bind_processor(
                connection.dialect)
            stamp = stored(now) if stored is not None else now  # as SQLAlchemy stores it
            cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
            try:
                cursor.executemany(_SQLITE_INSERT, [
                    (v["code"], v["prefix"], kind, v["source_id"], v["subscriber_id"],
                     v["broadcast_id"], v["automation_id"], v["step_id"], stamp) for v in values])
            finally:
                cursor.close()
        left = [r.row_id for r in wanted if r.row_id not in codes]
        if left:  # SQLite; minted before (kept), or a drawn code was taken (drawn again)
            codes.update(connection.execute(
                select(_CODES.c.source_id, _CODES.c.code)
                .where(_CODES.c.source_kind == kind, _CODES.c.source_id.in_(left))).all())
        wanted = [r for r in wanted if r.row_id not in codes]
    if wanted:
        raise RuntimeError(f"{len(wanted)} codes drawn {MAX_DRAWS} times were all taken")
    return codes
