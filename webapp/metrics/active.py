"""The delivery figures of a broadcast still sending, for `GET /metrics`, without reading its
rows: a million-row GROUP BY at every scrape would cost a second each time.

- outcomes and in-flight figures: the broadcast's counters (the ledger keeps them exact);
- skipped, failed and unknown rows, by reason, class and code: added up the same way, from the
  rows of those statuses past the last one counted (each is settled at the person's turn, in
  id order). A GROUP BY of them all at each scrape read every such row (5% of a 1,000,000-row
  broadcast: 360 ms on SQLite, 1.3 s on PostgreSQL). A row that reached one of them after the
  range moved on (a retry that failed late) is counted without its reason until the broadcast
  settles; when the owner sends rows again, the broadcast's counter of their status goes
  down, and they are all counted again once;
- reply codes and attempts of sent rows: added up from the sent rows past the last one counted
  (a range of the (broadcast_id, status, id) index; the row itself is the evidence of a send,
  no event is written for it), kept in Redis with that row's id. A delivery is sent once
  (invariant: never sent twice) and stays sent, so each is counted once; losing the Redis key
  only means counting them all again once;
- each status's new rows are read in id order, at most CHUNK of them per scrape (the rest at
  the next): given only `id > last`, PostgreSQL's planner cannot know the range is nearly
  empty (the ids past it are the broadcast's pending rows and other broadcasts') and read the
  whole table in parallel (170 ms at a million); ordered and limited, and planned for the
  values at hand (a generic plan walks the primary key instead), it walks the index;
- pending rows waiting to retry (pending with an error class): recounted at most once every
  RETRYING_SECONDS (it reads the pending rows).

Once the broadcast settles, the collector's exact recount of its rows replaces all this.
"""

from __future__ import annotations

import json
import time
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import Select, func, select, text
from sqlalchemy.orm import Session

from broadside.models import Delivery

RETRYING_SECONDS = 60
KEEP_SECONDS = 7 * 86400


SETTLED_ELSEWISE = ("skipped", "failed", "unknown")
CHUNK = 100_000  # new rows of one status one scrape reads at most (see the module's docstring)


def _new_rows(broadcast_id: int, status: str, after: int, *columns: Any) -> Select:
    """`columns`, a count and the last id, grouped by `columns`, over the broadcast's rows
    of `status` past `after`: the first CHUNK of them in id order (an index range)."""
    rows = (select(Delivery.id, *columns)
            .where(Delivery.broadcast_id == broadcast_id, Delivery.status == status,
                   Delivery.id > after)
            .order_by(Delivery.id).limit(CHUNK).subquery())
    grouped = [rows.c[column.key] for column in columns]
    return select(*grouped, func.count(), func.max(rows.c.id)).group_by(*grouped)


def active_groups(session: Session, redis: Redis, key: str, broadcast_id: int, pending: int,
                  sending: int, sent_count: int, counters: dict[str, int]) -> list[tuple]:
    """A sending broadcast's groups, as `BroadsideCollector._delivery_groups` gives them,
    without reading its rows (see the module's docstring); `key` holds its running state and
    `counters` are the broadcast's skipped, failed and unknown counters."""
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
    if state.get("version") != 3:
        state = {"version": 3, "after": 0, "sent": [], "retrying": None, "at": 0,
                 "others_after": {}, "others": [], "counters": {}}
    groups = _others(session, state, broadcast_id, counters)
    after = state["after"]
    sent: dict[tuple, int] = {(code, tries): n for code, tries, n in state["sent"]}
    # Sent rows past the last one counted, read as a range of the (broadcast_id, status, id)
    # index: a slice claims pending rows in id order, so nearly every newly sent row lies past
    # it. (A retried row sent after the range moved on is counted below as "missing".)
    for code, tries, count, last in session.execute(
            _new_rows(broadcast_id, "sent", after, Delivery.smtp_code, Delivery.attempts)):
        sent[(code, tries)] = sent.get((code, tries), 0) + count
        after = max(after, last)
    now = time.time()
    retrying = state["retrying"]
    if retrying is None or now - state["at"] >= RETRYING_SECONDS:
        retrying = session.scalar(
            select(func.count()).select_from(Delivery).where(
                Delivery.broadcast_id == broadcast_id, Delivery.status == "pending",
                Delivery.error_class.is_not(None))) or 0
        state["at"] = now
    retrying = min(retrying, pending)
    state.update(after=after, retrying=retrying,
                 sent=[[code, tries, n] for (code, tries), n in sent.items()])
    try:
        redis.set(key, json.dumps(state), ex=KEEP_SECONDS)
    except RedisError:
        pass
    groups += [("sent", None, None, code, tries, n) for (code, tries), n in sent.items()]
    # Sent rows the range passed by while they were still pending (a retry sent late): counted
    # with no code and no attempts until the settled recount reads the rows themselves.
    missing = sent_count - sum(sent.values())
    if missing > 0:
        groups.append(("sent", None, None, None, None, missing))
    groups += [("pending", None, None, None, None, pending - retrying),
               ("pending", "transient", None, None, None, retrying),
               ("sending", None, None, None, None, sending)]
    return groups


def _others(session: Session, state: dict, broadcast_id: int, counters: dict[str, int]) -> list[tuple]:
    """The skipped, failed and unknown groups, updated in `state` from the rows past the last
    one counted. A counter below the one last seen means the owner sent rows again (they are
    pending now, no longer what they were): everything of these statuses is counted afresh."""
    seen = state["counters"]
    if any(counters[status] < seen.get(status, 0) for status in SETTLED_ELSEWISE):
        state.update(others_after={}, others=[])
    state["counters"] = dict(counters)
    counted: dict[tuple, int] = {tuple(group[:-1]): group[-1] for group in state["others"]}
    afters: dict[str, int] = state["others_after"]
    for status in SETTLED_ELSEWISE:
        # Each status in its own range of the index, so each has its own last row counted.
        reason = (Delivery.reason,) if status == "skipped" else ()
        for error_class, *why, code, count, last in session.execute(_new_rows(
                broadcast_id, status, afters.get(status, 0), Delivery.error_class, *reason,
                Delivery.smtp_code)):
            group = (status, error_class, why[0] if why else None, code)
            counted[group] = counted.get(group, 0) + count
            afters[status] = max(afters.get(status, 0), last)
    state.update(others_after=afters, others=[[*group, n] for group, n in counted.items()])
    groups = [(*group[:4], None, n) for group, n in counted.items()]
    for status in SETTLED_ELSEWISE:
        # Rows that reached this status behind the range (a retry that failed late): counted
        # without their reason, class or code until the broadcast settles.
        behind = counters[status] - sum(n for group, n in counted.items() if group[0] == status)
        if behind > 0:
            groups.append((status, None, None, None, None, behind))
    return groups
