"""The subscriber table: filters, search and keyset pagination that stay fast at 100k rows.

Pages are keyed on the subscriber id (newest first), so page 200 costs what page 1 costs.
Searching ("contains" by default, so "hamilton" finds Alexander Hamilton and
ahamilton@example.com; case-insensitive on the name and the address):

- "starts with" on the address uses the unique index on `subscribers.email` through a range
  (`email >= 'ann' AND email < 'ano'`), exact because addresses are stored lower-cased and the
  comparison is by code point (SQLite always; PostgreSQL when the database collation is C,
  which we check once; otherwise it falls back to LIKE alone). A term with an "@" searches
  the address alone (no name has one), in either mode.
- names, "contains" on anything, a status or a segment are a scan (LIKE '%x%' can use no
  B-tree index). The scan walks the primary key newest first and stops at the page size, so
  common terms return at once. A rare term would read the whole table (a million rows: a
  second), so every filtered request examines at most SCAN_WINDOW (20,000) ids (a range of the primary
  key: `before - SCAN_WINDOW <= id < before`). When the window ends before a page is full, the
  page says so ("searched the newest N; search further") and `Page.searched_to` is where the
  next request carries on: the owner sees what was searched and decides to go further. This
  was chosen over a trigram index (pg_trgm GIN, SQLite FTS5 `trigram`) because such an index
  must be written on every import and edit (the million-row import has its own target) and
  serves neither the status nor the segment filters; the window bounds them all alike.

The table's total is `broadside.audience.subscribers.total`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    exists,
    false,
    func,
    or_,
    select,
    text,
)
from sqlalchemy.orm import Session

from broadside.core.addresses import is_whole_address
from broadside.core.i18n import clean_locale
from broadside.core.models import MailingList, Segment, Subscriber, Subscription
from broadside.core.models.audience import SUBSCRIPTION_STATUSES, SUPPRESSIONS
from broadside.segments.service import segment_clause

PAGE_SIZE = 50
MAX_QUERY = 200
MATCH_MODES = ("contains", "prefix")  # the first is the default
# Ids examined by one request of a filter no index serves. Measured by query cost at 100k
# (bench/million_plans.py, a loaded machine): 100,000 ids of LIKE took 60-85 ms on SQLite and
# 175-230 ms on PostgreSQL, a list + status EXISTS 110 ms on SQLite; a fifth of that keeps a
# windowed request inside the table's 50 ms, at a million subscribers.
SCAN_WINDOW = 20_000
STATUS_FILTERS = (*SUBSCRIPTION_STATUSES, "suppressed", *SUPPRESSIONS)
# The language filter's value for readers with none of their own (their list's default).
NO_LOCALE = "none"
_ORDERED_COLLATION: dict[str, bool] = {}


@dataclass
class Filters:
    q: str = ""
    match: str = "contains"
    list_id: int | None = None
    status: str = ""
    segment_id: int | None = None
    locale: str = ""  # a language tag (`de` also finds de-AT), NO_LOCALE, or "" (any)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Filters:
        """A filter frozen with `as_dict` (a bulk action's), read back tolerantly."""
        return cls.parse(data.get("q"), data.get("match"), data.get("list_id"),
                         data.get("status"), data.get("segment_id"), data.get("locale"))

    def as_dict(self) -> dict[str, Any]:
        return {"q": self.q, "match": self.match, "list_id": self.list_id, "status": self.status,
                "segment_id": self.segment_id, "locale": self.locale}

    @classmethod
    def parse(cls, q: str | None = None, match: str | None = None, list_id: str | int | None = None,
              status: str | None = None, segment_id: str | int | None = None,
              locale: str | None = None) -> Filters:
        """Tolerant parsing of query-string values: anything unknown means "no filter"."""
        # NUL (PostgreSQL refuses it in text) and lone surrogates are dropped: no address or
        # name holds them, so the search means the same without them. A request never gets
        # here with one (webapp/text_input.py refuses it with a 422 naming `q`, as the
        # deliveries search is refused); a filter read back from a stored bulk action might.
        q = " ".join(_searchable(q or "").split())[:MAX_QUERY]
        match = match if match in MATCH_MODES else MATCH_MODES[0]
        status = status if status in STATUS_FILTERS else ""
        locale = locale if locale == NO_LOCALE else clean_locale(locale) or ""
        return cls(q, match, _id_or_none(list_id), status, _id_or_none(segment_id), locale)

    def as_args(self) -> dict[str, str]:
        args = {"q": self.q, "match": self.match if self.q and self.match != MATCH_MODES[0] else "",
                "list": str(self.list_id) if self.list_id else "", "status": self.status,
                "segment": str(self.segment_id) if self.segment_id else "",
                "language": self.locale}
        return {k: v for k, v in args.items() if v}


@dataclass
class Row:
    subscriber: Subscriber
    subscriptions: list[tuple[str, str]] = field(default_factory=list)  # (list name, status)


@dataclass
class Page:
    rows: list[Row]
    next_before: int | None  # id to pass as `before` for the next (older) page
    prev_after: int | None  # id to pass as `after` for the previous (newer) page
    # Set when the scan window ended before the page was full and older people are left
    # unsearched: the `before` that searches on from there (the page says so).
    searched_to: int | None = None
    window: int = 0  # the ids a request examines at most (0: not windowed)


def _searchable(text: str) -> str:
    return "".join(c for c in text if c != "\x00" and not "\ud800" <= c <= "\udfff")


def _id_or_none(value: str | int | None) -> int | None:
    try:
        parsed = int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None
    return parsed if parsed is not None and 0 < parsed < 2**31 else None


def parse_id(value: str | int | None) -> int | None:
    """A database id from a form or query string; None when missing or not one."""
    return _id_or_none(value)


def _escape_like(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _ordered_collation(session: Session) -> bool:
    """True when `>=`/`<` on text compare by code point (so a prefix is a range)."""
    bind = session.get_bind()
    if bind.dialect.name == "sqlite":
        return True
    key = str(bind.engine.url)
    if key not in _ORDERED_COLLATION:
        collation = session.scalar(
            text("SELECT datcollate FROM pg_database WHERE datname = current_database()")
        )
        _ORDERED_COLLATION[key] = (collation or "").split(".")[0] in ("C", "POSIX")
    return _ORDERED_COLLATION[key]


def _prefix_upper_bound(prefix: str) -> str:
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def filter_clauses(session: Session, filters: Filters) -> list:
    clauses = []
    if filters.q:
        needle = filters.q.lower()
        pattern = _escape_like(needle)
        # Addresses are stored lower-cased. For names, SQLite's LIKE already ignores ASCII case
        # (as its lower() would: both are ASCII-only) and costs half as much without lower();
        # PostgreSQL has ILIKE.
        sqlite = session.get_bind().dialect.name == "sqlite"
        name_like = Subscriber.name.like if sqlite else Subscriber.name.ilike
        if filters.match == "prefix":
            email_match: ColumnElement[bool] = Subscriber.email.like(pattern + "%", escape="\\")
            if _ordered_collation(session):
                email_match = and_(Subscriber.email >= needle,
                                   Subscriber.email < _prefix_upper_bound(needle), email_match)
            name_match = name_like(pattern + "%", escape="\\")
        else:
            email_match = Subscriber.email.like("%" + pattern + "%", escape="\\")
            name_match = name_like("%" + pattern + "%", escape="\\")
        # An "@" never appears in a name: search the (indexed) address alone.
        clauses.append(email_match if "@" in needle else or_(email_match, name_match))
    status = filters.status
    if status in SUPPRESSIONS:
        clauses.append(Subscriber.suppression == status)
    elif status == "suppressed":
        clauses.append(Subscriber.suppression.is_not(None))
    if status in SUBSCRIPTION_STATUSES or filters.list_id:
        on_list = [Subscription.subscriber_id == Subscriber.id]
        if filters.list_id:
            on_list.append(Subscription.list_id == filters.list_id)
        if status in SUBSCRIPTION_STATUSES:
            on_list.append(Subscription.status == status)
        clauses.append(exists().where(*on_list))
    if filters.locale == NO_LOCALE:
        clauses.append(Subscriber.locale.is_(None))
    elif filters.locale:
        clauses.append(or_(Subscriber.locale == filters.locale,
                           Subscriber.locale.like(filters.locale + "-%")))
    if filters.segment_id:
        # Who the segment reaches now (a deleted segment reaches nobody).
        segment = session.get(Segment, filters.segment_id)
        clauses.append(segment_clause(session, segment) if segment is not None else false())
    return clauses


def windowed(filters: Filters) -> bool:
    """True when some index may not serve this filter, so a request examines at most
    SCAN_WINDOW ids: any filter but none at all, or a starts-with search of an address
    alone (a range of the unique index on `email`)."""
    if filters.q and filters.match == "prefix" and "@" in filters.q:
        return bool(filters.status or filters.list_id or filters.segment_id or filters.locale)
    return bool(filters.q or filters.status or filters.list_id or filters.segment_id
                or filters.locale)


def _whole_address(session: Session, filters: Filters) -> list[Subscriber]:
    """When the window found nobody and the term is a whole address (what an owner pastes to
    find one person), that person through the unique index on `email`, wherever their id
    lies: the window bounds the scan, never an exact lookup."""
    needle = (filters.q or "").strip().lower()
    if not is_whole_address(needle):
        return []
    exact = Filters.from_dict({**filters.as_dict(), "q": None})
    return list(session.scalars(select(Subscriber).where(
        Subscriber.email == needle, *filter_clauses(session, exact)).limit(1)))


def max_id(session: Session) -> int:
    return session.scalar(select(func.max(Subscriber.id))) or 0


def search(session: Session, filters: Filters, *, before: int | None = None,
           after: int | None = None, page_size: int = PAGE_SIZE,
           window: int | None = None) -> Page:
    """One page of subscribers, newest first, keyed on id (`before` or `after` a given id);
    a filtered request examines at most `window` ids (default SCAN_WINDOW; see the module's
    docstring)."""
    window = window or SCAN_WINDOW
    query = select(Subscriber).where(*filter_clauses(session, filters))
    bounded = windowed(filters)
    searched_to = None
    if after is not None:
        if bounded:
            query = query.where(Subscriber.id <= after + window)
        rows = list(session.scalars(
            query.where(Subscriber.id > after).order_by(Subscriber.id.asc()).limit(page_size + 1)
        ))
        has_newer = len(rows) > page_size or (bounded and after + window < max_id(session))
        rows = list(reversed(rows[:page_size]))
        has_older = True
        if not rows:
            return Page([], None, after + window if has_newer else None, window=window)
    else:
        top = before
        if bounded:
            top = before if before is not None else max_id(session) + 1
            query = query.where(Subscriber.id >= top - window)
        if before is not None:
            query = query.where(Subscriber.id < before)
        rows = list(session.scalars(query.order_by(Subscriber.id.desc()).limit(page_size + 1)))
        has_older = len(rows) > page_size
        rows = rows[:page_size]
        has_newer = before is not None
        if bounded and top is not None and not has_older and top - window > 1:
            # The window ended first: are there older people it did not reach?
            if session.scalar(select(Subscriber.id).where(Subscriber.id < top - window)
                              .order_by(Subscriber.id.desc()).limit(1)) is not None:
                searched_to = top - window
    if not rows and bounded and after is None:
        rows = _whole_address(session, filters)
    if not rows:
        return Page([], None, before - 1 if bounded and before else None, searched_to, window)
    subscriptions: dict[int, list[tuple[str, str]]] = {}
    for subscriber_id, list_name, status in session.execute(
        select(Subscription.subscriber_id, MailingList.name, Subscription.status)
        .join(MailingList, MailingList.id == Subscription.list_id)
        .where(Subscription.subscriber_id.in_([s.id for s in rows]))
        .order_by(MailingList.name)
    ):
        subscriptions.setdefault(subscriber_id, []).append((list_name, status))
    return Page(
        [Row(s, subscriptions.get(s.id, [])) for s in rows],
        next_before=rows[-1].id if has_older else None,
        prev_after=rows[0].id if has_newer else None,
        searched_to=searched_to,
        window=window,
    )


def page_by_id(session: Session, filters: Filters, *, after: int = 0, limit: int = 100
               ) -> tuple[list[tuple[Subscriber, list[tuple[int, str]]]], int | None]:
    """One page in ascending id order, ids above `after`, for the API's keyset paging: each
    person with their (list id, status) pairs, and the id to pass as `after` for the next page,
    None on the last one. Every person who matches throughout the paging is seen exactly once;
    nobody is seen twice, whatever changes meanwhile."""
    rows = list(session.scalars(
        select(Subscriber).where(*filter_clauses(session, filters), Subscriber.id > after)
        .order_by(Subscriber.id.asc()).limit(limit + 1)
    ))
    more = len(rows) > limit
    rows = rows[:limit]
    subscriptions: dict[int, list[tuple[int, str]]] = {}
    if rows:
        for subscriber_id, list_id, status in session.execute(
            select(Subscription.subscriber_id, Subscription.list_id, Subscription.status)
            .where(Subscription.subscriber_id.in_([s.id for s in rows]))
            .order_by(Subscription.list_id)
        ):
            subscriptions.setdefault(subscriber_id, []).append((list_id, status))
    return ([(s, subscriptions.get(s.id, [])) for s in rows],
            rows[-1].id if more and rows else None)
