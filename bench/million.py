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
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FIRST = ["Ann", "Bob", "Carla", "Dev", "Eve", "Finn", "Gus", "Hana", "Ivo", "Jo", "Kai", "Lena"]
LAST = ["Archer", "Baker", "Cole", "Dunn", "Evans", "Fox", "Grant", "Hill", "Irwin", "Jones"]
DOMAINS = ["gmail.com", "example.org", "mail.example", "posteo.de", "fastmail.com", "web.de"]
CITIES = ["Paris", "Lyon", "Oslo", "Rome", "Kiel", "Graz", "Porto", "Bern"]
PLANS = ["free", "pro", "team"]
OWNER = ("owner@example.com", "bench password 123")


def _pick(words: list[str], number_sql: str) -> str:
    """One of the words, chosen by an SQL number (a CASE: no join, the same SQL on both)."""
    whens = " ".join(f"WHEN {i} THEN '{w}'" for i, w in enumerate(words))
    return f"(CASE ({number_sql}) % {len(words)} {whens} END)"


def _series(backend: str, n: int) -> str:
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
    from broadside.accounts import create_owner
    from webapp.extensions import db

    with app.app_context():
        create_owner(db.session, *OWNER)
        db.session.remove()


def population(app, n: int, seed: int = 19) -> dict[str, int]:
    """n subscribers and their subscriptions (see the module's docstring). Returns
    {list name: list id}."""
    from broadside.models import MailingList
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
    city = _pick(CITIES, f"s.x * 11 + {k}")
    plan = _pick(PLANS, f"s.x * 13 + {k}")
    json = "json_object" if backend == "sqlite" else "json_build_object"
    attributes = f"{json}('city', {city}, 'plan', {plan}, 'age', 18 + (s.x * 7 + {k}) % 60)"
    first, last = _pick(FIRST, f"s.x * 5 + {k}"), _pick(LAST, f"(s.x * 3 + {k}) / 7")
    # Spread over ~405 days, oldest first (small integers: no overflow of PostgreSQL's int4).
    created = _ago(backend, f"({n} - s.x) * {max(35_000_000 // n, 1)} + s.x % 60")
    insert_people = f"""
        INSERT INTO subscribers (email, name, attributes, created_at, suppression,
                                 suppressed_at, soft_bounce_count)
        SELECT lower({first}) || '.' || lower({last}) || s.x || '@' || {_pick(DOMAINS, f"s.x + {k}")},
               {first} || ' ' || {last}, {attributes}, {created},
               CASE WHEN s.x % 100 = 0 THEN 'bounced' END,
               CASE WHEN s.x % 100 = 0 THEN {created} END, 0
        FROM {_series(backend, n)}
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

    from broadside.broadcasts.drafts import create_draft
    from broadside.broadcasts.service import send_broadcast
    from broadside.models import Broadcast, MailingList
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

        from broadside.models import Delivery

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

    from broadside.models import Broadcast, Subscriber
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
                  FROM {_series(backend, count)}) AS g
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
