"""The delivery figures of a broadcast still sending, for `GET /metrics`, without reading its
rows: a million-row GROUP BY at every scrape would cost a second each time.

- outcomes and in-flight figures: the broadcast's counters (the ledger keeps them exact);
- skipped, failed and unknown rows (few): one GROUP BY on the (broadcast_id, status) index;
- reply codes and attempts of sent rows: added up from the sent rows past the last one counted
  (a range of the (broadcast_id, status, id) index; the row itself is the evidence of a send,
  no event is written for it), kept in Redis with that row's id. A delivery is sent once
  (invariant: never sent twice) and stays sent, so each is counted once; losing the Redis key
  only means counting them all again once;
- pending rows waiting to retry (pending with an error class): recounted at most once every
  RETRYING_SECONDS (it reads the pending rows).

Once the broadcast settles, the collector's exact recount of its rows replaces all this.
"""

from __future__ import annotations

import json
import time

from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import case, func, literal, select
from sqlalchemy.orm import Session

from broadside.models import Delivery

RETRYING_SECONDS = 60
KEEP_SECONDS = 7 * 86400


def active_groups(session: Session, redis: Redis, key: str, broadcast_id: int, pending: int,
                  sending: int, sent_count: int) -> list[tuple]:
    """A sending broadcast's groups, as `BroadsideCollector._delivery_groups` gives them,
    without reading its rows (see the module's docstring); `key` holds its running state."""
    skipped_reason = case((Delivery.status == "skipped", Delivery.reason), else_=None)
    groups: list[tuple] = [tuple(row) for row in session.execute(
        select(Delivery.status, Delivery.error_class, skipped_reason, Delivery.smtp_code,
               literal(None), func.count())
        .where(Delivery.broadcast_id == broadcast_id,
               Delivery.status.in_(("skipped", "failed", "unknown")))
        .group_by(Delivery.status, Delivery.error_class, skipped_reason, Delivery.smtp_code))]
    try:
        raw = redis.get(key)
    except RedisError:
        raw = None
    state = json.loads(raw) if raw else {"after": 0, "sent": [], "retrying": None, "at": 0}
    after = state.get("after", 0)
    sent: dict[tuple, int] = {(code, tries): n for code, tries, n in state["sent"]}
    # Sent rows past the last one counted, read as a range of the (broadcast_id, status, id)
    # index: a slice claims pending rows in id order, so nearly every newly sent row lies past
    # it. (A retried row sent after the range moved on is counted below as "missing".)
    for code, tries, count, last in session.execute(
        select(Delivery.smtp_code, Delivery.attempts, func.count(), func.max(Delivery.id))
        .where(Delivery.broadcast_id == broadcast_id, Delivery.status == "sent",
               Delivery.id > after)
        .group_by(Delivery.smtp_code, Delivery.attempts)):
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
