"""The bounce mailbox's processing rate: bounces applied per second with 10,000 in the
mailbox, read by the worker's own pass (broadside.feedback.mailbox.reading.read_mailbox) from
a private Dovecot on loopback.

    .venv/bin/python bench/bounce_mailbox.py [--backend sqlite|postgresql] [--bounces 10000]

Per backend: `bounces` people on one list, a broadcast to them written whole and marked sent
(setup, not timed), and one bounce per delivery in the mailbox, the eight sample formats of
tests/fixtures/bounces/ in turn, each addressed to its message's VERP Return-Path. Timed: the
passes (batches of 50: fetch, parse, apply each in its own transaction with its processed row,
then MOVE the batch and remember its last UID) until the inbox is empty. The figure: messages
processed per second (the unrecognised eighth included: each is read, stored and moved the same
way); the target is a floor above any list's bounce volume (a 100,000-person list bouncing
5 % is 5,000 messages: about four minutes at the floor, read a minute after they arrive).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Bench, populate, press_send
from million_snapshot import write_whole_snapshot
from report import Figure

TARGET = 20.0  # messages a second: 10,000 in under 9 minutes


def measure(app, list_id: int, backend: str, dovecot) -> Figure:
    from sqlalchemy import select, update

    from broadside.core.mailbox_urls import parse
    from broadside.core.models import Broadcast, Delivery, Subscriber
    from broadside.feedback.mailbox import state
    from broadside.feedback.mailbox.reading import read_mailbox
    from broadside.mail.message_refs import delivery_message_id
    from broadside.mail.verp import Verp
    from tests.bounces import FORMATS, fill
    from webapp.extensions import db

    broadcast_id, _ = press_send(app, list_id, enqueue=False)
    write_whole_snapshot(app, broadcast_id)
    verp = Verp(app.config["SECRET_KEY"])
    with app.app_context():
        session = db.session
        total = session.scalar(select(Broadcast.total).where(Broadcast.id == broadcast_id))
        session.execute(update(Delivery).where(Delivery.broadcast_id == broadcast_id)
                        .values(status="sent", attempts=1))
        session.execute(update(Broadcast).where(Broadcast.id == broadcast_id)
                        .values(status="sent", pending_count=0, sent_count=total))
        session.commit()
        rows = session.execute(select(Delivery.id, Subscriber.email).join(Subscriber)
                               .where(Delivery.broadcast_id == broadcast_id)
                               .order_by(Delivery.id)).all()
        bounces = []
        for n, (delivery_id, email) in enumerate(rows):
            message_id = delivery_message_id(delivery_id, broadcast_id, "news@bench.example")
            address = verp.address(message_id, "bounces", "bench.example") or ""
            bounces.append(fill(FORMATS[n % len(FORMATS)], verp=address, rcpt=email,
                                message_id=message_id, n=n))
        dovecot.append(bounces)
        box = parse(dovecot.url)
        state.ensure(session, box.key, "bench")
        applied = 0
        started = time.perf_counter()
        while True:
            done = read_mailbox(session, box, verp, budget_s=3600)
            applied += done.applied
            if not done.more:
                break
        seconds = time.perf_counter() - started
        session.remove()
    left = dovecot.count("INBOX")
    rate = applied / seconds
    ok = rate >= TARGET and left == 0 and applied == len(bounces)
    return Figure("bounces", f"mailbox bounces applied/s at {len(bounces):,}, {backend}",
                  round(rate, 1), "/s", f">= {TARGET:.0f}", ok,
                  f"{applied:,} in {seconds:.1f} s, batches of 50, {left} left in the inbox",
                  extra={"seconds": seconds, "applied": applied})


def run(bench: Bench, backend: str, bounces: int = 10_000) -> list[Figure]:
    from tests.imap_server import Dovecot

    url = bench.sqlite_url("mailbox") if backend == "sqlite" else bench.postgres_url("mailbox")
    app = bench.app(url)
    lists = populate(app, bounces, {"All": bounces})
    dovecot = Dovecot().start()
    try:
        return [measure(app, lists["All"], backend, dovecot)]
    finally:
        dovecot.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), action="append")
    parser.add_argument("--bounces", type=int, default=10_000)
    args = parser.parse_args()
    bench = Bench()
    failed = False
    try:
        for backend in args.backend or ["sqlite", "postgresql"]:
            for figure in run(bench, backend, args.bounces):
                failed |= figure.ok is False
                print(f"{figure.result:5} {figure.name:50} {figure.shown():>10}  {figure.detail}")
    finally:
        bench.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
