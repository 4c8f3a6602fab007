"""Invariant 9 as the owner reads it: who got the broadcast, who did not, and why.

A keyset-paginated deliveries table (filter by status, search by email), each row's timeline
of events in words (`delivery_words`), and the rows the owner may choose to send again.

Every page is read through the (broadcast_id, status, id) index, never an OFFSET or a COUNT
(the counts come from the broadcast's counters): with a status, one range of it; without
one, the first rows past the key in each status's range (one small ordered range per status,
in one statement), of which the first page's worth are kept. So page 1 and page 10,000 of a
million-row broadcast cost the same, and no row is skipped or repeated between pages however
rows move between statuses meanwhile (the key is the row's id, which never changes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, and_, func, literal, literal_column, or_, select, true, union_all
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import service
from broadside.campaigns.broadcasts.delivery_words import DeliveryRow, delivery_words, person_words
from broadside.campaigns.broadcasts.progress import Progress
from broadside.core.addresses import is_whole_address
from broadside.core.errors import NotFound, ValidationError
from broadside.core.i18n import _, _l
from broadside.core.models import Delivery, Event, Subscriber
from broadside.core.models.sending import DELIVERY_STATUSES

PER_PAGE = 50
MAX_QUERY = 320
# Deliveries one search request examines at most (a range of ids past the page's key): a
# search by address is a LIKE over the joined subscribers, which no index serves, so like the
# subscriber table's (broadside/audience/subscribers/search.py) it is bounded, and the page
# says so and offers to search the next ones. Without a search, pages are index ranges.
SEARCH_WINDOW = 20_000
# PostgreSQL: a search looks the PROBE deliveries nearest its key up one by one, then reads
# the rest of its window's people as a range of subscriber ids if that range holds at most
# SPAN_PER_DELIVERY ids a delivery (see `_searched`).
PROBE = 1_000
SPAN_PER_DELIVERY = 4

# Subscriber-level events that explain a delivery (someone left, bounced, complained...).
PERSON_KINDS = ("unsubscribed", "resubscribed", "bounce", "complaint", "suppressed", "unsuppressed")

UNKNOWN_EXPLANATION = _l(
    "The message was handed to the mail server but the connection was lost before it "
    "confirmed, so it may already be in the inbox. Broadside never sends these again on its "
    "own: a second copy is worse than a missing one."
)


@dataclass(frozen=True)
class DeliveryPage:
    rows: list[DeliveryRow]
    status: str | None
    query: str
    first_id: int | None
    last_id: int | None
    has_next: bool
    has_prev: bool
    # Where the page starts and how long it is, as asked: the page's live refresh asks for
    # exactly this page again (the rows move between statuses during a send).
    after: int | None = None
    before: int | None = None
    per_page: int = PER_PAGE
    # A search whose window ended before the page was full, with deliveries left beyond it:
    # the `after` (or, going back, the `before`) that searches on from there.
    searched_to: int | None = None
    searched_back: bool = False
    window: int = SEARCH_WINDOW
    # The first window found nobody and the search is a whole address: its person's delivery,
    # found through the unique indexes wherever it lies (`_whole_address`).
    whole_address: bool = False

    @property
    def size_arg(self) -> int | None:
        """The page length for a URL: None when it is the default one."""
        return None if self.per_page == PER_PAGE else self.per_page


def _columns(person=Subscriber):
    return (Delivery.id, Delivery.subscriber_id, person.email, person.name, Delivery.status,
            Delivery.reason, Delivery.smtp_code, Delivery.error_class, Delivery.attempts,
            Delivery.next_attempt_at, Delivery.sent_at, Delivery.updated_at)


def _with_person() -> Select:
    """The deliveries with their person's address and name (none for an erased person)."""
    return select(*_columns()).outerjoin(Subscriber, Subscriber.id == Delivery.subscriber_id)


def _looked_up() -> Select:
    """PostgreSQL: the deliveries, each with its person looked up by id (a LATERAL subquery),
    for a search: joined plainly, the planner reads every subscriber to find the few whose
    address matches (a million rows: 200 ms). ~1.5 µs a delivery, and it stops as soon as the
    page is full. A searched row always has a person."""
    # OFFSET keeps PostgreSQL from flattening the subquery back into that join.
    person = (select(Subscriber.email, Subscriber.name)
              .where(Subscriber.id == Delivery.subscriber_id).offset(0).lateral())
    return select(*_columns(person.c)).join(person, true())


