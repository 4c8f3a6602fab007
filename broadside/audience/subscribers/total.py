"""The subscriber table's total, in its own request so the table answers first.

The total (`count_matching`, shown by its own request so the table answers first) never
counts past COUNT_CAP rows: an exact number up to it (a COUNT over a subquery with LIMIT
COUNT_CAP + 1), above it an estimate said as one: PostgreSQL's planner estimate for a filter,
or `pg_class.reltuples` for the whole table; SQLite has neither, so it says "more than
100,000". A filter no index serves is counted within the newest SCAN_WINDOW ids only, and the
total says so (`Total.window`: "at least N", the N found among them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from babel.numbers import format_decimal
from sqlalchemy import Select, func, literal, select, text
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import ClauseElement, Executable

from broadside.audience.subscribers import search
from broadside.audience.subscribers.search import Filters, filter_clauses, max_id, windowed
from broadside.core.i18n import _, current_locale
from broadside.core.models import Subscriber, Subscription
from broadside.core.models.audience import SUBSCRIPTION_STATUSES

COUNT_CAP = 100_000
# On PostgreSQL a list whose planner estimate is past this many times COUNT_CAP is not
# counted at all: the estimate is said (about N), as it would be after counting to the cap.
ESTIMATE_TRUSTED = 2


@dataclass(frozen=True)
class Total:
    """How many match: `value` is exact when `exact`, else an estimate (None: unknown, only
    "more than `cap`")."""

    value: int | None
    exact: bool
    cap: int = COUNT_CAP
    window: int | None = None  # counted among the newest `window` ids only

    @property
    def words(self) -> str:
        """The number in the language being spoken ("more than 100,000", "about 1.2 million")."""
        if self.exact:
            return format_decimal(self.value or 0, locale=current_locale())
        if self.value is None or self.value <= self.cap:
            return _("more than %(count)s", count=format_decimal(self.cap, locale=current_locale()))
        return _("about %(count)s", count=_round_words(self.value))


def _round_words(value: int) -> str:
    """Two significant figures, in words for millions: 1,234,567 -> "1.2 million"."""
    digits = max(int(math.log10(value)) + 1 - 2, 0)
    rounded = round(value, -digits)
    if rounded >= 1_000_000:
        millions = format_decimal(round(rounded / 1_000_000, 1), locale=current_locale())
        return _("%(count)s million", count=millions)
    return format_decimal(rounded, locale=current_locale())


class _Explain(Executable, ClauseElement):
    """EXPLAIN (FORMAT JSON) of a statement, its bound parameters passed as they are."""

    inherit_cache = False

    def __init__(self, statement: Select) -> None:
        self.statement = statement


@compiles(_Explain, "postgresql")
def _compile_explain(element: _Explain, compiler: Any, **kw: Any) -> str:
    return "EXPLAIN (FORMAT JSON) " + compiler.process(element.statement, **kw)


def _planned_rows(session: Session, statement: Select) -> float:
    """PostgreSQL's planner estimate of a statement's rows (EXPLAIN, nothing run)."""
    plan: Any = session.execute(_Explain(statement)).scalar()
    return float((plan[0] if isinstance(plan, list) else plan)["Plan"]["Plan Rows"])


def count_matching(session: Session, filters: Filters, *, cap: int = COUNT_CAP,
                   window: int | None = None) -> Total:
    """The total for the table's current filter, never counting past `cap` rows; with a
    `window` (0: SCAN_WINDOW), a filter no index serves is counted among the newest `window`
    ids only."""
    if window == 0:
        window = search.SCAN_WINDOW  # the table's own window, read when counted
    clauses = filter_clauses(session, filters)
    by_list = filters.list_id and not (filters.q or filters.segment_id or filters.locale) and \
        filters.status in ("", *SUBSCRIPTION_STATUSES)
    if window is not None and not by_list and windowed(filters):
        newest = max_id(session)
        if newest > window:
            found = session.scalar(select(func.count()).select_from(Subscriber).where(
                *clauses, Subscriber.id > newest - window)) or 0
            return Total(found, True, cap, window)
    if by_list:
        # One list (in one status): its subscriptions, one per person, counted on the
        # (list_id, status) index without reading a subscriber row.
        on_list = [Subscription.list_id == filters.list_id]
        if filters.status:
            on_list.append(Subscription.status == filters.status)
        bounded = select(literal(1)).select_from(Subscription).where(*on_list)
        postgresql = session.get_bind().dialect.name == "postgresql"
        if postgresql and (guess := _planned_rows(session, select(Subscription.id).where(
                *on_list))) > ESTIMATE_TRUSTED * cap:
            # Far past the cap by the planner's statistics of (list_id, status): counting
            # cap + 1 index entries (tens of ms) would only say "more than" the cap.
            return Total(int(guess), False, cap)
    else:
        bounded = select(literal(1)).select_from(Subscriber).where(*clauses)
    exact = session.scalar(select(func.count()).select_from(
        bounded.limit(cap + 1).subquery())) or 0
    if exact <= cap:
        return Total(exact, True, cap)
    if session.get_bind().dialect.name != "postgresql":
        return Total(None, False, cap)
    if not clauses:
        estimate = session.scalar(text(
            "SELECT reltuples FROM pg_class WHERE oid = 'subscribers'::regclass"))
    else:
        estimate = _planned_rows(session, select(Subscriber.id).where(*clauses))
    # Never analysed (reltuples -1) or an estimate below what was just seen: say only that.
    return Total(int(estimate) if estimate and estimate > cap else None, False, cap)


def count_exactly(session: Session, filters: Filters, max_id: int | None = None) -> int:
    """Every match (with ids up to `max_id`): for a confirmation page, not for each keystroke."""
    query = select(func.count()).select_from(Subscriber).where(*filter_clauses(session, filters))
    if max_id is not None:
        query = query.where(Subscriber.id <= max_id)
    return session.scalar(query) or 0
