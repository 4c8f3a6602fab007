"""Scale benchmarks: the snapshot at 1k/10k/100k, the worker's peak memory against the size of
the list, the 100k CSV import, and page latency at 100,000 subscribers.

The 100k database is the one bench/subscriber_table.py builds (100,000 people on three lists,
an owner), topped up so that 100,000 of them are unsuppressed, plus three lists holding the
first 1k, 10k and 100k of those. The import reuses bench/import_100k.py.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import import_100k
import progress_fragment
import subscriber_table
from harness import REDIS_URL, ROOT, Bench, broadcast_state, press_send, steer
from million_snapshot import write_whole_snapshot
from report import Figure, below, median, percentile
from smtp_sink import Sink

SNAPSHOT_TARGET_S = 3.0  # 100,000 pending rows in under 3 s on SQLite
MEMORY_TARGET_MB = 20.0  # 1k vs 100k recipients, less than 20 MB apart
TABLE_P95_MS = subscriber_table.TARGET_P95_MS  # 100 ms
FRAGMENT_P95_MS = 20.0  # the progress fragment at a 100k broadcast
SIZES = (1_000, 10_000, 100_000)
# One client thread per core, as bench/subscriber_table.py does by default: p95 is then the
# latency of a request, not the queueing of a saturated machine.
CLIENT_THREADS = 2


def _label(size: int) -> str:
    return f"{size // 1000}k"


# ---------------------------------------------------------------- the 100k database

def prepare_scale_database(bench: Bench) -> tuple[Path, str, object, dict[int, int]]:
    """Returns (workdir, database url, app, {size: list id})."""
    from sqlalchemy import func, insert, literal, select

    from broadside.core.models import MailingList, Subscriber, Subscription
    from webapp.extensions import db

    workdir = bench.workdir / "scale"
    workdir.mkdir()
    subscriber_table.populate(workdir)
    url = f"sqlite:///{workdir / 'bench.db'}"
    app = bench.app(url, migrate=False)
    lists: dict[int, int] = {}
    with app.app_context():
        session = db.session
        clean = session.scalar(select(func.count()).select_from(Subscriber)
                               .where(Subscriber.suppression.is_(None)))
        missing = max(SIZES) - clean
        if missing > 0:
            session.execute(insert(Subscriber), [
                {"email": f"extra{i}@bench.example", "name": f"Extra {i}", "attributes": {}}
                for i in range(missing)])
        for size in SIZES:
            mailing_list = MailingList(name=f"Scale {_label(size)}")
            session.add(mailing_list)
            session.flush()
            first = (select(Subscriber.id).where(Subscriber.suppression.is_(None))
                     .order_by(Subscriber.id).limit(size).subquery())
            session.execute(insert(Subscription).from_select(
                ["subscriber_id", "list_id", "status"],
                select(first.c.id, literal(mailing_list.id), literal("active"))))
            lists[size] = mailing_list.id
        session.commit()
        session.remove()
    return workdir, url, app, lists


# ---------------------------------------------------------------- snapshot

def snapshot(app, backend: str, lists: dict[int, int]) -> tuple[list[Figure], dict[int, int]]:
    """`send_broadcast` (freeze, INSERT ... SELECT of the audience, counters, queue) per size;
    each broadcast is then paused so no worker picks it up before it is wanted."""
    figures, broadcasts = [], {}
    for size, list_id in sorted(lists.items()):
        broadcast_id, seconds = press_send(app, list_id, enqueue=True)
        # A large audience is written by the worker after the press: time that too, here.
        seconds += write_whole_snapshot(app, broadcast_id)
        steer(app, broadcast_id, "pause")
        total = broadcast_state(app, broadcast_id)["total"]
        broadcasts[size] = broadcast_id
        checked = size == 100_000 and backend == "sqlite"
        figures.append(Figure(
            "scale", f"enqueue (snapshot) {_label(size)}, {backend}", seconds, "s",
            f"< {SNAPSHOT_TARGET_S:.0f} s" if checked else "",
            below(seconds, SNAPSHOT_TARGET_S) if checked else None,
            f"send_broadcast and the whole snapshot: {total:,} pending rows "
            f"({total / seconds:,.0f} rows/s), content frozen, job queued",
        ))
    return figures, broadcasts


# ---------------------------------------------------------------- worker memory

def memory(bench: Bench, app, url: str, discard: Sink, broadcasts: dict[int, int],
           bounded_sends: int, complete: tuple[int, ...]) -> list[Figure]:
    """Peak RSS (VmHWM) of the worker process: sizes in `complete` are sent to the end
    (burst mode); the 100k broadcast is sent for `bounded_sends` messages, then SIGTERM."""
    peaks: dict[int, tuple[float, int, float]] = {}
    for size in complete:
        discard.reset()
        steer(app, broadcasts[size], "resume")
        worker = bench.worker(url, smtp_url=discard.url, burst=True, label=f"memory-{size}")
        started = time.monotonic()
        worker.wait(timeout=120 + size / 20)
        sent = discard.count()
        if sent != size:
            raise RuntimeError(f"memory {size}: {sent} sent; log:\n{worker.output[-3000:]}")
        peaks[size] = (worker.peak_mb, sent, time.monotonic() - started)
    discard.reset()
    big = max(broadcasts)
    steer(app, broadcasts[big], "resume")
    worker = bench.worker(url, smtp_url=discard.url, burst=False, label=f"memory-{big}")
    started = time.monotonic()
    sent = discard.wait_for(bounded_sends, timeout=120 + bounded_sends / 20, alive=worker.alive)
    worker.terminate()
    sent = discard.count()
    peaks[big] = (worker.peak_mb, sent, time.monotonic() - started)
    discard.reset()

    figures = []
    for size, (peak, sent, seconds) in sorted(peaks.items()):
        how = "sent to the end" if size != big else (
            f"stopped (SIGTERM) after {sent:,} of {size:,} sends")
        figures.append(Figure("scale", f"worker peak RSS, {_label(size)} recipients", peak, "MB",
                              detail=f"VmHWM of the worker process; {how} in {seconds:.0f} s, "
                                     "SEND_DELAY_MS=0, discarding responder"))
    small = min(peaks)
    apart = abs(peaks[big][0] - peaks[small][0])
    figures.append(Figure(
        "scale", f"worker peak RSS, {_label(big)} minus {_label(small)}", apart, "MB",
        f"< {MEMORY_TARGET_MB:.0f} MB", below(apart, MEMORY_TARGET_MB),
        f"{peaks[big][0]:.1f} MB vs {peaks[small][0]:.1f} MB; the {_label(big)} run made "
        f"{peaks[big][1]:,} sends, the {_label(small)} run {peaks[small][1]:,}",
    ))
    return figures


# ---------------------------------------------------------------- CSV import

def csv_import(bench: Bench, rows: int) -> list[Figure]:
    """bench/import_100k.py's own measurement: a fresh subprocess importing the file through
    the real upload path, reporting its time and VmHWM as JSON."""
    from flask_migrate import upgrade

    from webapp import create_app
    from webapp.extensions import db

    workdir = bench.workdir / "import"
    workdir.mkdir()
    csv_path = workdir / "readers.csv"
    import_100k.generate(csv_path, rows)
    app = create_app(import_100k.config(workdir), environ={})
    with app.app_context():
        upgrade()
        db.engine.dispose()
    app.extensions["broadside_redis"].close()
    result = subprocess.run(
        [sys.executable, import_100k.__file__, "--child", str(workdir), str(csv_path)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"import failed:\n{result.stderr[-3000:]}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    size_mb = csv_path.stat().st_size / 1e6
    detail = (f"{figures['imported']:,} imported, {figures['rejected']:,} rejected, "
              f"{size_mb:.1f} MB file; {rows / figures['seconds']:,.0f} rows/s")
    if "again_seconds" in figures:
        detail += f"; the same file again (all updates) {figures['again_seconds']:.2f} s"
    baseline = (f"; {figures['baseline_mb']:.0f} MB of it before the import began (the app)"
                if "baseline_mb" in figures else "")
    ok_rows = figures["imported"] == rows
    return [
        Figure("scale", f"CSV import {_label(rows)} rows, time", figures["seconds"], "s",
               f"≤ {import_100k.TARGET_SECONDS:.0f} s",
               figures["seconds"] <= import_100k.TARGET_SECONDS and ok_rows, detail),
        Figure("scale", f"CSV import {_label(rows)} rows, peak RSS", figures["peak_mb"], "MB",
               f"< {import_100k.TARGET_MB:.0f} MB", below(figures["peak_mb"], import_100k.TARGET_MB),
               f"VmHWM of the importing process (a fresh interpreter){baseline}"),
    ]


# ---------------------------------------------------------------- pages

def progress_fragment_path(app, broadcast_id: int) -> str | None:
    """The progress fragment's URL, if this checkout has the route."""
    for rule in app.url_map.iter_rules():
        if (rule.endpoint.startswith("broadcasts.") and "progress" in (rule.rule + rule.endpoint)
                and "GET" in (rule.methods or ()) and "broadcast_id" in rule.arguments):
            return rule.rule.replace("<int:broadcast_id>", str(broadcast_id))
    return None