def _by_range(session: Session, broadcast_id: int, low: int, high: int) -> Select | None:
    """PostgreSQL: the deliveries low < id < high with their people, for a search, read as a
    range of subscriber ids when that range is short. A snapshot writes a broadcast's
    deliveries in subscriber order, so a window's people are usually a short range: read in
    id order with the LIKE (~0.3 µs a person), each match then finds its delivery by
    (subscriber_id, broadcast_id): 20,000 deliveries in ~6 ms, against ~30 ms looked up one by
    one. The range is the window's lowest and highest subscriber id (one statement over its
    deliveries alone, ~3 ms), so every delivery of the window has its person in it: the same
    rows. Past SPAN_PER_DELIVERY people a delivery of the window (other broadcasts' deliveries
    may share its ids), the lookups are cheaper and used. None: the window has no delivery
    with a person."""
    people = (select(Delivery.subscriber_id)
              .where(Delivery.broadcast_id == broadcast_id, Delivery.id > low, Delivery.id < high)
              .offset(0).subquery())  # OFFSET: aggregated as read, not walked in an index's order
    lowest, highest, deliveries = session.execute(select(
        func.min(people.c.subscriber_id), func.max(people.c.subscriber_id),
        func.count(people.c.subscriber_id))).one()
    if not deliveries:
        return None
    if highest - lowest >= SPAN_PER_DELIVERY * deliveries:
        return _looked_up()
    return (select(*_columns()).join(Subscriber, Subscriber.id == Delivery.subscriber_id)
            .where(Subscriber.id.between(lowest, highest)))


def _searched(session: Session, broadcast_id: int, status: str | None, query: str, low: int,
              high: int, backwards: bool, limit: int) -> list[DeliveryRow]:
    """The first `limit` deliveries low < id < high (from `high` down when `backwards`) whose
    person's address contains `query`, in that order.

    On PostgreSQL in two steps: the PROBE deliveries nearest the key one by one, which fills
    the page at once when many addresses match; only if it did not, the rest of the window
    by range (`_by_range`), which reads the window's people whatever the page needs."""
    pattern = f"%{_like_escape(query)}%"

    def rows(shape: Select, low: int, high: int, limit: int) -> list[DeliveryRow]:
        statement = shape.where(Delivery.broadcast_id == broadcast_id,
                                Delivery.id > low, Delivery.id < high)
        if status:
            statement = statement.where(Delivery.status == status)
        statement = statement.where(statement.selected_columns[2].like(pattern, escape="\\"))
        statement = statement.order_by(Delivery.id.desc() if backwards else Delivery.id)
        return [DeliveryRow(*row) for row in session.execute(statement.limit(limit))]

    if session.get_bind().dialect.name != "postgresql":
        return rows(_with_person(), low, high, limit)
    if backwards:
        near, rest = (max(low, high - PROBE - 1), high), (low, max(low, high - PROBE - 1) + 1)
    else:
        near, rest = (low, min(high, low + PROBE + 1)), (min(high, low + PROBE + 1) - 1, high)
    found = rows(_looked_up(), *near, limit)
    if len(found) >= limit or rest[1] - rest[0] <= 1:
        return found
    shape = _by_range(session, broadcast_id, *rest)
    return found if shape is None else found + rows(shape, *rest, limit - len(found))


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def delivery_page(session: Session, broadcast_id: int, *, status: str | None = None,
                  query: str = "", after: int | None = None, before: int | None = None,
                  per_page: int = PER_PAGE) -> DeliveryPage:
    """One page of a broadcast's deliveries in id order, by keyset (never OFFSET): at most
    `per_page` (1 to PER_PAGE) rows, read with a LIMIT: never the whole table, so the
    broadcast page can re-read the visible page while a send runs."""
    service.get_broadcast(session, broadcast_id)
    per_page = max(1, min(per_page, PER_PAGE))
    status = status or None
    if status is not None and status not in DELIVERY_STATUSES:
        raise ValidationError(_("Filter by one of: %(statuses)s.",
                                statuses=", ".join(DELIVERY_STATUSES)))
    query = (query or "").strip().lower()
    if len(query) > MAX_QUERY:
        raise ValidationError(_("Search for at most %(count)s characters.", count=MAX_QUERY))
    if "\x00" in query:  # PostgreSQL refuses NUL in text (`?q=%00` was a 500)
        raise ValidationError(_("Search for an address without a NUL character (%(nul)s) in it.",
                                nul="%00"))
    backwards = before is not None and after is None
    low = high = 0  # a search's window of ids: low < id < high
    if query:
        if before is not None and backwards:
            low, high = before - SEARCH_WINDOW - 1, before
        else:
            start = after if after is not None else _first_id(session, broadcast_id) - 1
            low, high = start, start + SEARCH_WINDOW + 1
        found = _searched(session, broadcast_id, status, query, low, high, backwards, per_page + 1)
    else:
        statement = _with_person().where(Delivery.broadcast_id == broadcast_id)
        if status:
            statement = statement.where(Delivery.status == status)
        else:
            statement = statement.where(Delivery.id.in_(next_delivery_ids(
                broadcast_id, after, before if backwards else None, per_page + 1)))
        if backwards:
            statement = statement.where(Delivery.id < before).order_by(Delivery.id.desc())
        else:
            if after is not None:
                statement = statement.where(Delivery.id > after)
            statement = statement.order_by(Delivery.id)
        found = [DeliveryRow(*row) for row in session.execute(statement.limit(per_page + 1))]
    whole_address = False
    if query and not found and after is None and before is None:
        found = _whole_address(session, broadcast_id, status, query)
        whole_address = bool(found)
    more = len(found) > per_page
    rows = found[:per_page]
    searched_to = None
    if query and not more:
        # The window ended first: are there deliveries beyond it, not searched yet?
        edge = low if backwards else high - 1
        if _any_beyond(session, broadcast_id, edge, backwards):
            searched_to = edge + 1 if backwards else edge
    if backwards:
        rows.reverse()
        has_prev, has_next = more, True
    else:
        has_prev, has_next = after is not None and after > 0, more
    return DeliveryPage(rows, status, query, rows[0].id if rows else None,
                        rows[-1].id if rows else None, has_next, has_prev,
                        after=after, before=before if backwards else None, per_page=per_page,
                        searched_to=searched_to, searched_back=backwards, window=SEARCH_WINDOW,
                        whole_address=whole_address)


