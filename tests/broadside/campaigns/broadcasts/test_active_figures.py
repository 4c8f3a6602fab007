"""/metrics for a broadcast still sending: its skipped, failed and unknown rows are added up
from the rows past the last one counted (broadside/campaigns/broadcasts/active_figures.py), so a
scrape does not read every such row of a million-row broadcast, and the figures stay the ones a
full count gives."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import case, event, func, select, update

from broadside.campaigns.broadcasts.active_figures import OUTCOMES, active_groups
from broadside.core.models import Delivery
from tests.helpers import make_list, start_broadcast
from webapp.extensions import db

SETTLED_ELSEWISE = ("skipped", "failed", "unknown")


def settle(ids: list[int], status: str, *, reason: str | None = None, error_class: str | None = None,
           code: int | None = None) -> None:
    db.session.execute(update(Delivery).where(Delivery.id.in_(ids)).values(
        status=status, reason=reason, error_class=error_class, smtp_code=code))
    db.session.commit()


def full_count(broadcast_id: int) -> Counter:
    """What a GROUP BY of every row says (the settled broadcast's recount)."""
    reason = case((Delivery.status == "skipped", Delivery.reason), else_=None)
    return Counter({(status, error_class, why, code): n for status, error_class, why, code, n in
                    db.session.execute(
                        select(Delivery.status, Delivery.error_class, reason, Delivery.smtp_code,
                               func.count())
                        .where(Delivery.broadcast_id == broadcast_id,
                               Delivery.status.in_(SETTLED_ELSEWISE))
                        .group_by(Delivery.status, Delivery.error_class, reason, Delivery.smtp_code))})


def scrape(redis_client, namespace: str, broadcast_id: int) -> tuple[Counter, list[str]]:
    """The active groups of the skipped, failed and unknown statuses, and the statements run."""
    counters = dict(db.session.execute(
        select(Delivery.status, func.count()).where(Delivery.broadcast_id == broadcast_id)
        .group_by(Delivery.status)).all())
    statements: list[str] = []
    record = lambda conn, cursor, statement, *args: statements.append(statement)  # noqa: E731
    event.listen(db.engine, "before_cursor_execute", record)
    try:
        groups = active_groups(db.session, redis_client, f"{namespace}:metrics:active:{broadcast_id}",
                               broadcast_id, counters.get("pending", 0), 0,
                               {status: counters.get(status, 0) for status in OUTCOMES})
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    found: Counter = Counter()
    for status, error_class, reason, code, _, n in groups:
        if status in SETTLED_ELSEWISE and n:
            found[(status, error_class, reason, code)] += n
    return found, statements


def test_a_sending_broadcasts_skips_and_failures_are_counted_once_from_the_new_rows(
        app, redis_client, namespace):
    weekly = make_list(db.session, 12)
    broadcast = start_broadcast(app, weekly)
    ids = list(db.session.scalars(select(Delivery.id).where(Delivery.broadcast_id == broadcast.id)
                                  .order_by(Delivery.id)))
    settle(ids[:2], "skipped", reason="unsubscribed")
    settle(ids[3:4], "failed", error_class="recipient", code=550)
    found, _ = scrape(redis_client, namespace, broadcast.id)
    assert found == full_count(broadcast.id) == Counter({
        ("skipped", None, "unsubscribed", None): 2, ("failed", "recipient", None, 550): 1})

    # Later rows, further on: only the rows past the last one counted are read.
    settle(ids[5:6], "unknown", error_class="ambiguous")
    settle(ids[6:8], "skipped", reason="suppressed: bounced")
    found, statements = scrape(redis_client, namespace, broadcast.id)
    assert found == full_count(broadcast.id)
    # One read per status (sent, skipped, failed, unknown), each an ordered, limited range of
    # the index past its last row counted.
    reads = [s for s in statements if "GROUP BY" in s.upper()]
    assert len(reads) == 4 and all("deliveries.id >" in s and "LIMIT" in s.upper() for s in reads)

    # A row behind its status's range (a retry that failed late) is counted, without its
    # reason until the broadcast settles and the full count replaces all this.
    settle(ids[2:3], "failed", error_class="transient", code=451)
    found, _ = scrape(redis_client, namespace, broadcast.id)
    assert found[("failed", None, None, None)] == 1
    assert sum(n for group, n in found.items() if group[0] == "failed") == 2

    # The owner sends the failed rows again: their counter goes down, and everything of these
    # statuses is counted afresh (the late row's reason is known again).
    settle(ids[2:4], "pending")
    settle(ids[2:3], "failed", error_class="transient", code=451)
    found, _ = scrape(redis_client, namespace, broadcast.id)
    assert found == full_count(broadcast.id)
    assert found[("failed", "transient", None, 451)] == 1 and ("failed", None, None, None) not in found


def test_new_rows_are_read_a_chunk_at_a_time_and_the_rest_at_the_next_scrape(
        app, redis_client, namespace, monkeypatch):
    """Each scrape reads at most CHUNK new rows of a status, in id order (an index range:
    PostgreSQL's planner otherwise read the whole table); the rest come at the next scrape,
    meanwhile counted without their code, so every total stays exact."""
    from broadside.campaigns.broadcasts import active_figures as active

    monkeypatch.setattr(active, "CHUNK", 4)
    weekly = make_list(db.session, 10)
    broadcast = start_broadcast(app, weekly)
    ids = list(db.session.scalars(select(Delivery.id).where(Delivery.broadcast_id == broadcast.id)
                                  .order_by(Delivery.id)))
    settle(ids, "sent", code=250)
    db.session.execute(update(Delivery).where(Delivery.id.in_(ids)).values(attempts=1))
    db.session.commit()
    key = f"{namespace}:metrics:active:{broadcast.id}"
    seen = []
    for _ in range(4):
        groups = active_groups(db.session, redis_client, key, broadcast.id, 0, 0,
                               {**dict.fromkeys(OUTCOMES, 0), "sent": 10})
        sent = {(code, tries): n for status, _, _, code, tries, n in groups if status == "sent"}
        assert sum(sent.values()) == 10
        seen.append(sent.get((250, 1), 0))
    assert seen == [4, 8, 10, 10]
