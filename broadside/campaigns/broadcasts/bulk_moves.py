"""PostgreSQL: a group of guarded row moves as ONE `UPDATE ... FROM unnest(arrays)` statement.

`broadside.campaigns.broadcasts.ledger.move_rows` uses it for a group of more than one row on
PostgreSQL (a delivery's or an automation message's): each row is still guarded by its own
`status = source`, and RETURNING names exactly the rows that moved (invariant 4).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import text


class RowValues(Protocol):
    """One row's move: its id and the values to write (`ledger.Change` is one)."""

    delivery_id: int
    values: dict[str, Any]


_unnest_statements: dict[tuple[str, ...], Any] = {}  # (table, *columns) -> UPDATE ... FROM unnest


def unnest_move(dialect: Any, table: Any, keys: tuple[str, ...], group: Sequence[RowValues], source: str,
                target: str, now: datetime, *, attempts_key: str) -> tuple[Any, dict[str, Any]]:
    """PostgreSQL: a group's guarded moves as ONE statement, the rows' values as arrays,

        UPDATE t SET status = :target, updated_at = :now, col = v.col, ...
        FROM unnest(CAST(:ids AS INTEGER[]), CAST(:col AS TYPE[]), ...) AS v(id, col, ...)
        WHERE t.id = v.id AND t.status = :source RETURNING t.id

    instead of one UPDATE per row (an executemany): the server runs one statement, not a
    hundred, which on a shared machine is CPU taken from the mail server. The same text for
    every batch of one shape, so psycopg prepares it. `attempts_key`: the values key that is
    added to `attempts` rather than written."""
    statement = _unnest_statements.get((table.name, *keys))
    if statement is None:
        def array_of(column: Any) -> str:
            return f"{column.type.compile(dialect=dialect)}[]"

        columns = ["id", *(("attempts" if k == attempts_key else k) for k in keys)]
        arrays = [f"CAST(:a_{i} AS {array_of(table.c[name])})" for i, name in enumerate(columns)]
        sets = ["status = :target", "updated_at = :now"]
        for i, key in enumerate(keys, start=1):
            sets.append(f"attempts = t.attempts + v.c{i}" if key == attempts_key
                        else f"{table.c[key].name} = v.c{i}")
        statement = text(
            f"UPDATE {table.name} AS t SET {', '.join(sets)} "
            f"FROM unnest({', '.join(arrays)}) AS v({', '.join(f'c{i}' for i in range(len(columns)))}) "
            "WHERE t.id = v.c0 AND t.status = :source RETURNING t.id"
        )
        _unnest_statements[(table.name, *keys)] = statement
    params: dict[str, Any] = {"target": target, "source": source, "now": now,
                              "a_0": [c.delivery_id for c in group]}
    for i, key in enumerate(keys, start=1):
        params[f"a_{i}"] = [c.values[key] for c in group]
    return statement, params
