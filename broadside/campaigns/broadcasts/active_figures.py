"""The delivery figures of a broadcast still sending, for `GET /metrics`, without reading its
rows: a million-row GROUP BY at every scrape would cost a second each time.

- outcomes and in-flight figures: the broadcast's counters (the ledger keeps them exact);
- sent, skipped, failed and unknown rows by class, skip reason, reply code and attempts (the
  groups of `figures.delivery_groups`): added up from each status's rows past the last one counted, kept in
  Redis with that row's id. Each row gets its status at the person's turn, in id order; a
  delivery is sent once (invariant: never sent twice) and stays sent, so each is counted
  once, and losing the Redis key only means counting them all again once. A GROUP BY of them
  all at each scrape read every row (skipped, failed and unknown alone, 5% of a
  1,000,000-row broadcast: 360 ms on SQLite, 1.3 s on PostgreSQL). A row that got its status
  behind the range (a retry that failed or was sent late) is counted without its class,
  reason, code and attempts until the broadcast settles; when the owner sends rows again, a
  counter goes down, and every status is counted afresh once;
- each status's new rows are read in id order, at most CHUNK of them per scrape (the rest at
  the next): given only `id > last`, PostgreSQL's planner cannot know the range is nearly
  empty (the ids past it are the broadcast's pending rows and other broadcasts') and read the
  whole table in parallel (170 ms at a million); ordered and limited, and planned for the
  values at hand (a generic plan walks the primary key instead), it walks the index;
- pending rows waiting to retry (pending with an error class): recounted at most once every
  RETRYING_SECONDS (it reads the pending rows).

Once the broadcast settles, `figures.delivery_groups`' exact recount of its rows replaces all this.
"""

from __future__ import annotations

import json
import time

from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import Select, func, literal, select, text
from sqlalchemy.orm import Session

from broadside.core.models import Delivery

RETRYING_SECONDS = 60
KEEP_SECONDS = 7 * 86400


OUTCOMES = ("sent", "skipped", "failed", "unknown")
CHUNK = 100_000  # new rows of one status one scrape reads at most (see the module's docstring)


def _new_rows(broadcast_id: int, status: str, after: int) -> Select:
    """The group columns (class, skip reason, code, attempts if sent), a count
    and the last id, over the broadcast's rows of `status` past `after`: the first CHUNK of
    them in id order (an index range)."""
    rows = (select(Delivery.id, Delivery.error_class, Delivery.reason, Delivery.smtp_code,
                   Delivery.attempts)
            .where(Delivery.broadcast_id == broadcast_id, Delivery.status == status,
                   Delivery.id > after)
            .order_by(Delivery.id).limit(CHUNK).subquery())
    grouped = [rows.c.error_class, rows.c.reason if status == "skipped" else literal(None),
               rows.c.smtp_code, rows.c.attempts if status == "sent" else literal(None)]
    return select(*grouped, func.count(), func.max(rows.c.id)).group_by(*grouped)


def active_groups(session: Session, redis: Redis, key: str, broadcast_id: int, pending: int,
                  sending: int, counters: dict[str, int]) -> list[tuple]:
    """A sending broadcast's groups, as `figures.delivery_groups` gives them,
    without reading all its rows (see the module's docstring); `key` holds its running state
    and `counters` are the broadcast's counters of each of OUTCOMES."""
    if session.get_bind().dialect.name == "postgresql":
        # Plans for the values at hand: psycopg prepares a statement run five times on a
        # connection, and PostgreSQL's generic plan for these reads (the status and the last
        # id unknown) walks the primary key, reading every row past the last id to find none:
        # 450-530 ms a read at a million. For this scrape's transaction only.
        session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
    try:
        raw = redis.get(key)
    except RedisError:
        raw = None
    state = json.loads(raw) if raw else {}
    seen = state.get("counters", {})
    if state.get("version") != 4 or any(counters[s] < seen.get(s, 0) for s in OUTCOMES):
        # New, from an older version, or rows sent again (a counter went down: they are
        # pending now, no longer what they were): everything counted afresh.
        state = {"version": 4, "after": {}, "groups": [], "retrying": None, "at": 0}
    state["counters"] = dict(counters)
    counted: dict[tuple, int] = {tuple(group[:-1]): group[-1] for group in state["groups"]}
    after: dict[str, int] = state["after"]
    for status in OUTCOMES:
        # Each status in its own range of the index, so each has its own last row counted.
        for *columns, count, last in session.execute(
                _new_rows(broadcast_id, status, after.get(status, 0))):
            group = (status, *columns)
            counted[group] = counted.get(group, 0) + count
            after[status] = max(after.get(status, 0), last)
    now = time.time()
    retrying = state["retrying"]
    if retrying is None or now - state["at"] >= RETRYING_SECONDS:
        retrying = session.scalar(
            select(func.count()).select_from(Delivery).where(
                Delivery.broadcast_id == broadcast_id, Delivery.status == "pending",
                Delivery.error_class.is_not(None))) or 0
        state["at"] = now
    retrying = min(retrying, pending)
    state.update(after=after, retrying=retrying, groups=[[*g, n] for g, n in counted.items()])
    try:
        redis.set(key, json.dumps(state), ex=KEEP_SECONDS)
    except RedisError:
        pass
    groups = [(*group, n) for group, n in counted.items()]
    for status in OUTCOMES:
        # Rows that got this status behind the range (a retry that failed or was sent late):
        # counted without their class, reason, code or attempts until the broadcast settles.
        behind = counters[status] - sum(n for group, n in counted.items() if group[0] == status)
        if behind > 0:
            groups.append((status, None, None, None, None, behind))
    return groups + [("pending", None, None, None, None, pending - retrying),
                     ("pending", "transient", None, None, None, retrying),
                     ("sending", None, None, None, None, sending)]
