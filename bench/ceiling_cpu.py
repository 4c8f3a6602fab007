"""Where the CPU goes in the ceiling (issue 19 point 5): the worker and the bare smtplib loop
against the discarding responder, CPU seconds per message of every process involved.

    .venv/bin/python bench/ceiling_cpu.py [--size N] [--rounds R] [--base REF]
                                          [--backend sqlite|postgresql]

Per backend, on a population of its own (bench/wire.py's): the worker (`python -m jobs
--burst`, as bench/pipeline.py's `_send_with_worker` starts it) sends the list once to the
`record` server (for the bytes), then once to the `discard` server (measured); then the bare
loop (bench/pipeline.py's `bare_loop`, in a process of its own so its CPU is its own)
replays exactly those bytes to the same `discard` server (measured).

Measured: user+sys CPU from /proc/<pid>/stat, sampled every SAMPLE_S and interpolated at
the edges of the window the rate is computed over (the server's first MAIL FROM to its last
accepted end of DATA, bench/pipeline.py's `_rate`), for
- client: the worker process (all its threads), or the bare loop's process;
- sink: the discard server's process;
- database: on PostgreSQL, every backend connected to the bench's database
  (pg_stat_activity by datname: the worker's connections; the bench's own are idle).
  SQLite runs inside the worker, so its CPU is the client's.
Per message: each, their total, and the wall time. With --base REF the worker of that commit
runs too (from `git archive`), interleaved with this tree's (A B, then B A), same list, same
servers: the before and after in one run. Then what the CPU alone allows on this
machine's cores: a process runs on one core at a time (the worker's Python holds the GIL)
and all of them share the cores, so the worker's wall per message is at least
max(client, sink, database, total / cores); against the bare loop's measured wall that is
the highest worker/bare ratio reachable with perfect overlap. Without overlap (a strict
ping-pong, as the bare loop is) the wall would be the sum.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness import ROOT, Bench, broadcast_state, populate, press_send, steer
from smtp_sink import Sink

SAMPLE_S = 0.02
TICK = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count() or 1


def cpu_seconds(pid: int) -> tuple[float, float] | None:
    """(utime, stime) of a process (all its threads), or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK  # fields 14 and 15 of the line


class Sampler:
    """CPU time series of a changing set of pids, grouped by role, on a thread of its own."""

    def __init__(self) -> None:
        self.roles: dict[int, str] = {}
        self.series: dict[int, list[tuple[float, float, float]]] = {}
        self.lock = threading.Lock()
        self._running = True
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def watch(self, pid: int, role: str) -> None:
        with self.lock:
            if pid not in self.roles:
                self.roles[pid] = role
                self.series[pid] = []
        self._sample_one(pid)

    def _sample_one(self, pid: int) -> None:
        value = cpu_seconds(pid)
        if value is not None:
            with self.lock:
                self.series[pid].append((time.monotonic(), *value))

    def _run(self) -> None:
        while self._running:
            with self.lock:
                pids = list(self.roles)
            for pid in pids:
                self._sample_one(pid)
            time.sleep(SAMPLE_S)

    def stop(self) -> None:
        self._running = False
        self._thread.join(2)

    def within(self, start: float, end: float) -> dict[str, float]:
        """CPU seconds per role between two monotonic times (linear between samples): user
        plus system under the role's name, the system part alone as "<role> sys"."""
        totals: dict[str, float] = {}
        with self.lock:
            for pid, series in self.series.items():
                role = self.roles[pid]
                user = [(t, u) for t, u, _ in series]
                system = [(t, s) for t, _, s in series]
                used_user = _at(user, end) - _at(user, start)
                used_sys = _at(system, end) - _at(system, start)
                totals[role] = totals.get(role, 0.0) + used_user + used_sys
                totals[f"{role} sys"] = totals.get(f"{role} sys", 0.0) + used_sys
        return totals


def _at(series: list[tuple[float, float]], moment: float) -> float:
    if not series:
        return 0.0
    if moment <= series[0][0]:
        return series[0][1]
    for (t0, v0), (t1, v1) in zip(series, series[1:], strict=False):
        if t0 <= moment <= t1:
            return v0 + (v1 - v0) * (moment - t0) / (t1 - t0) if t1 > t0 else v1
    return series[-1][1]


