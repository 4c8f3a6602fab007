"""Benchmark: the owner's pages at a million (issue 19 point 3), on SQLite and PostgreSQL.

The database (bench/million.py's `shared`, fixed seed, built once a run): 1,150,000
subscribers (quick: 115,000) on "Everyone" plus two smaller lists, a 1,000,000-recipient
broadcast half sent (quick: 100,000), and settled history of 2,000,000 deliveries (quick:
1,000,000; see `million.sizes`) with their events. The app runs under gunicorn as the
Procfile's `web` line (2 workers x 4 threads, bench/scale.py's way), an owner signs in through
the login form, and two client threads ask for every page in a shuffled cycle for a few
two seconds each (scale._load); each page's p50/p95 is checked against its target:

  subscriber table p95 < 50 ms (unfiltered and every filter: status, list, substring on the
  address, on the name, starts-with, a rare substring, a substring that matches nothing),
  the total's own request < 50 ms, the progress fragment < 10 ms, the deliveries table
  < 50 ms (first page, a middle page by keyset, a status filter, a rare search), the dashboard and the
  System page < 100 ms, a /metrics scrape < 200 ms.

The build time of each database is reported (info; the two are built at once). Run standalone:
    .venv/bin/python bench/million_pages.py [--quick] [--backend sqlite|postgresql]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))

import million
import scale
import subscriber_table
from harness import ROOT, Bench
from report import Figure, below, median, percentile, table

TABLE_MS = 50.0
FRAGMENT_MS = 10.0
DELIVERIES_MS = 50.0
PAGE_MS = 100.0
METRICS_MS = 200.0
BACKENDS = ("sqlite", "postgresql")


def _middle_delivery(app, broadcast_id: int) -> int:
    from sqlalchemy import func, select

    from broadside.core.models import Delivery
    from webapp.extensions import db

    with app.app_context():
        low, high = db.session.execute(select(func.min(Delivery.id), func.max(Delivery.id))
                                       .where(Delivery.broadcast_id == broadcast_id)).one()
        db.session.remove()
    return (low + high) // 2


def jobs(app, lists: dict[str, int], broadcast_id: int) -> list[tuple[str, str, bool, float]]:
    """(name, path, htmx, target ms) of every page measured."""
    table_queries = {
        "subscriber table, unfiltered": ({}, False),
        "subscriber table, status unsubscribed": ({"status": "unsubscribed"}, True),
        "subscriber table, list Offers": ({"list": str(lists["Offers"])}, True),
        "subscriber table, list + rare status": ({"list": str(lists["Offers"]),
                                                  "status": "unconfirmed"}, True),
        "subscriber table, substring of the address": ({"q": "posteo"}, True),
        "subscriber table, substring of the name": ({"q": "hana h"}, True),
        "subscriber table, starts with": ({"q": "kai.evans", "match": "prefix"}, True),
        "subscriber table, rare substring": ({"q": "77777"}, True),
        "subscriber table, no-match substring": ({"q": "qqqzz"}, True),
    }
    out = [(name, "/subscribers/?" + urlencode(params), htmx, TABLE_MS)
           for name, (params, htmx) in table_queries.items()]
    if any(rule.rule == "/subscribers/total" for rule in app.url_map.iter_rules()):
        out += [("subscriber total, unfiltered", "/subscribers/total", True, TABLE_MS),
                ("subscriber total, substring", "/subscribers/total?q=posteo", True, TABLE_MS)]
    fragment = scale.progress_fragment_path(app, broadcast_id)
    if fragment:
        out.append(("progress fragment", fragment, True, FRAGMENT_MS))
    base = f"/broadcasts/{broadcast_id}/deliveries"
    middle = _middle_delivery(app, broadcast_id)
    out += [("deliveries, first page", base, True, DELIVERIES_MS),
            ("deliveries, a middle page", f"{base}?after={middle}", True, DELIVERIES_MS),
            ("deliveries, status pending", f"{base}?status=pending", True, DELIVERIES_MS),
            ("deliveries, search by address", f"{base}?q=77777", True, DELIVERIES_MS),
            ("dashboard", "/", False, PAGE_MS),
            ("System page", "/system/", False, PAGE_MS),
            ("/metrics scrape", "/metrics", False, METRICS_MS)]
    return out


def _wait_for(port: int, server: subprocess.Popen, seconds: float = 120) -> None:
    """subscriber_table.wait_for with more patience: a loaded machine starts gunicorn slowly."""
    import http.client

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"gunicorn exited: {server.stderr.read().decode()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"gunicorn did not answer within {seconds:.0f} s")


def measure(bench: Bench, backend: str, quick: bool, seconds: float) -> list[Figure]:
    shared = million.shared(bench, backend, quick)
    shared.half_sent()
    million.settle_all(bench)
    url, app, lists, broadcast_id = shared.url, shared.app, shared.lists, shared.broadcast_id
    size = f"{shared.recipients // 1000:,}k" if shared.recipients < 1_000_000 else "1M"
    figures = [Figure(
        "pages", f"the million's build, {size}, {backend}", sum(shared.steps.values()), "s",
        detail=f"{shared.subscribers:,} subscribers, a {shared.recipients:,}-person broadcast half "
               f"sent, {shared.history_rows:,} history deliveries with events (built once a run, "
               "at the same time as the other database's, and shared with the cancel and the "
               "snapshot); "
               + ", ".join(f"{k} {v:.1f} s" for k, v in shared.steps.items()))]
    port = subscriber_table.free_port()
    env = bench.env(url)
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "2",
         "--threads", "4", "webapp:create_app()"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    bench.processes.append(server)
    try:
        _wait_for(port, server)
        cookie = subscriber_table.login(port)
        measured = jobs(app, lists, broadcast_id)
        for name, path, htmx, target in measured:
            # One page at a time, so a slow page's requests do not sit in another's figures.
            timings, count, wall = scale._load(port, cookie, [(name, path, htmx)], seconds,
                                               scale.CLIENT_THREADS)
            values = timings[name]
            p95 = percentile(values, 95)
            figures.append(Figure(
                "pages", f"{name}, {size}, {backend}, p95", p95, "ms", f"< {target:.0f} ms",
                below(p95, target),
                f"p50 {median(values):.1f} ms over {count} requests in {wall:.1f} s from "
                f"{scale.CLIENT_THREADS} threads; GET {path}"))
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)
        if server.stderr:
            server.stderr.close()
    return figures


def run(bench: Bench, quick: bool, backends: tuple[str, ...] = BACKENDS) -> list[Figure]:
    million.build_shared(bench, backends, quick)  # both databases' at once, before any timing
    figures: list[Figure] = []
    for backend in backends:
        figures.extend(measure(bench, backend, quick, seconds=2.0))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100,000 subscribers, 1M history")
    parser.add_argument("--backend", choices=BACKENDS, action="append")
    args = parser.parse_args()
    bench = Bench()
    try:
        figures = run(bench, args.quick, tuple(args.backend or BACKENDS))
    finally:
        bench.close()
    print(table(figures))
    return 0 if all(f.ok is not False for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
