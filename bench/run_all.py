"""Every benchmark in one run, one table, PASS/FAIL against the targets the issues state.

    .venv/bin/python bench/run_all.py            # the full set, the scale ones at 1,000,000
    .venv/bin/python bench/run_all.py --quick    # a reduced set, the scale ones at 100,000
    .venv/bin/python bench/run_all.py --markdown # also print the table as Markdown
    .venv/bin/python bench/run_all.py --only pages --only wire   # some scale areas alone

Needs Redis on 127.0.0.1:6379 and PostgreSQL on 127.0.0.1:5432 (user postgres, database
test), like the test suite. Everything is private to the run and removed afterwards: a temp
folder (SQLite files, logs), a PostgreSQL database created and dropped, a Redis key namespace.
Results go to bench/results/latest.json (git-ignored). Exit status 1 when any target FAILs.

Machines are shared and noisy, so each figure that has a peer is measured side by side with
it in the same run and reported as a ratio (the worker against a bare smtplib loop sending the
same bytes to the same server). See BENCHMARKS.md for the figures and what they mean.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import account_ceiling
import archive
import automations
import identities
import pipeline
import segments
import worker_memory
from harness import Bench, populate
from report import Figure, as_json, load_average, machine, markdown_table, table
from smtp_sink import Sink

RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"


@dataclass(frozen=True)
class Plan:
    throughput_sizes: tuple[int, ...]
    repeats_1k: int  # worker/bare pairs at 1k (the median is reported)
    pacing: tuple[tuple[int, int], ...]  # (SEND_DELAY_MS, recipients)
    pacing_aiosmtpd: int  # recipients for the 50 ms run timed by aiosmtpd's handler (0 = skip)
    recovery_size: int
    quick: bool  # the scale benchmarks (issue 19) at 100,000 instead of 1,000,000


# The worker against bare smtplib at 5,000 is wire.py's (three pairs, both databases), in
# the scale section: measuring it here too doubled two minutes of the run for one figure.
FULL = Plan(
    throughput_sizes=(1_000,), repeats_1k=3,
    pacing=((20, 100), (50, 60), (200, 20)), pacing_aiosmtpd=200,
    recovery_size=1_000, quick=False,
)
QUICK = Plan(
    throughput_sizes=(1_000,), repeats_1k=1,
    pacing=((20, 50), (50, 40), (200, 10)), pacing_aiosmtpd=0,
    recovery_size=1_000, quick=True,
)

# Issue 19's scale benchmarks: each module's `run(bench, quick)` at 1,000,000 (quick: 100,000)
# on generated data (fixed seed), removed at the run's end. The pages, the cancel, the
# snapshot and the list deletion share one million per database (`million.shared`: built by
# the first of them to run, each putting its broadcast in the state it needs); the others
# build their own.
SCALE = (
    ("import", "import a million (page, API, re-import)", "million_import"),
    ("pages", "pages at a million subscribers", "million_pages"),
    ("cancel", "cancelling a million", "cancel"),
    ("snapshot", "send to a million: the press and the first message", "million_snapshot"),
    ("storage", "bytes per sent delivery", "storage"),
    ("wire", "worker ceiling and throughput against bare smtplib", "wire"),
    ("lean", "the lean worker's imports and memory", "lean"),
    ("lists", "deleting a list at a million", "list_delete"),  # last: it deletes a list
)


class Run:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.figures: list[Figure] = []
        self.started = time.monotonic()

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f} s] {text}", file=sys.stderr, flush=True)

    def phase(self, area: str, name: str, function, *args, **kwargs):
        """Run one benchmark; a crash becomes an ERROR row instead of ending the run."""
        self.say(f"{area}: {name}")
        try:
            result = function(*args, **kwargs)
        except Exception as exc:  # reported in the table, with the traceback above it
            traceback.print_exc()
            self.figures.append(Figure(area, name, None, "", "", False, repr(exc)[:300], error=True))
            return None
        figures = result[0] if isinstance(result, tuple) else result
        self.figures.extend(figures)
        return result


def pipeline_benchmarks(run: Run, bench: Bench, sinks: dict[str, Sink], backend: str) -> None:
    """Throughput against aiosmtpd, the pace, recovery after SIGKILL (the worker's ceiling
    against the discarding server is bench/wire.py's, in the scale section)."""
    record = sinks["record"]
    plan = run.plan
    url = bench.sqlite_url("pipeline") if backend == "sqlite" else bench.postgres_url("pipeline")
    app = bench.app(url)
    lists = {f"throughput {n}": n for n in plan.throughput_sizes}
    people = max(plan.throughput_sizes)
    if backend == "sqlite":
        lists.update({f"pacing {d}": n for d, n in plan.pacing})
        lists["pacing aiosmtpd"] = plan.pacing_aiosmtpd
        lists["recovery"] = plan.recovery_size
    run.say(f"{backend}: {people:,} subscribers on {len(lists)} lists")
    ids = populate(app, people, lists)

    for size in plan.throughput_sizes:
        run.phase("throughput", f"{size:,} recipients, {backend}", pipeline.throughput,
                  bench, app, url, backend, record, ids[f"throughput {size}"], size,
                  plan.repeats_1k if size <= 1_000 else 1)
    if backend == "sqlite":
        runs = [(d, n, ids[f"pacing {d}"]) for d, n in plan.pacing]
        run.phase("pacing", "SEND_DELAY_MS " + "/".join(str(d) for d, _ in plan.pacing),
                  pipeline.pacing, bench, app, url, sinks["stamp"], runs)
        if plan.pacing_aiosmtpd:
            run.phase("pacing", "50 ms as aiosmtpd's handler sees it", pipeline.pacing_seen_by_aiosmtpd,
                      bench, app, url, record, ids["pacing aiosmtpd"], plan.pacing_aiosmtpd)
        run.phase("recovery", "SIGKILL and restart", pipeline.recovery, bench, app, url, record,
                  ids["recovery"])


def scale_benchmarks(run: Run, bench: Bench, only: set[str] | None) -> None:
    for area, name, module_name in SCALE:
        if only and area not in only:
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            run.figures.append(Figure(area, name, None, "", missing=True, detail=str(exc)))
            continue
        run.phase(area, name + (" (100k)" if run.plan.quick else " (1M)"), module.run, bench,
                  run.plan.quick)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a reduced set, under ~2 minutes")
    parser.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    parser.add_argument("--only", action="append", metavar="AREA",
                        help="run only these scale areas (" + ", ".join(a for a, _, _ in SCALE)
                             + ") and skip the rest of the run; repeatable")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    run = Run(plan)

    def on_term(signum, frame):
        raise SystemExit(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_before = load_average()
    bench = Bench()
    sinks: dict[str, Sink] = {}
    try:
        for kind in ("record", "discard", "stamp"):
            sinks[kind] = Sink(kind)
        run.say(f"run {bench.run_id}: Redis namespace {bench.namespace}, files in {bench.workdir}")
        only = set(args.only or ())
        if not only:
            for backend in ("sqlite", "postgresql"):
                run.phase("setup", f"sending benchmarks on {backend}", lambda b=backend: (
                    pipeline_benchmarks(run, bench, sinks, b) or []))
        run.phase("setup", "scale benchmarks", lambda: scale_benchmarks(run, bench, only) or [])
        if not only:
            for backend in ("sqlite", "postgresql"):
                run.phase("segments", f"segments at 100k, {backend}", segments.run, bench, backend)
            for backend in ("sqlite", "postgresql"):
                run.phase("automations", f"automations at 100k, {backend}", automations.run, bench,
                          backend)
            run.phase("identities", "provider batches and two identities, sqlite", identities.run,
                      bench, "sqlite")
            run.phase("archive", "public archive at 200 issues, sqlite", archive.run, bench)
            run.phase("ceiling", "the account ceiling's cost per request", account_ceiling.run, bench)
            run.phase("memory", "the worker's memory with 1, 10 and 50 identities, sqlite",
                      worker_memory.run, bench, "sqlite")
    finally:
        for sink in sinks.values():
            sink.close()
        bench.close()
    seconds = time.monotonic() - run.started
    info = machine()
    results = {
        "date": date,
        "mode": "quick" if args.quick else "full",
        "seconds": round(seconds, 1),
        "plan": asdict(plan),
        "machine": info,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "figures": as_json(run.figures),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))

    print()
    print(f"Broadside benchmarks, {results['mode']} run, {date}, {seconds:.0f} s")
    print(f"{info['cpu']}, {info['cores']} cores, {info.get('ram_gb', '?')} GB RAM; Python "
          f"{info['python']}, SQLite {info['sqlite']}, PostgreSQL {info['postgresql']}, "
          f"Redis {info['redis']}; load average {load_before} before, "
          f"{results['load_average_after']} after")
    print()
    print(table(run.figures))
    if args.markdown:
        print()
        print(markdown_table(run.figures))
    failed = [f for f in run.figures if f.ok is False]
    passed = [f for f in run.figures if f.ok]
    print()
    print(f"{len(passed)} PASS, {len(failed)} FAIL/ERROR; results in {RESULTS.relative_to(Path.cwd())}"
          if RESULTS.is_relative_to(Path.cwd()) else f"results in {RESULTS}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