def _descendants(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


class Backends:
    """The PostgreSQL backends connected to one database, found while a run goes on."""

    def __init__(self, database_url: str) -> None:
        import psycopg

        self.database = database_url.rsplit("/", 1)[1]
        self.conn = psycopg.connect(database_url.rsplit("/", 1)[0] + "/test", autocommit=True)

    def look(self, sampler: Sampler) -> None:
        rows = self.conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s",
                                 (self.database,)).fetchall()
        for (pid,) in rows:
            sampler.watch(pid, "database")

    def close(self) -> None:
        self.conn.close()


def _window(sink: Sink) -> tuple[float, float, int]:
    stats = sink.stats()
    return min(stats["mail_at"]), max(stats["end_at"]), stats["count"]


def measure_worker(bench: Bench, app, url: str, sink: Sink, list_id: int, size: int,
                   backends: Backends | None, label: str, tree: Path = ROOT) -> dict:
    """The worker of the tree at `tree` (`python -m jobs --burst`, as the Procfile starts it)
    sending the list once to `sink`."""
    sink.reset()
    sampler = Sampler()
    sampler.watch(sink.proc.pid, "sink")
    broadcast_id, _ = press_send(app, list_id, enqueue=False)
    log = bench.workdir / f"{label}.log"
    env = bench.env(url, SEND_DELAY_MS="0", SMTP_URL=sink.url, PYTHONPATH=str(tree))
    with open(log, "ab") as output:
        worker = subprocess.Popen([sys.executable, "-m", "jobs", "--burst"], cwd=tree, env=env,
                                  stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    bench.processes.append(worker)
    sampler.watch(worker.pid, "client")
    try:
        deadline = time.monotonic() + 60 + size / 20
        while worker.poll() is None and time.monotonic() < deadline:
            if backends is not None:
                backends.look(sampler)
            for pid in _descendants(worker.pid):
                sampler.watch(pid, "client")
            time.sleep(0.1)
    finally:
        sampler.stop()
        state = broadcast_state(app, broadcast_id)
        if state["status"] in ("queued", "sending", "paused"):
            steer(app, broadcast_id, "cancel")
    start, end, count = _window(sink)
    if state["status"] != "sent" or count != size:
        raise RuntimeError(f"{label}: {count} of {size} sent, {state}:\n"
                           f"{log.read_text(errors='replace')[-3000:]}")
    return {**sampler.within(start, end), "wall": end - start, "count": count}


def measure_bare(bench: Bench, sink: Sink, messages: list, label: str) -> dict:
    sink.reset()
    path = bench.workdir / f"{label}.pickle"
    path.write_bytes(pickle.dumps(messages))
    sampler = Sampler()
    sampler.watch(sink.proc.pid, "sink")
    code = ("import pickle, sys; sys.path.insert(0, sys.argv[3]); from pipeline import bare_loop; "
            "bare_loop(int(sys.argv[1]), pickle.loads(open(sys.argv[2], 'rb').read()))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(sink.port), str(path),
                             str(ROOT / "bench")])
    sampler.watch(proc.pid, "client")
    try:
        while proc.poll() is None:  # the last samples are taken before it is reaped
            time.sleep(0.05)
    finally:
        sampler.stop()
    if proc.returncode:
        raise RuntimeError(f"{label}: the bare loop exited with {proc.returncode}")
    start, end, count = _window(sink)
    return {**sampler.within(start, end), "wall": end - start, "count": count}


ROLES = ("client", "sink", "database")


def per_message(figures: dict) -> dict[str, float]:
    n = figures["count"]
    per = {role: figures.get(role, 0.0) / n * 1e6 for role in ROLES}
    per.update({f"{role} sys": figures.get(f"{role} sys", 0.0) / n * 1e6 for role in ROLES})
    per["total"] = sum(per[role] for role in ROLES)
    per["wall"] = figures["wall"] / n * 1e6
    return per


def row(name: str, per: dict[str, float]) -> None:
    print(f"{name:24} " + " ".join(f"{per[r]:5.0f} ({per[r + ' sys']:3.0f})" for r in ROLES)
          + f" {per['total']:8.0f} {per['wall']:8.0f} {1e6 / per['wall']:8,.0f}", flush=True)