def _load(port: int, cookie: str, jobs: list[tuple[str, str, bool]], seconds: float,
          threads: int) -> tuple[dict[str, list[float]], int, float]:
    """`threads` clients, each on its own keep-alive connection, asking for the jobs in a
    shuffled cycle until the time is up. Returns timings (ms) per job name.

    Each client first asks for every job twice, untimed, on its own connection: a connection
    stays with one gunicorn worker process, and a process's first request of a page pays its
    one-off costs (a statement built and compiled once per process: the dashboard's growth
    chart ~100 ms). Warmed on one connection only, the other process's first requests were
    timed, two or three of ~50: enough to be the p95 of a 2-second sample."""
    def warm_up(client: subscriber_table.Client) -> None:
        for _, path, htmx in jobs:
            for _ in range(2):
                status, _, body = client.get(path, htmx)
                if status not in (200, 286):
                    raise RuntimeError(f"GET {path}: {status} {body[:300]!r}")

    warm = subscriber_table.Client(port, cookie)
    warm_up(warm)  # here first: a page that fails is said plainly, before any thread waits
    warm.conn.close()
    timings: dict[str, list[float]] = {name: [] for name, _, _ in jobs}
    lock = threading.Lock()
    errors: list[str] = []

    def run(index: int) -> None:
        client = subscriber_table.Client(port, cookie)
        warm_up(client)
        started.wait(timeout=300)  # a client that failed to warm up breaks it for all
        rng = random.Random(index)
        order = list(jobs)
        step = 0
        while time.monotonic() < deadline:
            if step % len(order) == 0:
                rng.shuffle(order)
            name, path, htmx = order[step % len(order)]
            step += 1
            status, elapsed, _ = client.get(path, htmx)
            with lock:
                if status in (200, 286):
                    timings[name].append(elapsed)
                else:
                    errors.append(f"{path}: {status}")
        client.conn.close()

    # Every client warmed, then all timed together from one moment (the barrier's action).
    deadline = 0.0
    wall = 0.0

    def start() -> None:
        nonlocal deadline, wall
        wall = time.monotonic()
        deadline = wall + seconds

    started = threading.Barrier(threads, action=start)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(run, range(threads)))
    wall = time.monotonic() - wall
    if errors:
        raise RuntimeError(f"{len(errors)} failed requests, e.g. {errors[:3]}")
    return timings, sum(len(v) for v in timings.values()), wall


