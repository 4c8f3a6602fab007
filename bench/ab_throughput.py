"""Worker throughput of two source trees, side by side in one run: is a change faster?

    git worktree add /tmp/before <commit>
    .venv/bin/python bench/ab_throughput.py /tmp/before [--backend sqlite|postgresql]
        [--size 1000] [--rounds 3]

The figures of bench/run_all.py move by about ±0.1 between runs on these shared 2-core
machines, more than most changes do. Here the worker of each tree (this checkout, "after",
and the one given, "before") sends the same broadcast to the same SMTP server process in
alternating order, round after round, and each send is paired with a bare smtplib loop
replaying the same bytes, as in run_all.py; the medians of both trees come from the same
minutes of the same machine. Both trees must share this checkout's schema (the database is
migrated once, with this checkout's migrations): copy any newer `migrations/versions/*.py`
(and `migrations/env.py`) into the older tree, or its worker waits for a schema it does not
know.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
import pipeline
from harness import Bench, populate
from smtp_sink import Sink


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="the other source tree (e.g. a git worktree)")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--size", type=int, default=1000, help="recipients per send")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": harness.ROOT}
    if not (trees["before"] / "jobs" / "sending.py").exists():
        parser.error(f"{trees['before']} is not a Broadside source tree")

    bench = Bench()
    sink = Sink("record")  # aiosmtpd, in a process of its own
    try:
        url = bench.sqlite_url("ab") if args.backend == "sqlite" else bench.postgres_url("ab")
        app = bench.app(url)
        names = [f"ab {n}" for n in range(args.rounds * len(trees))]
        lists = populate(app, args.size, {name: args.size for name in names})
        pairs: dict[str, list[tuple[float, float]]] = {tree: [] for tree in trees}
        for round_ in range(args.rounds):
            order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
            for tree in order:
                harness.ROOT = trees[tree]  # the worker runs from (and imports) this tree
                try:
                    _, stats, _ = pipeline._send_with_worker(
                        bench, app, url, sink, lists[names.pop()], args.size, label=f"ab-{tree}")
                finally:
                    harness.ROOT = trees["after"]
                worker_rate = pipeline._rate(stats)
                messages = sink.dump(bench.workdir / "sent.pickle")
                sink.reset()
                pipeline.bare_loop(sink.port, messages)
                bare_rate = pipeline._rate(sink.stats())
                sink.reset()
                pairs[tree].append((worker_rate, bare_rate))
                print(f"round {round_ + 1} {tree:>6}: worker {worker_rate:,.0f} msg/s, bare loop "
                      f"{bare_rate:,.0f} msg/s, ratio {worker_rate / bare_rate:.2f}", flush=True)
        print()
        for tree, seen in pairs.items():
            ratios = [w / b for w, b in seen]
            print(f"{tree:>6} ({trees[tree]}): worker median {statistics.median(w for w, _ in seen):,.0f} "
                  f"msg/s, ratio median {statistics.median(ratios):.2f} "
                  f"({', '.join(f'{r:.2f}' for r in ratios)}), {args.backend}")
    finally:
        sink.close()
        bench.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
