"""The send loop of two source trees, side by side in one run, against both SMTP servers of
bench/wire.py: aiosmtpd (`record`) and the discarding responder (`discard`, the ceiling).

    mkdir /tmp/before && git archive <commit> | tar -x -C /tmp/before
    .venv/bin/python bench/loop_ab.py /tmp/before [--backend sqlite|postgresql]
        [--size 2000] [--rounds 3] [--profile DIR]

Like bench/ab_throughput.py, round after round in alternating order, each worker's send paired
with the bare smtplib loop replaying the same bytes to the same server right after it: the
ratios of both trees come from the same minutes of the same (shared, noisy) machine. With
`--profile DIR`, each worker runs under `py-spy record --idle` (raw collapsed stacks in DIR),
for bench/loop_split.py.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
import pipeline
from harness import Bench, populate
from smtp_sink import Sink


class _Profiled(harness.WorkerProcess):
    """The same worker, started under py-spy (its samples written when it exits)."""

    out: Path | None = None

    def __init__(self, env, log_path, burst):  # type: ignore[no-untyped-def]
        real = subprocess.Popen

        def popen(command, **kwargs):  # type: ignore[no-untyped-def]
            spy = Path(sys.executable).with_name("py-spy")
            assert self.out is not None
            command = [str(spy), "record", "--idle", "--rate", "250", "--format", "raw",
                       "-o", str(self.out), "--", *command]
            return real(command, **kwargs)

        subprocess.Popen = popen  # type: ignore[assignment]
        try:
            super().__init__(env, log_path, burst)
        finally:
            subprocess.Popen = real  # type: ignore[assignment]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="the other source tree")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="postgresql")
    parser.add_argument("--size", type=int, default=2000, help="recipients per send")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sinks", default="record,discard")
    parser.add_argument("--profile", type=Path, help="py-spy each worker into this folder")
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": harness.ROOT}
    kinds = args.sinks.split(",")
    bench = Bench()
    sinks = {kind: Sink(kind) for kind in kinds}
    real_worker = harness.WorkerProcess
    try:
        url = bench.sqlite_url("ab") if args.backend == "sqlite" else bench.postgres_url("ab")
        app = bench.app(url)
        names = [f"ab {n}" for n in range(args.rounds * len(trees) * len(kinds))]
        lists = populate(app, args.size, {name: args.size for name in names})
        seen: dict[tuple[str, str], list[float]] = {}
        for round_ in range(args.rounds):
            order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
            for kind in kinds:
                sink = sinks[kind]
                for tree in order:
                    harness.ROOT = trees[tree]
                    label = f"{tree}-{kind}-{args.backend}-{round_}"
                    if args.profile:
                        args.profile.mkdir(parents=True, exist_ok=True)
                        _Profiled.out = args.profile / f"{label}.txt"
                        harness.WorkerProcess = _Profiled  # type: ignore[misc]
                    try:
                        _, stats, _ = pipeline._send_with_worker(
                            bench, app, url, sink, lists[names.pop()], args.size, label=label)
                    finally:
                        harness.ROOT = trees["after"]
                        harness.WorkerProcess = real_worker  # type: ignore[misc]
                    worker_rate = pipeline._rate(stats)
                    messages = sink.dump(bench.workdir / "sent.pickle") if kind == "record" else None
                    if messages is None:
                        messages = getattr(main, "messages", None)
                    main.messages = messages  # type: ignore[attr-defined]
                    sink.reset()
                    replay = messages or []
                    if kind != "record":
                        replay = [replay[i % len(replay)] for i in range(args.size)]
                    pipeline.bare_loop(sink.port, replay)
                    bare_rate = pipeline._rate(sink.stats())
                    sink.reset()
                    seen.setdefault((tree, kind), []).append(worker_rate / bare_rate)
                    print(f"round {round_ + 1} {kind:>7} {tree:>6}: worker {worker_rate:,.0f} msg/s, "
                          f"bare {bare_rate:,.0f} msg/s, ratio {worker_rate / bare_rate:.2f}",
                          flush=True)
        print()
        for (tree, kind), ratios in sorted(seen.items()):
            print(f"{args.backend} {kind:>7} {tree:>6}: ratio median {statistics.median(ratios):.2f} "
                  f"({', '.join(f'{r:.2f}' for r in ratios)})")
    finally:
        for sink in sinks.values():
            sink.close()
        bench.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
