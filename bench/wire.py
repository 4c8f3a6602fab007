"""A worker as fast as the wire (issue 19 point 5), on SQLite and PostgreSQL.

Per backend, on a small population of its own (a fixed naming, no randomness):

- `throughput`: the worker (SEND_DELAY_MS=0) against aiosmtpd, then at once the bare smtplib
  loop replaying the same bytes to the same server; the ratio of the rates the server saw.
  Target: >= 1.0 on PostgreSQL (the worker pipelines MAIL/RCPT/DATA, the bare loop does not;
  on SQLite the suite's usual 0.70 floor applies).
- `ceiling`: the same against the discarding responder (bench/smtp_sink.py, which offers
  PIPELINING): what the pipeline itself can do. Target: worker >= 0.9x the bare loop.

    .venv/bin/python bench/wire.py [--quick] [--backend sqlite|postgresql]
"""

from __future__ import annotations

import argparse
import sys
import time

from harness import Bench, populate
from pipeline import ceiling, throughput
from report import Figure
from smtp_sink import Sink

BACKENDS = ("sqlite", "postgresql")
THROUGHPUT_TARGETS = {"sqlite": 0.70, "postgresql": 1.0}


def run_backend(bench: Bench, backend: str, quick: bool, sinks: dict[str, Sink]) -> list[Figure]:
    # 5,000 a side: at ~1,000 msg/s, five seconds of the steady state a pair, from the
    # server's first message to its last (the worker's start-up is outside the rate). At
    # 10,000 the twelve pairs took five of the run's twenty minutes; the median of three
    # pairs, run in turn worker first and bare first, is what steadies the ratio here.
    size = 2_000 if quick else 5_000
    repeats = 1 if quick else 3
    url = bench.sqlite_url("wire") if backend == "sqlite" else bench.postgres_url("wire")
    app = bench.app(url)
    lists = {"wire throughput": size, "wire ceiling": size}
    ids = populate(app, size, lists, domain="wire.example")
    figures: list[Figure] = []
    result, messages = throughput(bench, app, url, backend, sinks["record"], ids["wire throughput"],
                                  size, repeats, target=THROUGHPUT_TARGETS[backend])
    figures.extend(result)
    figures.extend(ceiling(bench, app, url, backend, sinks["discard"], ids["wire ceiling"], size,
                           messages, repeats))
    return figures


def run(bench: Bench, quick: bool, backends: tuple[str, ...] = BACKENDS) -> list[Figure]:
    sinks = {kind: Sink(kind) for kind in ("record", "discard")}
    figures: list[Figure] = []
    try:
        for backend in backends:
            figures.extend(run_backend(bench, backend, quick, sinks))
    finally:
        for sink in sinks.values():
            sink.close()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 recipients, one pair")
    parser.add_argument("--backend", choices=BACKENDS, action="append")
    args = parser.parse_args()
    bench = Bench()
    failed = False
    started = time.perf_counter()
    try:
        for figure in run(bench, args.quick, tuple(args.backend or BACKENDS)):
            failed |= figure.ok is False
            print(f"{figure.result:5} {figure.name:55} {figure.shown():>12}  {figure.detail}",
                  flush=True)
    finally:
        bench.close()
    print(f"({time.perf_counter() - started:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