def median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def run_backend(bench: Bench, backend: str, size: int, sinks: dict[str, Sink],
                sides: list[tuple[str, Path]], rounds: int) -> None:
    url = bench.sqlite_url("cpu") if backend == "sqlite" else bench.postgres_url("cpu")
    app = bench.app(url)
    ids = populate(app, size, {"cpu bytes": size, "cpu worker": size}, domain="wire.example")
    backends = Backends(url) if backend == "postgresql" else None
    runs: dict[str, list[dict[str, float]]] = {label: [] for label, _ in sides}
    runs["bare"] = []
    try:
        # The bytes the worker sends, for the bare loop (as bench/wire.py takes them).
        measure_worker(bench, app, url, sinks["record"], ids["cpu bytes"], size, None,
                       f"cpu-bytes-{backend}")
        messages = sinks["record"].dump(bench.workdir / f"cpu-sent-{backend}.pickle")
        sinks["record"].reset()
        print(f"\n{backend}, {size:,} messages of {sum(len(m[2]) for m in messages) / size / 1024:.1f}"
              f" KB; CPU µs per message (of which system)\n{'':24} client      sink        "
              f"database      total     wall    msg/s")
        for round_ in range(rounds):  # A B, then B A: drift favours neither
            for label, tree in (sides if round_ % 2 == 0 else sides[::-1]):
                figures = per_message(measure_worker(
                    bench, app, url, sinks["discard"], ids["cpu worker"], size, backends,
                    f"cpu-{label.split()[0]}-{backend}-{round_}", tree))
                runs[label].append(figures)
                row(f"{label} → discard", figures)
            figures = per_message(measure_bare(bench, sinks["discard"], messages,
                                               f"cpu-bare-{backend}-{round_}"))
            runs["bare"].append(figures)
            row("bare smtplib → discard", figures)
    finally:
        if backends is not None:
            backends.close()
    bare = median(runs["bare"])
    print(f"medians of {rounds}:")
    for label, _ in sides:
        row(f"{label}", median(runs[label]))
    row("bare smtplib", bare)
    for label, _ in sides:
        w = median(runs[label])
        longest = max(w["client"], w["sink"], w["database"], w["total"] / CORES)
        print(f"{label}: measured ratio {bare['wall'] / w['wall']:.2f} (medians); the CPU allows "
              f"at most {bare['wall'] / longest:.2f} with perfect overlap on {CORES} cores "
              f"(worker wall ≥ max(client, sink, db, total/{CORES}) = {longest:.0f} µs), "
              f"{bare['wall'] / w['total']:.2f} with none (a ping-pong of its parts); "
              f"0.90 needs a worker wall ≤ {bare['wall'] / 0.9:.0f} µs", flush=True)
    print(f"bare loop: wall {bare['wall'] / bare['total']:.2f}x its CPU (a ping-pong)")
    for label, _ in sides:  # each worker run against the bare loop of its own round
        ratios = [b["wall"] / w["wall"] for w, b in zip(runs[label], runs["bare"], strict=True)]
        cpu = [b["total"] / w["total"] for w, b in zip(runs[label], runs["bare"], strict=True)]
        print(f"{label}: worker/bare per round (wall) {', '.join(f'{r:.2f}' for r in ratios)}, "
              f"median {statistics.median(ratios):.2f}; bare CPU ÷ worker CPU (all processes) "
              f"{', '.join(f'{r:.2f}' for r in cpu)}, median {statistics.median(cpu):.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--base", help="a git ref: its worker too, interleaved (A/B)")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), action="append")
    args = parser.parse_args()
    print(f"load average {open('/proc/loadavg').read().split()[:3]}, {CORES} cores")
    bench = Bench()
    sides = [("worker", ROOT)]
    if args.base:
        base = bench.workdir / "base"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        sides = [(f"A {args.base}", base), ("B worktree", ROOT)]
    sinks = {kind: Sink(kind) for kind in ("record", "discard")}
    try:
        for backend in args.backend or ("sqlite", "postgresql"):
            run_backend(bench, backend, args.size, sinks, sides, args.rounds)
    finally:
        for sink in sinks.values():
            sink.close()
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
