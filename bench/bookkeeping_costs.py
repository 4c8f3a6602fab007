"""Where the worker's time goes per message, piece by piece, and what cheaper forms of the
same guarded writes would cost: evidence for the throughput analysis in BENCHMARKS.md.

    .venv/bin/python bench/bookkeeping_costs.py [rows]

On a private SQLite file and a private PostgreSQL database, in batches of 20 (the worker's
MAX_BATCH at SEND_DELAY_MS=0), it times per row:

- the claim as the code does it (`ledger.claim`) against one guarded
  `UPDATE ... WHERE id IN (...) AND status = 'pending' RETURNING id` per batch;
- the outcome as the code does it (`Batch.flush` -> `ledger.transition`) against one Core
  executemany of the same guarded UPDATE, checked by its summed rowcount;
- the send-time re-check as the code does it (`recipient_state`, one query per recipient)
  against the same query as Core columns on `session.connection()`, and one query per batch;
- the lease check (`Lease.still_mine`, a Redis GET) and the per-message CPU work (token,
  render, message bytes).

Nothing here changes the pipeline; it only measures alternatives the lead may choose.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Bench, populate, press_send
from million_snapshot import write_whole_snapshot

BATCH = 20


def per_row_us(seconds: float, rows: int) -> float:
    return seconds / rows * 1e6


def measure(app, list_id: int, rows: int) -> dict[str, float]:
    from sqlalchemy import and_, bindparam, func, insert, select, update

    from broadside.campaigns.broadcasts import ledger
    from broadside.core.models import Delivery, Event, Subscriber, Subscription
    from broadside.core.timeutil import utcnow
    from jobs.outcomes import Batch
    from jobs.recheck import recipient_state
    from webapp.extensions import db

    figures: dict[str, float] = {}
    deliveries = Delivery.__table__

    def pending(broadcast_id: int) -> list[tuple[int, int]]:
        return [tuple(r) for r in db.session.execute(
            select(Delivery.id, Delivery.subscriber_id)
            .where(Delivery.broadcast_id == broadcast_id).order_by(Delivery.id)).all()]

    def batches(items):
        for start in range(0, len(items), BATCH):
            yield items[start:start + BATCH]

    with app.app_context():
        session = db.session
        # --- as the code does it: ledger.claim then Batch.flush("sent"), as Slice._loop does
        broadcast_id, _ = press_send(app, list_id, enqueue=False)
        write_whole_snapshot(app, broadcast_id)
        rows = pending(broadcast_id)[:rows]
        claim_s = flush_s = 0.0
        for chunk in batches(rows):
            started = time.perf_counter()
            ledger.claim(session, broadcast_id, chunk)
            session.commit()
            claim_s += time.perf_counter() - started
            batch = Batch(broadcast_id)
            for delivery_id, subscriber_id in chunk:
                batch.add("sent", delivery_id, subscriber_id,
                          {"sent_at": utcnow(), "smtp_code": 250, "reason": "250 OK queued",
                           "message_id": f"<d{delivery_id}@bench>", "error_class": None},
                          detail="250 OK queued")
            started = time.perf_counter()
            batch.flush(session)
            flush_s += time.perf_counter() - started
        figures["claim as the code does it (ledger.claim)"] = per_row_us(claim_s, len(rows))
        figures["outcome as the code does it (Batch.flush)"] = per_row_us(flush_s, len(rows))

        # --- alternative: one guarded UPDATE ... RETURNING per batch; Core executemany outcome
        broadcast_id, _ = press_send(app, list_id, enqueue=False)
        write_whole_snapshot(app, broadcast_id)
        rows = pending(broadcast_id)[:len(rows)]
        claim_stmt = (
            update(deliveries)
            .where(deliveries.c.broadcast_id == bindparam("b_broadcast"),
                   deliveries.c.status == "pending",
                   deliveries.c.id.in_(bindparam("b_ids", expanding=True)))
            .values(status="sending", claimed_at=bindparam("b_now"), updated_at=bindparam("b_now"),
                    attempts=deliveries.c.attempts + 1)
            .returning(deliveries.c.id)
        )
        sent_stmt = (
            update(deliveries)
            .where(deliveries.c.id == bindparam("b_id"), deliveries.c.status == "sending")
            .values(status="sent", updated_at=bindparam("b_now"), sent_at=bindparam("b_now"),
                    smtp_code=bindparam("b_code"), reason=bindparam("b_reason"),
                    message_id=bindparam("b_message_id"), error_class=None)
        )
        claim_s = flush_s = 0.0
        mismatches = 0
        for chunk in batches(rows):
            started = time.perf_counter()
            now = utcnow()
            moved = session.execute(claim_stmt, {"b_broadcast": broadcast_id, "b_now": now,
                                                 "b_ids": [d for d, _ in chunk]}).scalars().all()
            ledger.move_counters(session, broadcast_id, {("pending", "sending"): len(moved)})
            session.execute(insert(Event), [
                {"kind": "claimed", "broadcast_id": broadcast_id, "delivery_id": d,
                 "subscriber_id": s, "detail": "", "created_at": now} for d, s in chunk])
            session.commit()
            claim_s += time.perf_counter() - started
            started = time.perf_counter()
            now = utcnow()
            result = session.execute(sent_stmt, [
                {"b_id": d, "b_now": now, "b_code": 250, "b_reason": "250 OK queued",
                 "b_message_id": f"<d{d}@bench>"} for d, _ in chunk])
            if result.rowcount != len(chunk):
                mismatches += 1  # would fall back to one guarded UPDATE per row
            ledger.move_counters(session, broadcast_id, {("sending", "sent"): len(chunk)})
            session.execute(insert(Event), [
                {"kind": "sent", "broadcast_id": broadcast_id, "delivery_id": d,
                 "subscriber_id": s, "detail": "250 OK queued", "created_at": now} for d, s in chunk])
            session.execute(update(Subscriber)
                            .where(Subscriber.id.in_([s for _, s in chunk]),
                                   Subscriber.soft_bounce_count > 0)
                            .values(soft_bounce_count=0))
            session.commit()
            flush_s += time.perf_counter() - started
        figures["claim alt (one UPDATE ... RETURNING per batch)"] = per_row_us(claim_s, len(rows))
        figures["outcome alt (Core executemany per batch)"] = per_row_us(flush_s, len(rows))
        figures["  (batches whose summed rowcount was not exact)"] = mismatches

        # --- the send-time re-check: per recipient now, per batch as an alternative
        list_of = session.scalar(select(func.min(Subscription.list_id)))
        started = time.perf_counter()
        for _, subscriber_id in rows:
            recipient_state(session, broadcast_id, list_of, subscriber_id)
        session.commit()
        figures["re-check as the code does it (recipient_state)"] = per_row_us(
            time.perf_counter() - started, len(rows))
        subscribers, subscriptions = Subscriber.__table__, Subscription.__table__
        from broadside.core.models import Broadcast

        broadcasts = Broadcast.__table__
        state_stmt = (
            select(broadcasts.c.status, subscribers.c.email, subscribers.c.name,
                   subscribers.c.attributes, subscribers.c.suppression, subscriptions.c.status)
            .select_from(broadcasts)
            .outerjoin(subscribers, subscribers.c.id == bindparam("b_subscriber"))
            .outerjoin(subscriptions, and_(subscriptions.c.subscriber_id == subscribers.c.id,
                                           subscriptions.c.list_id == bindparam("b_list")))
            .where(broadcasts.c.id == bindparam("b_broadcast"))
        )
        connection = session.connection()
        started = time.perf_counter()
        for _, subscriber_id in rows:
            connection.execute(state_stmt, {"b_subscriber": subscriber_id, "b_list": list_of,
                                            "b_broadcast": broadcast_id}).one()
        session.commit()
        figures["re-check alt (per recipient, Core on the connection)"] = per_row_us(
            time.perf_counter() - started, len(rows))
        started = time.perf_counter()
        for chunk in batches(rows):
            session.execute(
                select(Subscriber.id, Subscriber.email, Subscriber.name, Subscriber.attributes,
                       Subscriber.suppression, Subscription.status)
                .outerjoin(Subscription, and_(Subscription.subscriber_id == Subscriber.id,
                                              Subscription.list_id == list_of))
                .where(Subscriber.id.in_([s for _, s in chunk]))).all()
        session.commit()
        figures["re-check alt (one query per batch)"] = per_row_us(time.perf_counter() - started,
                                                                   len(rows))
        session.remove()
    return figures


def per_message_cpu(app, rows: int) -> dict[str, float]:
    from render import BODY

    from broadside.delivery.lease import Lease
    from broadside.mail.rendering import CompiledRevision, freeze_content, message_bytes
    from broadside.mail.unsubscribe_tokens import Tokens, unsubscribe_url

    figures: dict[str, float] = {}
    redis = app.extensions["broadside_redis"]
    lease = Lease(redis, app.config["BROADSIDE_NAMESPACE"] + "-costs")
    lease.try_acquire()
    started = time.perf_counter()
    for _ in range(rows):
        lease.still_mine()
    figures["lease check (Lease.still_mine, a Redis GET)"] = per_row_us(time.perf_counter() - started, rows)
    lease.release()

    frozen = freeze_content(subject="News for {{ name }}", preheader="", body_markdown=BODY,
                            from_name="Bench", from_email="news@bench.example", postal_address="1 Road")
    compiled = CompiledRevision(subject="News for {{ name }}", html_template=frozen.html_template,
                                text_template=frozen.text_template)
    tokens = Tokens("x" * 20)  # one per slice, as the worker keeps it
    joined = datetime(2026, 1, 1, 12, 0, 0, 123456)
    timings = {"unsubscribe token + URL": 0.0, "render (merge fields)": 0.0, "message_bytes": 0.0}
    for i in range(rows):
        t0 = time.perf_counter()
        link = unsubscribe_url(tokens.make(i, 1, 1, joined), "https://news.example")
        t1 = time.perf_counter()
        rendered = compiled.render(email=f"r{i}@bench.example", name=f"Reader {i}",
                                   attributes={"city": "Oslo"}, unsubscribe_url=link)
        t2 = time.perf_counter()
        message_bytes(rendered, from_addr="Bench <news@bench.example>", to_addr=f"r{i}@bench.example",
                      message_id=f"<d{i}@bench>", headers={"List-Unsubscribe": f"<{link}>"})
        t3 = time.perf_counter()
        timings["unsubscribe token + URL"] += t1 - t0
        timings["render (merge fields)"] += t2 - t1
        timings["message_bytes"] += t3 - t2
    figures.update({k: per_row_us(v, rows) for k, v in timings.items()})
    return figures


def main() -> int:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    bench = Bench()
    try:
        for backend in ("sqlite", "postgresql"):
            url = bench.sqlite_url("costs") if backend == "sqlite" else bench.postgres_url("costs")
            app = bench.app(url)
            ids = populate(app, rows, {"costs": rows})
            print(f"\n{backend}: µs per row, batches of {BATCH}, {rows:,} rows")
            for name, value in measure(app, ids["costs"], rows).items():
                print(f"  {name:<58} {value:8.0f}")
        print(f"\nper message, no database: µs, {rows:,} messages")
        for name, value in per_message_cpu(app, rows).items():
            print(f"  {name:<58} {value:8.0f}")
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
