"""The worker's memory with 1, 10 and 50 sending identities: every identity's stream is a
thread of the one worker process (jobs/stream.py), where it used to be a child process each
(about 70 MB apiece: ten identities, 700 MB).

For each count, a fresh database holds the identities (the default one, the environment's,
and N - 1 rows), all sending to the discarding SMTP responder (bench/smtp_sink.py). The lean
worker (`python -m jobs`, serving them all) is started; once every stream has taken its lease
its resident memory is read (VmRSS from /proc, summed over the worker and any process under
it: there should be none), then every identity sends one small broadcast (PER_IDENTITY
people each, the bench's 4 KB newsletter) and, all of them sent, it is read again, with the
peak (VmHWM). Target: 50 identities under 200 MB in all, after sending.

Run alone: .venv/bin/python bench/worker_memory.py [--backend sqlite|postgresql] [--counts 1,10,50]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness import Bench, populate, proc_status
from report import Figure, below
from smtp_sink import Sink

COUNTS = (1, 10, 50)
PER_IDENTITY = 5
TARGET_MB = 200.0
TARGET_AT = 50


def tree(pid: int) -> list[int]:
    """`pid` and every process under it (from /proc's parent ids)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        parents.setdefault(int(stat.rpartition(")")[2].split()[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(parents.get(current, []))
    return found


def rss_mb(pid: int) -> tuple[float, int]:
    """(the resident memory of `pid` and every process under it in MB, how many processes)."""
    pids = tree(pid)
    return sum(proc_status(p, "VmRSS") or 0.0 for p in pids), len(pids)


def _identities(app, count: int, url: str) -> list[int | None]:
    from broadside.delivery.identities import service as identities
    from webapp.extensions import db

    ids: list[int | None] = [None]
    with app.app_context():
        for n in range(1, count):
            ids.append(identities.create(db.session, identities.parse_input(
                {"name": f"Stream{n:02d}", "from": f"Stream {n} <stream{n}@bench.example>",
                 "transport": url, "delay_ms": 0})).id)
        db.session.remove()
    return ids


def _send_all(app, list_id: int, identity_ids: list[int | None]) -> list[int]:
    from render import BODY

    from broadside.campaigns.broadcasts.drafts import create_draft
    from broadside.campaigns.broadcasts.service import send_broadcast
    from webapp.extensions import db, get_jobs

    sent = []
    with app.app_context():
        for identity_id in identity_ids:
            draft = create_draft(db.session, list_id=list_id, subject="News for {{ name }}",
                                 body=BODY, identity_id=identity_id)
            sent.append(send_broadcast(db.session, draft.id, default_from="Bench <news@bench.example>",
                                       jobs=get_jobs()).id)
        db.session.remove()
    return sent


def _all_sent(app, broadcast_ids: list[int]) -> bool:
    from sqlalchemy import func, select

    from broadside.core.models import Broadcast
    from webapp.extensions import db

    with app.app_context():
        done = db.session.scalar(select(func.count()).select_from(Broadcast).where(
            Broadcast.id.in_(broadcast_ids), Broadcast.status == "sent"))
        db.session.remove()
    return done == len(broadcast_ids)


def _until(condition, timeout: float, worker, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline or not worker.alive():
            raise RuntimeError(f"{what} (after {timeout:.0f} s); worker log:\n{worker.output[-3000:]}")
        time.sleep(0.2)


def measure(count: int, backend: str, sink: Sink) -> dict:
    bench = Bench()
    try:
        url = bench.sqlite_url("memory") if backend == "sqlite" else bench.postgres_url("memory")
        app = bench.app(url)
        lists = populate(app, PER_IDENTITY, {"readers": PER_IDENTITY})
        identity_ids = _identities(app, count, sink.url)
        worker = bench.worker(url, smtp_url=sink.url, burst=False, label=f"memory-{count}")
        try:
            _until(lambda: worker.output.count("lease taken") >= count, 120, worker,
                   f"{count} streams did not all take their lease")
            time.sleep(1.0)  # the streams' first listen and maintenance tick, settled
            ready, processes = rss_mb(worker.proc.pid)
            started = sink.count()
            broadcasts = _send_all(app, lists["readers"], identity_ids)
            _until(lambda: _all_sent(app, broadcasts), 300, worker, "the broadcasts did not all go out")
            sent_mb, processes_after = rss_mb(worker.proc.pid)
            peak = proc_status(worker.proc.pid, "VmHWM") or 0.0
            messages = sink.count() - started
            threads = len(list(Path(f"/proc/{worker.proc.pid}/task").iterdir()))
            code = worker.terminate(60)
        finally:
            worker.stop()
        return {"count": count, "ready_mb": ready, "sent_mb": sent_mb, "peak_mb": peak,
                "processes": max(processes, processes_after), "threads": threads,
                "messages": messages, "exit": code}
    finally:
        bench.close()


def run(bench: Bench | None = None, backend: str = "sqlite",
        counts: tuple[int, ...] = COUNTS) -> list[Figure]:
    """(`bench` is unused: each count gets a fresh Bench of its own, its own database.)"""
    sink = Sink("discard")
    try:
        rows = [measure(count, backend, sink) for count in counts]
    finally:
        sink.close()
    figures = []
    for row in rows:
        target = row["count"] == TARGET_AT
        figures.append(Figure(
            "worker", f"worker RSS with {row['count']} identities, after each sent {PER_IDENTITY}",
            row["sent_mb"], "MB", f"< {TARGET_MB:.0f} MB" if target else "",
            below(row["sent_mb"], TARGET_MB) if target else None,
            f"{row['processes']} process(es), {row['threads']} threads; ready {row['ready_mb']:.1f} MB, "
            f"after sending {row['sent_mb']:.1f} MB, peak {row['peak_mb']:.1f} MB; "
            f"{row['messages']} messages ({backend}); SIGTERM exit {row['exit']}",
            extra=row))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--counts", default=",".join(str(c) for c in COUNTS))
    args = parser.parse_args()
    counts = tuple(int(c) for c in args.counts.split(","))
    figures = run(None, args.backend, counts)
    for figure in figures:
        print(f"{figure.name}: {figure.shown()} (target {figure.target or '-'}) {figure.result} "
              f"— {figure.detail}")
    return 0 if all(f.ok is not False for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
