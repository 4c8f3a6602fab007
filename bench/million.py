"""Fast generated data for the million-scale benchmarks (issue 19), with a fixed seed.

Set-based SQL only (a recursive CTE on SQLite, generate_series on PostgreSQL): no row passes
through Python, so 1,000,000 subscribers take seconds, not minutes. Reusable by any bench:

- `population(app, n, seed)`: n subscribers with names and three attributes (city, plan,
  age), created over the last ~400 days, 1% suppressed; all on one list ("Everyone": 90%
  active, 5% unconfirmed, 5% unsubscribed), a third on "Weekly", a twentieth on "Offers".
- `half_sent_broadcast(app, list_id, n)`: a broadcast "sending" to the first n active people
  of the list, half of its deliveries sent (a first claim and a sent message are kept by the
  row itself: the ledger writes no event for them), the rest pending, its counters as the
  ledger keeps them.
- `history(app, rows)`: `rows` deliveries in settled ("sent") broadcasts of at most one row
  per person each, with the events the ledger writes: a `claimed` event for each re-claim
  (attempts 2), and an event for every outcome but `sent` (which the row keeps): 95% sent, 3%
  skipped, 1% failed, 1% unknown, and a bounce event per thousand.

Every function returns what it made and works on SQLite and PostgreSQL alike.

`shared(bench, backend, quick)` builds the million of a run once per database and hands it to
every bench that reads it (the pages, the cancel, the snapshot's press): 1,150,000 people
(quick: 115,000), so that over 1,000,000 (100,000) on "Everyone" can receive (1,023,500 at
1M), a broadcast to exactly 1,000,000 (100,000) of them half sent, and settled history. Each
bench puts the broadcast in the state it needs (`Million.half_sent`, or its own `all_pending`)
rather than counting on the order they run in.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FIRST = ["Ann", "Bob", "Carla", "Dev", "Eve", "Finn", "Gus", "Hana", "Ivo", "Jo", "Kai", "Lena"]
LAST = ["Archer", "Baker", "Cole", "Dunn", "Evans", "Fox", "Grant", "Hill", "Irwin", "Jones"]
DOMAINS = ["gmail.com", "example.org", "mail.example", "posteo.de", "fastmail.com", "web.de"]
CITIES = ["Paris", "Lyon", "Oslo", "Rome", "Kiel", "Graz", "Porto", "Bern"]
PLANS = ["free", "pro", "team"]
OWNER = ("owner@example.com", "bench password 123")


def pick(words: list[str], number_sql: str) -> str:
    """One of the words, chosen by an SQL number (a CASE: no join, the same SQL on both)."""
    whens = " ".join(f"WHEN {i} THEN '{w}'" for i, w in enumerate(words))
    return f"(CASE ({number_sql}) % {len(words)} {whens} END)"


def series(backend: str, n: int) -> str:
    """A relation `s(x)` of 1..n."""
    if backend == "sqlite":
        return (f"(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {n}) "
                "SELECT x FROM c) AS s")
    return f"generate_series(1, {n}) AS s(x)"


def _ago(backend: str, seconds_sql: str) -> str:
    """A naive UTC moment `seconds_sql` seconds before now."""
    if backend == "sqlite":
        return f"datetime('now', '-' || ({seconds_sql}) || ' seconds')"
    return f"(timezone('utc', now()) - make_interval(secs => ({seconds_sql})))"


def _execute(app, statements: list[str]) -> None:
    from sqlalchemy import text

    from webapp.extensions import db

    with app.app_context():
        for statement in statements:
            db.session.execute(text(statement))
        db.session.commit()
        db.session.remove()


def analyse(app) -> None:
    """Fresh planner statistics, as a settled database would have (VACUUM ANALYZE on
    PostgreSQL so index-only scans see an up-to-date visibility map)."""
    from webapp.extensions import db

    with app.app_context():
        if db.engine.dialect.name == "postgresql":
            with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("VACUUM (ANALYZE)")
        else:
            with db.engine.connect() as conn:
                conn.exec_driver_sql("ANALYZE")
                conn.commit()
        db.session.remove()


def owner(app) -> None:
    from broadside.core.accounts import create_owner
    from webapp.extensions import db

    with app.app_context():
        create_owner(db.session, *OWNER)
        db.session.remove()


def population(app, n: int, seed: int = 19) -> dict[str, int]:
    """n subscribers and their subscriptions (see the module's docstring). Returns
    {list name: list id}."""
    from broadside.core.models import MailingList
    from webapp.extensions import db

    with app.app_context():
        backend = db.engine.dialect.name
        ids = {}
        for name in ("Everyone", "Weekly", "Offers"):
            mailing_list = MailingList(name=name)
            db.session.add(mailing_list)
            db.session.flush()
            ids[name] = mailing_list.id
        db.session.commit()
        db.session.remove()
    k = seed % 97
    city = pick(CITIES, f"s.x * 11 + {k}")
    plan = pick(PLANS, f"s.x * 13 + {k}")
    json = "json_object" if backend == "sqlite" else "json_build_object"
    attributes = f"{json}('city', {city}, 'plan', {plan}, 'age', 18 + (s.x * 7 + {k}) % 60)"
    first, last = pick(FIRST, f"s.x * 5 + {k}"), pick(LAST, f"(s.x * 3 + {k}) / 7")
    # Spread over ~405 days, oldest first (small integers: no overflow of PostgreSQL's int4).
    created = _ago(backend, f"({n} - s.x) * {max(35_000_000 // n, 1)} + s.x % 60")
    insert_people = f"""
        INSERT INTO subscribers (email, name, attributes, created_at, suppression,
                                 suppressed_at, soft_bounce_count)
        SELECT lower({first}) || '.' || lower({last}) || s.x || '@' || {pick(DOMAINS, f"s.x + {k}")},
               {first} || ' ' || {last}, {attributes}, {created},
               CASE WHEN s.x % 100 = 0 THEN 'bounced' END,
               CASE WHEN s.x % 100 = 0 THEN {created} END, 0
        FROM {series(backend, n)}
        ORDER BY s.x
    """
    roll = f"(((subscribers.id % 100) * 7919 + {k}) % 100)"  # the same, without int4 overflow
    joined = "subscribers.created_at"
    statements = [
        insert_people,
        # Everyone: 90% active, 5% unconfirmed, 5% unsubscribed (left a day after joining).
        f"""INSERT INTO subscriptions (subscriber_id, list_id, status, created_at, confirmed_at,
                                       unsubscribed_at, unsubscribe_source)
            SELECT id, {ids['Everyone']},
                   CASE WHEN {roll} < 90 THEN 'active' WHEN {roll} < 95 THEN 'unconfirmed'
                        ELSE 'unsubscribed' END,
                   {joined}, CASE WHEN {roll} < 90 OR {roll} >= 95 THEN {joined} END,
                   CASE WHEN {roll} >= 95 THEN {joined} END,
                   CASE WHEN {roll} >= 95 THEN 'link' END
            FROM subscribers ORDER BY id""",
        f"""INSERT INTO subscriptions (subscriber_id, list_id, status, created_at, confirmed_at)
            SELECT id, {ids['Weekly']}, 'active', {joined}, {joined}
            FROM subscribers WHERE id % 3 = 0 ORDER BY id""",
        f"""INSERT INTO subscriptions (subscriber_id, list_id, status, created_at, confirmed_at)
            SELECT id, {ids['Offers']}, 'active', {joined}, {joined}
            FROM subscribers WHERE id % 20 = 0 ORDER BY id""",
    ]
    _execute(app, statements)
    return ids


def _now(backend: str) -> str:
    return "datetime('now')" if backend == "sqlite" else "timezone('utc', now())"


def half_sent_broadcast(app, list_id: int, n: int) -> int:
    """A broadcast mid-send to the first n active, unsuppressed people of `list_id`: content
    frozen by the real send path (on an empty list, so the snapshot costs nothing), then n
    deliveries written set-based: the first half `sent` (attempts 1, 250, with a `claimed`
    and a `sent` event each, as ledger.transition writes them), the rest `pending`."""
    from sqlalchemy import update

    from broadside.campaigns.broadcasts.drafts import create_draft
    from broadside.campaigns.broadcasts.service import send_broadcast
    from broadside.core.models import Broadcast, MailingList
    from webapp.extensions import db

    with app.app_context():
        backend = db.engine.dialect.name
        empty = MailingList(name=f"Empty for a snapshot {n}")
        db.session.add(empty)
        db.session.commit()
        draft = create_draft(db.session, list_id=empty.id, subject="Half sent {{ name }}",
                             body="Hello {{ name }}, this is the news.")
        broadcast = send_broadcast(db.session, draft.id, default_from="Bench <news@bench.example>",
                                   jobs=None)
        broadcast_id = broadcast.id
        db.session.remove()
    half = n // 2
    now = _now(backend)
    statements = [
        f"""INSERT INTO deliveries (broadcast_id, subscriber_id, list_id, status, attempts, smtp_code,
                                    reason, claimed_at, sent_at, updated_at)
            SELECT {broadcast_id}, q.subscriber_id, {list_id},
                   CASE WHEN q.r <= {half} THEN 'sent' ELSE 'pending' END,
                   CASE WHEN q.r <= {half} THEN 1 ELSE 0 END,
                   CASE WHEN q.r <= {half} THEN 250 END,
                   CASE WHEN q.r <= {half} THEN '2.0.0 Ok: queued' END,
                   CASE WHEN q.r <= {half} THEN {now} END,
                   CASE WHEN q.r <= {half} THEN {now} END,
                   {now}
            FROM (SELECT s.subscriber_id, row_number() OVER (ORDER BY s.subscriber_id) AS r
                  FROM subscriptions s JOIN subscribers p ON p.id = s.subscriber_id
                  WHERE s.list_id = {list_id} AND s.status = 'active' AND p.suppression IS NULL
                  ORDER BY s.subscriber_id LIMIT {n}) AS q
            ORDER BY q.r""",
    ]
    _execute(app, statements)
    with app.app_context():
        from sqlalchemy import func, select

        from broadside.core.models import Delivery

        counts = dict(db.session.execute(
            select(Delivery.status, func.count()).where(Delivery.broadcast_id == broadcast_id)
            .group_by(Delivery.status)).all())
        db.session.execute(update(Broadcast).where(Broadcast.id == broadcast_id).values(
            status="sending", list_id=list_id, total=sum(counts.values()),
            pending_count=counts.get("pending", 0), sent_count=counts.get("sent", 0),
            started_at=db.func.coalesce(Broadcast.queued_at, Broadcast.created_at)))
        db.session.commit()
        db.session.remove()
    return broadcast_id


# status, error_class, reason, smtp_code from the row number (x % 100), as metrics_scrape.py
_OUTCOME = {
    "status": "CASE WHEN x % 100 < 95 THEN 'sent' WHEN x % 100 < 98 THEN 'skipped' "
              "WHEN x % 100 < 99 THEN 'failed' ELSE 'unknown' END",
    "error_class": "CASE WHEN x % 100 = 98 THEN 'recipient' WHEN x % 100 = 99 THEN 'ambiguous' END",
    "reason": "CASE WHEN x % 100 BETWEEN 95 AND 97 THEN 'unsubscribed' "
              "WHEN x % 100 = 98 THEN '5.1.1 No such user' END",
    "smtp_code": "CASE WHEN x % 100 < 95 THEN 250 WHEN x % 100 = 98 THEN 550 END",
    "attempts": "CASE WHEN x % 100 < 95 AND x % 7 = 0 THEN 2 WHEN x % 100 BETWEEN 95 AND 97 "
                "THEN 0 ELSE 1 END",
}


def history(app, rows: int, per_broadcast: int | None = None) -> list[int]:
    """`rows` deliveries in settled broadcasts (see the module's docstring), spread over
    the subscribers (one row per person per broadcast, as the unique key demands), each
    broadcast sent some days ago. Returns the broadcast ids."""
    from sqlalchemy import func, select

    from broadside.core.models import Broadcast, Subscriber
    from webapp.extensions import db

    with app.app_context():
        backend = db.engine.dialect.name
        low, high = db.session.execute(select(func.min(Subscriber.id), func.max(Subscriber.id))).one()
        people = (high - low + 1) if low is not None else 0
        size = min(per_broadcast or people, people) if people else per_broadcast or 1_000_000
        ids = []
        left, number = rows, 0
        while left > 0:
            count = min(size, left)
            number += 1
            broadcast = Broadcast(status="sent", subject=f"History {number}", body="Old news.",
                                  total=count, sent_count=0)
            db.session.add(broadcast)
            db.session.flush()
            ids.append((broadcast.id, count))
            left -= count
        db.session.commit()
        db.session.remove()
    statements = []
    for position, (broadcast_id, count) in enumerate(ids):
        subscriber = f"{low} + (x - 1) % {people}" if people else "NULL"
        when = _ago(backend, f"{(len(ids) - position) * 86400 * 3} + x % 3600")
        columns = ", ".join(f"{sql} AS {name}" for name, sql in _OUTCOME.items())
        statements.append(f"""
            INSERT INTO deliveries (broadcast_id, subscriber_id, status, error_class, reason,
                                    smtp_code, attempts, claimed_at, sent_at, updated_at)
            SELECT {broadcast_id}, sub, status, error_class, reason, smtp_code, attempts,
                   CASE WHEN attempts > 0 THEN at END, CASE WHEN status = 'sent' THEN at END, at
            FROM (SELECT {subscriber} AS sub, {columns}, {when} AS at
                  FROM {series(backend, count)}) AS g
            ORDER BY sub""")
    statements.append(f"""
        INSERT INTO events (kind, broadcast_id, delivery_id, subscriber_id, detail, created_at)
        SELECT kind, broadcast_id, id, subscriber_id, detail, claimed_at
        FROM deliveries, (SELECT 'retry' AS kind, '451 4.3.0 try later' AS detail
                          UNION ALL SELECT 'claimed', '') AS k
        WHERE broadcast_id IN ({','.join(str(b) for b, _ in ids)}) AND attempts > 1 ORDER BY id""")
    statements.append(f"""
        INSERT INTO events (kind, broadcast_id, delivery_id, subscriber_id, detail, created_at)
        SELECT status, broadcast_id, id, subscriber_id, COALESCE(reason, ''), updated_at
        FROM deliveries WHERE broadcast_id IN ({','.join(str(b) for b, _ in ids)})
          AND status <> 'sent' ORDER BY id""")
    statements.append(f"""
        INSERT INTO events (kind, subscriber_id, detail, created_at)
        SELECT 'bounce', subscriber_id, 'hard bounce: 5.1.1 gone', updated_at FROM deliveries
        WHERE broadcast_id IN ({','.join(str(b) for b, _ in ids)}) AND id % 1000 = 0""")
    for broadcast_id, _ in ids:
        counted = {status: f"(SELECT count(*) FROM deliveries WHERE broadcast_id = {broadcast_id} "
                           f"AND status = '{status}')" for status in ("sent", "skipped", "failed", "unknown")}
        statements.append(
            "UPDATE broadcasts SET "
            + ", ".join(f"{status}_count = {sql}" for status, sql in counted.items())
            + f", finished_at = {_now(backend)} WHERE id = {broadcast_id}")
    _execute(app, statements)
    return [b for b, _ in ids]


def set_half_sent(app, broadcast_id: int) -> None:
    """Put a broadcast `half_sent_broadcast` made back in that state whatever was done to it
    since (a cancel's skip, rows put back to pending): its first half of rows by id `sent`
    (attempts 1, 250), the rest `pending`, no event of a row, its counters to match."""
    from sqlalchemy import func, select, text, update

    from broadside.core.models import Broadcast, Delivery, Event
    from webapp.extensions import db

    with app.app_context():
        backend = db.engine.dialect.name
        session = db.session
        low, total = session.execute(
            select(func.min(Delivery.id), func.count())
            .where(Delivery.broadcast_id == broadcast_id)).one()
        # The ids are consecutive (one INSERT ... SELECT wrote them), so the first half by id
        # is the `total // 2` lowest.
        middle = low + total // 2 - 1
        now = _now(backend)
        session.execute(Event.__table__.delete().where(Event.broadcast_id == broadcast_id,
                                                       Event.delivery_id.is_not(None)))
        session.execute(text(f"""
            UPDATE deliveries SET
              status = CASE WHEN id <= {middle} THEN 'sent' ELSE 'pending' END,
              attempts = CASE WHEN id <= {middle} THEN 1 ELSE 0 END,
              smtp_code = CASE WHEN id <= {middle} THEN 250 END,
              reason = CASE WHEN id <= {middle} THEN '2.0.0 Ok: queued' END,
              error_class = NULL, next_attempt_at = NULL, provider_message_id = NULL,
              claimed_at = CASE WHEN id <= {middle} THEN {now} END,
              sent_at = CASE WHEN id <= {middle} THEN {now} END,
              updated_at = {now}
            WHERE broadcast_id = {broadcast_id}"""))
        session.execute(update(Broadcast).where(Broadcast.id == broadcast_id).values(
            status="sending", pause_reason=None, finished_at=None, total=total,
            pending_count=total - total // 2, sending_count=0, sent_count=total // 2,
            skipped_count=0, failed_count=0, unknown_count=0))
        session.commit()
        session.remove()


@dataclass
class Million:
    """One database of a run's million (see `shared`)."""

    backend: str
    url: str
    app: Any
    lists: dict[str, int]
    broadcast_id: int  # to exactly `recipients` people of "Everyone", made half sent
    subscribers: int
    recipients: int
    history_rows: int
    steps: dict[str, float] = field(default_factory=dict)  # seconds each part of the build took
    state: str = "half sent"  # what the last bench left the broadcast in

    def half_sent(self) -> None:
        """The broadcast half sent again (after a cancel, say), then fresh statistics."""
        if self.state != "half sent":
            set_half_sent(self.app, self.broadcast_id)
            analyse(self.app)
            self.state = "half sent"


def settle(app) -> None:
    """Write out what the benches before left for the disk: a CHECKPOINT on PostgreSQL, the
    write-ahead log folded back into the file on SQLite. A bench that times a press right
    after another bench rewrote a million rows (the cancel's four passes) otherwise times the
    server flushing that work (seen: the first message 16.6 s after the press on SQLite, 1.2
    s in the run before, which had the same code), which no owner's settled database does."""
    from webapp.extensions import db

    with app.app_context():
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            if db.engine.dialect.name == "postgresql":
                connection.exec_driver_sql("CHECKPOINT")
            else:
                connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        db.session.remove()


def settle_all(bench) -> None:
    """`settle` every database of the run's shared millions (the disk is one for all)."""
    for built in bench.shared.values():
        if isinstance(built, Million):
            settle(built.app)


def sizes(quick: bool) -> tuple[int, int, int]:
    """(subscribers, recipients, history rows) of a run's million. 1,150,000 people put over
    1,000,000 on "Everyone" who can receive (90% active, 1% suppressed: 1,023,500). The
    issue asks for 10,000,000 history rows under /metrics; building them with their
    20,000,000 events does not fit the run's budget (measured on a loaded machine: 34-126
    s per million on SQLite, 459 s per million on PostgreSQL), so the full run builds
    2,000,000 on both and says so. A warm scrape's cost does not grow with settled history
    (each settled broadcast is cached once), which is what the figure checks."""
    if quick:
        return 115_000, 100_000, 1_000_000
    return 1_150_000, 1_000_000, 2_000_000


def is_built(bench, backend: str, quick: bool) -> bool:
    return ("million", backend, quick) in bench.shared


def shared(bench, backend: str, quick: bool) -> Million:
    """The run's million on `backend`, built on first use (`bench.shared` keeps it until the
    run's end, when `Bench.close` drops the database with the rest)."""
    return build_shared(bench, (backend,), quick)[0]


def build_shared(bench, backends: tuple[str, ...], quick: bool) -> list[Million]:
    """`shared` for several databases, the ones not built yet filled at once, a thread each
    (the work is in SQLite's C code, which lets go of the GIL, and in PostgreSQL's server:
    the two cores each take one). The databases are created and migrated first, one after
    the other: Alembic's context is global to the process."""
    subscribers, recipients, history_rows = sizes(quick)
    made = {b: _database(bench, b) for b in backends if not is_built(bench, b, quick)}

    def fill(backend: str) -> Million:
        url, app = made[backend]
        steps: dict[str, float] = {}
        started = time.perf_counter()
        owner(app)
        lists = population(app, subscribers, seed=19)
        steps["subscribers"] = time.perf_counter() - started
        mark = time.perf_counter()
        broadcast_id = half_sent_broadcast(app, lists["Everyone"], recipients)
        steps["broadcast"] = time.perf_counter() - mark
        mark = time.perf_counter()
        history(app, history_rows)
        steps["history"] = time.perf_counter() - mark
        mark = time.perf_counter()
        analyse(app)
        steps["analyse"] = time.perf_counter() - mark
        return Million(backend, url, app, lists, broadcast_id, subscribers, recipients,
                       history_rows, steps)

    if made:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(made)) as pool:
            for built in pool.map(fill, made):
                bench.shared[("million", built.backend, quick)] = built
    return [bench.shared[("million", b, quick)] for b in backends]


def _database(bench, backend: str) -> tuple[str, Any]:
    url = bench.sqlite_url("million") if backend == "sqlite" else bench.postgres_url("million")
    return url, bench.app(url)