def _whole_address(session: Session, broadcast_id: int, status: str | None,
                   query: str) -> list[DeliveryRow]:
    """When the first window found nobody and the search is a whole address (what an owner
    pastes to find one person, say from a complaint), that person's delivery through the
    unique indexes on `email` and (subscriber_id, broadcast_id), wherever it lies: the window
    bounds the scan, never an exact lookup (as the subscriber table's search does)."""
    if not is_whole_address(query):
        return []
    person = select(Subscriber.id).where(Subscriber.email == query).scalar_subquery()
    statement = _with_person().where(Delivery.broadcast_id == broadcast_id,
                                     Delivery.subscriber_id == person)
    if status:
        statement = statement.where(Delivery.status == status)
    return [DeliveryRow(*row) for row in session.execute(statement.limit(1))]


def _first_id(session: Session, broadcast_id: int) -> int:
    """The broadcast's lowest delivery id (0 if none): the first of each status's range."""
    first: Select[tuple[int | None]] = select(func.min(literal_column("id"))).select_from(
        next_delivery_ids(broadcast_id, None, None, 1).subquery())
    return session.scalar(first) or 0


def _any_beyond(session: Session, broadcast_id: int, edge: int, backwards: bool) -> bool:
    """Whether the broadcast has a delivery past `edge` (below it, going back)."""
    ids = next_delivery_ids(broadcast_id, None if backwards else edge,
                            edge + 1 if backwards else None, 1)
    return (session.scalar(select(func.count()).select_from(ids.subquery())) or 0) > 0


def next_delivery_ids(broadcast_id: int, after: int | None, before: int | None, limit: int):
    """The ids of the first `limit` deliveries past the key, in any status: the first `limit`
    of each status's own range of the (broadcast_id, status, id) index, together (the first
    `limit` overall are among them). A subquery for an IN (this table's, the API's)."""
    branches = []
    for each in DELIVERY_STATUSES:
        branch = select(Delivery.id).where(Delivery.broadcast_id == broadcast_id,
                                           Delivery.status == literal(each, Delivery.status.type))
        if before is not None:
            branch = branch.where(Delivery.id < before).order_by(Delivery.id.desc())
        else:
            if after is not None:
                branch = branch.where(Delivery.id > after)
            branch = branch.order_by(Delivery.id)
        inner = branch.limit(limit).subquery()
        branches.append(select(inner.c.id))
    return union_all(*branches)


@dataclass(frozen=True)
class Moment:
    at: datetime
    kind: str
    words: str
    detail: str


@dataclass(frozen=True)
class Timeline:
    row: DeliveryRow
    moments: list[Moment]