def pages(bench: Bench, workdir: Path, app, broadcast_id: int, seconds: float) -> list[Figure]:
    """The app under gunicorn as the Procfile runs it (2 workers x 4 threads), an owner signed
    in through the real login form, and a pool of client threads per page, bounded in time."""
    port = subscriber_table.free_port()
    env = {**subscriber_table.environment(workdir), "BROADSIDE_NAMESPACE": bench.namespace,
           "REDIS_URL": REDIS_URL}
    # gunicorn writes only its start-up lines to stderr (no access log): a pipe cannot fill.
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "2",
         "--threads", "4", "webapp:create_app()"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    bench.processes.append(server)
    threads = CLIENT_THREADS
    figures: list[Figure] = []
    try:
        subscriber_table.wait_for(port, server)
        cookie = subscriber_table.login(port)

        table_jobs = [(name, "/subscribers/?" + _query(params), bool(params.get("q")))
                      for name, params in subscriber_table.QUERIES.items()]
        timings, count, wall = _load(port, cookie, table_jobs, seconds, threads)
        everything = [t for values in timings.values() for t in values]
        worst = max(timings, key=lambda name: percentile(timings[name], 95))
        p95 = percentile(everything, 95)
        figures.append(Figure(
            "pages", "subscriber table at 100k, p95 (all queries)", p95, "ms",
            f"< {TABLE_P95_MS:.0f} ms", below(p95, TABLE_P95_MS),
            f"p50 {median(everything):.1f} ms; {count} requests in {wall:.0f} s from {threads} "
            f"threads over {len(table_jobs)} query kinds (bench/subscriber_table.py's); slowest "
            f"kind: {worst}, p95 {percentile(timings[worst], 95):.1f} ms",
            extra={name: {"p50_ms": median(v), "p95_ms": percentile(v, 95), "requests": len(v)}
                   for name, v in timings.items()},
        ))

        # The broadcast pages are read mid-send: bench/progress_fragment.py's Writer plays the
        # worker meanwhile (claims and marks sent 10 rows every 50 ms through the ledger), so
        # the counters change under the readers as they do while a real send runs.
        writer = progress_fragment.Writer(app, broadcast_id)
        writer.start()
        try:
            figures.extend(_broadcast_pages(app, port, cookie, broadcast_id, seconds, threads))
        finally:
            writer.stop.set()
            writer.join(10)
        for figure in figures[1:]:
            if figure.value is not None:
                figure.detail += f"; a writer moved {writer.moved:,} rows to sent meanwhile"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)
        server.stderr.close()
    return figures


