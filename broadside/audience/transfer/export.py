"""CSV export of a list or of a filtered view of the subscriber table, streamed in chunks.

Columns: email, name, then one column per attribute name. That is exactly what the importer
reads, so import -> export -> import gives the same people. Cells a spreadsheet would run as a
formula (starting with = + - @ tab or CR) get a leading apostrophe; the importer strips it.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.audience.subscribers.search import Filters, filter_clauses
from broadside.audience.transfer.csvfile import FORMULA_PREFIXES
from broadside.core.models import Subscriber

CHUNK_ROWS = 1000


def safe_cell(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if text.startswith(FORMULA_PREFIXES):
        return "'" + text
    return text


def _chunks(session: Session, query, id_column, chunk_rows: int = CHUNK_ROWS) -> Iterator[Sequence[Any]]:
    """Keyset-paged chunks by id: no long-lived cursor, no whole result in memory."""
    last = 0
    while True:
        rows = session.execute(
            query.where(id_column > last).order_by(id_column).limit(chunk_rows)
        ).all()
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def _csv_text(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    return buffer.getvalue()


def export_subscribers(session: Session, filters: Filters) -> Iterator[str]:
    """The CSV, a chunk of rows at a time (two passes: attribute names first, then rows)."""
    clauses = filter_clauses(session, filters)
    keys: dict[str, None] = {}
    attributes_query = select(Subscriber.id, Subscriber.attributes).where(*clauses)
    for rows in _chunks(session, attributes_query, Subscriber.id):
        for _, attributes in rows:
            for key in attributes or {}:
                keys.setdefault(key, None)
    columns = list(keys)
    yield _csv_text([["email", "name", *[safe_cell(k) for k in columns]]])
    rows_query = select(Subscriber.id, Subscriber.email, Subscriber.name,
                        Subscriber.attributes).where(*clauses)
    for rows in _chunks(session, rows_query, Subscriber.id):
        yield _csv_text([
            [safe_cell(email), safe_cell(name),
             *[safe_cell((attributes or {}).get(key)) for key in columns]]
            for _, email, name, attributes in rows
        ])
    session.rollback()  # end the read transaction the generator kept open