def _row_moments(row: DeliveryRow, claimed_at: datetime | None,
                 recorded: list[Moment]) -> list[Moment]:
    """The moves the row itself keeps instead of an event (broadside.campaigns.broadcasts.ledger): its
    latest claim, the mail server's acceptance of a `sent` row, and the skip of a row that a
    large cancel skipped in a chunk (broadside.campaigns.broadcasts.cancelling). Rows from before that
    change have them as events too: shown once."""
    moments = []
    kinds = {(m.kind, m.at) for m in recorded}
    if claimed_at is not None and ("claimed", claimed_at) not in kinds:
        moments.append(Moment(claimed_at, "claimed", *delivery_words("claimed", "")))
    if row.status == "sent" and not any(m.kind == "sent" for m in recorded):
        reply = " ".join(str(part) for part in (row.smtp_code, row.reason) if part)
        at = row.sent_at or row.updated_at or claimed_at
        if at is not None:
            moments.append(Moment(at, "sent", *delivery_words("sent", reply)))
    if row.status == "skipped" and row.updated_at is not None \
            and not any(m.kind == "skipped" for m in recorded):
        # A large cancel's rows are skipped in chunks by the worker, the row its own evidence.
        moments.append(Moment(row.updated_at, "skipped", *delivery_words("skipped", row.reason or "")))
    return moments


def delivery_timeline(session: Session, broadcast_id: int, delivery_id: int) -> Timeline:
    """Everything that happened to one recipient of this broadcast, oldest first."""
    broadcast = service.get_broadcast(session, broadcast_id)
    found = session.execute(
        select(*_columns())
        .outerjoin(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.id == delivery_id, Delivery.broadcast_id == broadcast_id)
    ).first()
    if found is None:
        raise NotFound(_("This broadcast has no such delivery."))
    row = DeliveryRow(*found)
    moments = []
    for at, kind, detail in session.execute(
        select(Event.created_at, Event.kind, Event.detail)
        .where(Event.delivery_id == delivery_id).order_by(Event.id).limit(200)
    ):
        words, extra = delivery_words(kind, detail or "")
        moments.append(Moment(at, kind, words, extra))
    copy_list, claimed_at = session.execute(
        select(Delivery.list_id, Delivery.claimed_at).where(Delivery.id == delivery_id)).one()
    moments.extend(_row_moments(row, claimed_at, moments))
    if row.subscriber_id is not None and broadcast.queued_at is not None:
        # What the person did meanwhile: "unsubscribed at 10:42" explains "skipped". About the
        # list of their copy (for a segment, the list whose link they got).
        list_id = copy_list if copy_list is not None else broadcast.list_id
        for at, kind, detail in session.execute(
            select(Event.created_at, Event.kind, Event.detail)
            .where(
                Event.subscriber_id == row.subscriber_id,
                Event.delivery_id.is_(None),
                Event.kind.in_(PERSON_KINDS),
                Event.created_at >= broadcast.queued_at,
                or_(Event.list_id.is_(None), Event.list_id == list_id),
            )
            .order_by(Event.id).limit(50)
        ):
            words, extra = person_words(kind, detail or "")
            moments.append(Moment(at, kind, words, extra))
    moments.sort(key=lambda m: m.at)
    return Timeline(row, moments)


def offers_transient_retry(session: Session, p: Progress) -> bool:
    """Whether the page offers "send again those that failed for a temporary reason": once
    the send is over (or paused), and only when one such row exists, the first found by the
    (broadcast, status) index, never a count. While the worker still sends, the offer waits
    (the progress fragment asks every 1.5 s; this is not read on each of those)."""
    if not p.failed or p.status not in ("sent", "paused"):
        return False
    return session.scalar(
        select(Delivery.id).where(Delivery.broadcast_id == p.id, _retry_condition("transient"))
        .limit(1)) is not None


def _retry_condition(which: str):
    if which == "unknown":
        return Delivery.status == "unknown"
    if which == "transient":
        return and_(Delivery.status == "failed", Delivery.error_class == "transient")
    raise NotFound(_("There is nothing like that to send again."))


@dataclass(frozen=True)
class RetryPlan:
    which: str
    count: int
    sample: list[DeliveryRow]


def retry_plan(session: Session, broadcast_id: int, which: str, sample: int = 20) -> RetryPlan:
    """The rows a confirmed "send again" would queue, counted, with the first few shown."""
    service.get_broadcast(session, broadcast_id)
    condition = _retry_condition(which)
    count = session.scalar(
        select(func.count()).select_from(Delivery).where(Delivery.broadcast_id == broadcast_id, condition)
    ) or 0
    rows = [DeliveryRow(*r) for r in session.execute(
        select(*_columns())
        .outerjoin(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.broadcast_id == broadcast_id, condition)
        .order_by(Delivery.id).limit(sample)
    )]
    return RetryPlan(which, int(count), rows)