def _broadcast_pages(app, port: int, cookie: str, broadcast_id: int, seconds: float,
                     threads: int) -> list[Figure]:
    figures = []
    page = [("broadcast page", f"/broadcasts/{broadcast_id}", False)]
    timings, count, wall = _load(port, cookie, page, seconds / 2, threads)
    values = timings["broadcast page"]
    figures.append(Figure(
        "pages", "broadcast page at 100k, p95", percentile(values, 95), "ms",
        detail=f"p50 {median(values):.1f} ms; {count} requests in {wall:.0f} s from {threads} "
               "threads; a 100k broadcast mid-send (no target stated for the page)",
    ))

    fragment = progress_fragment_path(app, broadcast_id)
    if fragment is None:
        figures.append(Figure(
            "pages", "progress fragment at 100k, p95", None, "ms", f"< {FRAGMENT_P95_MS:.0f} ms",
            None, "no progress-fragment route in this checkout yet; "
                  "bench/scale.py finds it by name and measures it once it exists", missing=True))
    else:
        timings, count, wall = _load(port, cookie, [("fragment", fragment, True)], seconds / 2, threads)
        values = timings["fragment"]
        p95 = percentile(values, 95)
        figures.append(Figure(
            "pages", "progress fragment at 100k, p95", p95, "ms", f"< {FRAGMENT_P95_MS:.0f} ms",
            below(p95, FRAGMENT_P95_MS),
            f"p50 {median(values):.1f} ms; GET {fragment} as HTMX polls it; {count} requests "
            f"in {wall:.0f} s from {threads} threads",
        ))

    deliveries = _route(app, "deliveries", broadcast_id)
    if deliveries is not None:
        jobs = [("deliveries, status=sent", f"{deliveries}?status=sent", True),
                ("deliveries, search with no match", f"{deliveries}?q=zzz", True)]
        timings, count, wall = _load(port, cookie, jobs, seconds / 2, threads)
        for name, values in timings.items():
            figures.append(Figure(
                "pages", f"{name} at 100k, p95", percentile(values, 95), "ms",
                detail=f"p50 {median(values):.1f} ms; the evidence table (HTMX), "
                       "bench/progress_fragment.py's two requests; no target stated",
            ))
    return figures


def _route(app, word: str, broadcast_id: int) -> str | None:
    for rule in app.url_map.iter_rules():
        if (rule.endpoint.startswith("broadcasts.") and rule.rule.endswith("/" + word)
                and rule.arguments == {"broadcast_id"} and "GET" in (rule.methods or ())):
            return rule.rule.replace("<int:broadcast_id>", str(broadcast_id))
    return None


def _query(params: dict[str, str]) -> str:
    from urllib.parse import urlencode

    return urlencode(params)
